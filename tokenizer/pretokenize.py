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

# tiktoken matches with Unicode 16.0's tables; the `regex` package here knows Unicode 17.0, whose new letters,
# digits and marks would split differently (a new CJK ideograph before "'s" joins a letter run instead of a
# punctuation run). These are those characters, found by probing tiktoken with each one in context; before
# splitting they are masked as U+FFFF (never assigned: "other" in every version) and restored after.
_NEWER_THAN_TIKTOKEN = [
    (0x558, 0x558), (0x58B, 0x58C), (0x5C8, 0x5C9), (0x88F, 0x88F), (0xB53, 0xB54), (0xC5C, 0xC5C),
    (0xCDC, 0xCDC), (0x1ACF, 0x1AF0), (0x208F, 0x208F), (0x209D, 0x209F), (0xA7CE, 0xA7CF), (0xA7D2, 0xA7D2),
    (0xA7D4, 0xA7D4), (0xA7DD, 0xA7DD), (0xA7E2, 0xA7E2), (0xA7F1, 0xA7F1), (0xAB6C, 0xAB6D),
    (0x107BB, 0x107BF), (0x10940, 0x10959), (0x10EC5, 0x10EC7), (0x10ECB, 0x10ECF), (0x10ED9, 0x10EEE),
    (0x10EF0, 0x10EFB), (0x11B0A, 0x11B0A), (0x11B60, 0x11B67), (0x11DB0, 0x11DDB), (0x11DE0, 0x11DE9),
    (0x11DF0, 0x11DF1), (0x1246F, 0x1246F), (0x12475, 0x1247F), (0x12550, 0x12686), (0x16EA0, 0x16EB8),
    (0x16EBB, 0x16ED3), (0x16FF2, 0x16FF6), (0x187F8, 0x187FF), (0x18CD6, 0x18CDA), (0x18D09, 0x18D20),
    (0x18D80, 0x18DF2), (0x18E00, 0x19191), (0x191A0, 0x191D2), (0x1B123, 0x1B128), (0x1B168, 0x1B168),
    (0x1D127, 0x1D128), (0x1D250, 0x1D252), (0x1D25B, 0x1D25C), (0x1D25F, 0x1D25F), (0x1D280, 0x1D281),
    (0x1D6A6, 0x1D6A6), (0x1DF1F, 0x1DF24), (0x1DF2B, 0x1DF81), (0x1DF90, 0x1DF96), (0x1DFCD, 0x1DFFF),
    (0x1E6C0, 0x1E6DE), (0x1E6E0, 0x1E6F5), (0x1E6FE, 0x1E6FF), (0x2B73A, 0x2B73F), (0x2B81E, 0x2B81E),
    (0x2CEA2, 0x2CEAD), (0x323B0, 0x33479), (0x3D000, 0x3FC3F),
]
_MASK_NEWER = {cp: 0xFFFF for a, b in _NEWER_THAN_TIKTOKEN for cp in range(a, b + 1)}
_NEWER_CHARS = frozenset(map(chr, _MASK_NEWER))
_NEWER_MIN = chr(_NEWER_THAN_TIKTOKEN[0][0])

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
        if max(text, default="\0") < _NEWER_MIN or _NEWER_CHARS.isdisjoint(set(text)):
            return self._unicode.findall(text)
        return _unmask(text, self._unicode.findall(text.translate(_MASK_NEWER)))

    def _split_mixed(self, text: str) -> list[str]:
        ascii_findall = self._ascii.findall
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
