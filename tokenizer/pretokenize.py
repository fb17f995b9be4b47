"""Pre-tokenization: cut text into pieces before BPE, so merges never cross a piece boundary.

A regular expression splits text into words with their leading space, runs of digits, runs of punctuation
and runs of whitespace. BPE then runs on each piece alone, which keeps " dog" one token whether it is
followed by "." or "!" and makes pieces cacheable:

    >>> compile_pattern(GPT2_PATTERN).split("Hello world, it's 2024!")
    ['Hello', ' world', ',', ' it', "'s", ' 2024', '!']

The patterns are OpenAI's, character for character as tiktoken uses them; they need the ``regex`` package for
``\\p{L}`` (any letter), ``\\p{N}`` (any number) and possessive quantifiers.

Fast path: on ASCII text each pattern has an equivalent written with explicit ASCII classes, which the
standard library's ``re`` runs about twice as fast. Mixed text is cut at *safe cuts* — just before a
``"\\n"`` that follows an ASCII letter or digit — into ASCII stretches (fast path) and stretches that contain
other characters (``regex``). At such a cut every pattern here ends a piece, and nothing before the cut
looks past it in a way that a string ending there would not (a letter or digit run stops at ``"\\n"`` exactly as
at the end of the string), so splitting the stretches separately gives the same pieces. ``split_reference`` is
the plain ``regex`` path; tests check both agree.
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

# GPT-2 as released in encoder.py (CS336 uses this form too).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The same splits, as tiktoken writes it for gpt2/r50k/p50k (possessive: no backtracking on long runs).
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
# cl100k ("GPT-4"): case-insensitive contractions, a letter run may take one leading non-letter,
# numbers in groups of at most 3, and runs of spaces merge (so indentation costs fewer tokens).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# o200k (GPT-4o): words split at case changes (CamelCase -> Camel, Case), contractions attached.
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

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
_SAFE_CUT = re.compile(r"[A-Za-z0-9](?=\n)")  # the cut is right after the match
_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


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
        """The pieces, straight from the pattern."""
        return self._unicode.findall(text)

    def split(self, text: str) -> list[str]:
        """The same pieces as :meth:`split_reference`, using the ASCII fast path where it applies."""
        if self._ascii is None:
            return self._unicode.findall(text)
        if text.isascii():
            return self._ascii.findall(text)
        return self._split_mixed(text)

    def _split_mixed(self, text: str) -> list[str]:
        ascii_findall = self._ascii.findall
        unicode_findall = self._unicode.findall
        pieces: list[str] = []
        pos = 0  # everything before pos is split; pos is a safe cut (or 0)
        while True:
            m = _NON_ASCII.search(text, pos)
            if m is None:
                pieces += ascii_findall(text, pos)
                return pieces
            start = _safe_cut_before(text, m.start(), pos)
            after = _SAFE_CUT.search(text, m.end())
            end = after.end() if after else len(text)
            if start > pos:
                pieces += ascii_findall(text, pos, start)
            pieces += unicode_findall(text, start, end)
            if end == len(text):
                return pieces
            pos = end


def _safe_cut_before(text: str, i: int, lo: int) -> int:
    """The last safe cut at or before ``i`` and after ``lo`` (``lo`` itself if there is none)."""
    j = text.rfind("\n", lo, i + 1)
    while j > lo:
        if text[j - 1] in _ALNUM:
            return j
        j = text.rfind("\n", lo, j)
    return lo


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
