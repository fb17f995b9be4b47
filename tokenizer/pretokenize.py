"""Pre-tokenization: cut text into pieces before BPE, so merges never cross a piece boundary.

A regular expression splits text into words with their leading space, runs of digits, runs of punctuation
and runs of whitespace. BPE then runs on each piece alone, which keeps " dog" one token whether it is
followed by "." or "!" and makes pieces cacheable:

    >>> compile_pattern(GPT2_PATTERN).split("Hello world, it's 2024!")
    ['Hello', ' world', ',', ' it', "'s", ' 2024', '!']

The patterns are OpenAI's, character for character as tiktoken uses them (:mod:`tokenizer.patterns`); they
need the ``regex`` package for ``\\p{L}`` (any letter), ``\\p{N}`` (any number) and possessive quantifiers.

The fast core splits with the standard library's ``re`` instead, which runs the same patterns faster once
each ``\\p{...}`` and ``\\s`` is spelled as an explicit class with tiktoken's Unicode 16.0 code points
(:func:`tokenizer.fast.stdlib_patterns.compile_fast`); tests check both agree on every code point and on fuzz.

This module does not run BPE, and holds no fast path.
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

# The patterns live in patterns.py; other modules may import them from here too.
from .patterns import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    KNOWN_PATTERNS,
    O200K_PATTERN,
    OPENAI_PATTERNS,
    R50K_PATTERN,
    has_newer,
    mask_newer,
    unmask,
)


class Pretokenizer:
    """Splits text with one pattern, run by the ``regex`` package as tiktoken runs it."""

    def __init__(self, pat_str: str):
        self.pat_str = pat_str
        try:
            self._unicode = regex.compile(pat_str)
        except regex.error as e:
            raise ValueError(f"pat_str is not a valid regular expression for the `regex` package: {e}") from e
        self._is_openai = pat_str in KNOWN_PATTERNS  # its pieces cover the text: their lengths place them
        # The whole matches, as tiktoken takes them: findall would give a pattern's groups instead, where it has any.
        self._matches = self._unicode.findall if not self._unicode.groups else self._whole_matches

    def _whole_matches(self, text: str) -> list[str]:
        return [match.group() for match in self._unicode.finditer(text)]

    def split(self, text: str) -> list[str]:
        """The pieces, straight from the pattern (with Unicode 16.0's character classes, as tiktoken)."""
        if not has_newer(text):
            return self._matches(text)
        # Unicode 17.0's new and recategorised characters masked, for every pattern (tiktoken's tables are 16.0's
        # whatever the pattern; one that spells a newer character literally meets its stand-in instead)
        masked = mask_newer(text)
        if self._is_openai:
            return unmask(text, self._matches(masked))
        # another pattern may skip characters: a match's place in the masked copy is its place in the text
        return [text[match.start() : match.end()] for match in self._unicode.finditer(masked)]

    # The name under which tests and tools use this split as the oracle of the fast one.
    split_reference = split


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (which cannot be UTF-8) replaced by U+FFFD, as tiktoken does."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@lru_cache(maxsize=None)
def compile_pattern(pat_str: str) -> Pretokenizer:
    """A (shared) :class:`Pretokenizer` for ``pat_str``."""
    return Pretokenizer(pat_str)


@lru_cache(maxsize=64)
def special_token_regex(tokens: frozenset[str]) -> re.Pattern[str]:
    """A pattern finding any of ``tokens``; where several match at one place, the longest wins.

    >>> special_token_regex(frozenset({"<|a|>", "<|a|><|a|>"})).findall("<|a|><|a|><|a|>")
    ['<|a|><|a|>', '<|a|>']
    """
    alternatives = sorted(tokens, key=lambda t: (-len(t), t))  # regex alternation takes the first that fits
    return re.compile("|".join(map(re.escape, alternatives)))


# Up to this many special tokens are looked for one by one with ``in`` (a scan in C, far faster than a regex
# pass) before any regex runs: text that holds none of them costs one scan each. More (o200k_harmony's reserved
# tokens) go to the regex at once.
FEW_SPECIAL_TOKENS = 8


def special_tokens_in(text: str, tokens: frozenset[str]) -> frozenset[str]:
    """Those of ``tokens`` that ``text`` may hold: exactly those it holds when they are few, else all of them.
    :func:`special_token_regex` of the result finds in ``text`` what it finds with all of ``tokens``.

    >>> sorted(special_tokens_in("a <|endoftext|>", frozenset({"<|endoftext|>", "<|fim_prefix|>"})))
    ['<|endoftext|>']
    """
    if len(tokens) > FEW_SPECIAL_TOKENS:
        return tokens
    return frozenset(token for token in tokens if token in text)
