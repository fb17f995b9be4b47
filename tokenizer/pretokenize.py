"""Pre-tokenization: cut text into pieces before BPE, so merges never cross a piece boundary.

A regular expression splits text into words with their leading space, runs of digits, runs of punctuation
and runs of whitespace. BPE then runs on each piece alone, which keeps " dog" one token whether it is
followed by "." or "!" and makes pieces cacheable:

    >>> compile_pattern(GPT2_PATTERN).split("Hello world, it's 2024!")
    ['Hello', ' world', ',', ' it', "'s", ' 2024', '!']

The patterns are OpenAI's, character for character as tiktoken uses them (:mod:`tokenizer.patterns`); they
need the ``regex`` package for ``\\p{L}`` (any letter), ``\\p{N}`` (any number) and possessive quantifiers.

Fast path: on ASCII text each pattern has an equivalent written with explicit ASCII classes, which the
standard library's ``re`` runs about twice as fast. Mixed text is cut into ASCII stretches (fast path) and
stretches that contain other characters (``regex``), at *newline cuts*: just before a ``"\\n"`` that follows an
ASCII letter or digit. These are safe cuts (:mod:`tokenizer.cuts` proves that splitting the stretches
separately gives the same pieces), the kind quickest to find. ``split_reference`` is the plain ``regex`` path;
tests check both agree.

This module does not run BPE, and it only knows fast paths for OpenAI's four patterns: any other pattern is
run as it is.
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

from .cuts import last_newline_cut, next_newline_cut
# The patterns live in patterns.py; other modules may import them from here too.
from .patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, R50K_PATTERN, has_newer, mask_newer

# ASCII equivalents. On ASCII text: \p{L} is [A-Za-z], \p{N} is [0-9], \p{Lu} is [A-Z], \p{Ll} is [a-z],
# \p{Lt}\p{Lm}\p{Lo}\p{M} are empty, and \s (Unicode White_Space) is [\t\n\v\f\r ] — not \x1c-\x1f, which
# the standard library's \s would also match, so whitespace is spelled out.
_WS = r"\t\n\x0b\x0c\r "
_GPT2_ASCII = (
    rf"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]++| ?[0-9]++| ?[^{_WS}A-Za-z0-9]++|[{_WS}]++$|[{_WS}]+(?![^{_WS}])|[{_WS}]"""
)
_CL100K_ASCII = (
    rf"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{{1,3}}+| ?[^{_WS}A-Za-z0-9]++[\r\n]*+"""
    rf"""|[{_WS}]++$|[{_WS}]*[\r\n]|[{_WS}]+(?![^{_WS}])|[{_WS}]"""
)
_O200K_ASCII = "|".join(
    [
        r"""[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[0-9]{1,3}""",
        rf""" ?[^{_WS}A-Za-z0-9]+[\r\n/]*""",
        rf"""[{_WS}]*[\r\n]+""",
        rf"""[{_WS}]+(?![^{_WS}])""",
        rf"""[{_WS}]+""",
    ]
)
_ASCII_EQUIVALENT = {
    GPT2_PATTERN: _GPT2_ASCII,
    R50K_PATTERN: _GPT2_ASCII,
    CL100K_PATTERN: _CL100K_ASCII,
    O200K_PATTERN: _O200K_ASCII,
}

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


class Pretokenizer:
    """Splits text with one pattern; ``split`` is the fast path, ``split_reference`` the plain one."""

    def __init__(self, pat_str: str):
        self.pat_str = pat_str
        try:
            self._unicode = regex.compile(pat_str)
        except regex.error as e:
            raise ValueError(f"pat_str is not a valid regular expression for the `regex` package: {e}") from e
        ascii_pat = _ASCII_EQUIVALENT.get(pat_str)
        self._ascii = re.compile(ascii_pat) if ascii_pat else None

    def split_reference(self, text: str) -> list[str]:
        """The pieces, straight from the pattern (with Unicode 16.0's character classes, as tiktoken)."""
        if self._ascii is None:
            return self._unicode.findall(text)
        return self._findall_unicode(text)

    def split(self, text: str) -> list[str]:
        """The same pieces as :meth:`split_reference`, using the ASCII fast path where it applies."""
        if self._ascii is None:
            return self._unicode.findall(text)
        if text.isascii():
            return self._ascii.findall(text)
        return self._split_mixed(text)

    def _findall_unicode(self, text: str) -> list[str]:
        """``regex`` findall, with Unicode 17.0's new letters masked (only for OpenAI's patterns, whose pieces
        cover the whole text, so lengths map the masked pieces back)."""
        if not has_newer(text):
            return self._unicode.findall(text)
        return _unmask(text, self._unicode.findall(mask_newer(text)))

    def _split_mixed(self, text: str) -> list[str]:
        ascii_findall = self._ascii.findall
        pieces: list[str] = []
        pos = 0  # everything before pos is split; pos is a safe cut (or 0)
        while True:
            m = _NON_ASCII.search(text, pos)
            if m is None:
                pieces += ascii_findall(text, pos)
                return pieces
            start = last_newline_cut(text, m.start(), pos)
            end = next_newline_cut(text, m.end())
            if start > pos:
                pieces += ascii_findall(text, pos, start)
            pieces += self._findall_unicode(text[start:end])
            if end == len(text):
                return pieces
            pos = end


def _unmask(text: str, pieces: list[str]) -> list[str]:
    """The pieces of ``text`` with the lengths of ``pieces`` (which were split from a masked copy)."""
    out = []
    start = 0
    for piece in pieces:
        end = start + len(piece)
        out.append(text[start:end])
        start = end
    return out


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
