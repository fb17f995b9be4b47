"""OpenAI's patterns spelled for the standard library's ``re``, which runs them faster than ``regex``.

``re`` has no ``\\p{L}``, but since Python 3.11 it has possessive quantifiers (``++``) and atomic groups, the
rest of what OpenAI's patterns need. So each ``\\p{...}`` becomes an explicit character class, with the code
points tiktoken's Unicode 16.0 tables give it (:mod:`tokenizer.fast.unicode16`); ``\\s`` too, since ``re``'s own
``\\s`` also takes ``"\\x1c"``..``"\\x1f"``, which are not Unicode White_Space; and ``$`` becomes ``\\Z`` (the end
of the text only, as in tiktoken's Rust regex; ``$`` also fits before a final ``"\\n"``, which the patterns
never let matter):

    >>> from tokenizer.patterns import R50K_PATTERN
    >>> stdlib_pattern(R50K_PATTERN).findall("Hello wörld, it's 2024!")
    ['Hello', ' wörld', ',', ' it', "'s", ' 2024', '!']

One detail makes it fast: ``re`` tests a character against a class's Basic Multilingual Plane part (U+0000 to
U+FFFF) with one table look-up, but against its part beyond that range by range, hundreds of them for
``\\p{L}``. So the classes hold their BMP part only, and text with characters beyond the BMP (emoji, historic
scripts, rare CJK) is split as a copy in which each of those characters is replaced by a *stand-in*: a BMP
character in exactly the same classes. The pieces keep their lengths, and the caller cuts the real text by
them (:func:`stand_in_astral`).

And one more: where a quantifier can never need to give back what it took, it is spelled possessive
(:data:`POSSESSIVE_SPELLINGS`), so that ``re`` keeps no place to backtrack to for it. tiktoken's own spellings of
the gpt2 and cl100k patterns are possessive already; o200k's and Llama 3's are not.

What this module does not do: spell any other pattern (only the escapes OpenAI's patterns use are known), or
split text itself (that is :mod:`tokenizer.pretokenize`, whose ``regex`` path stays the reference).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import cache
from itertools import chain, repeat

from ..patterns import KNOWN_PATTERNS, LLAMA3_PATTERN, O200K_PATTERN, R50K_PATTERN, unmask
from ..pretokenize import compile_pattern
from .unicode16 import RANGES

BMP_END = 0x10000

_UPPER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"  # o200k's letters of a word's capitalised head
_LOWER = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"  # and of its tail
_CONTRACTION = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
# Each pattern spelled with a possessive quantifier (``?+``, ``++``, ``*+``, ``{1,3}+``) wherever giving back
# cannot change a match, for one of two reasons: everything after it in its alternative may match nothing (so
# the first, greediest try always completes the alternative), or what comes next cannot start with what it would
# give back (" ?" before a class without the space). The greedy ones left must backtrack: o200k's optional
# leading character may be a mark, which the letter classes after it also take; its upper-case run gives back
# its last letter when that letter (a mark, or Lm, Lo) must start the lower-case run; "\s*" gives back a newline
# to "[\r\n]+"; "\s+(?!\S)" gives back a space. The tests hold the split to the pattern as written (``regex``),
# on every code point in context. Measured on the split of short messages: o200k's 9-13% faster, gpt2's 4-9%.
POSSESSIVE_SPELLINGS = {
    O200K_PATTERN: "|".join(
        [
            rf"""[^\r\n\p{{L}}\p{{N}}]?{_UPPER}*{_LOWER}++{_CONTRACTION}?+""",
            rf"""[^\r\n\p{{L}}\p{{N}}]?{_UPPER}++{_LOWER}*+{_CONTRACTION}?+""",
            r"""\p{N}{1,3}+""",
            r""" ?+[^\s\p{L}\p{N}]++[\r\n/]*+""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    R50K_PATTERN: R50K_PATTERN.replace(" ?", " ?+"),
    LLAMA3_PATTERN: (
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s*[\r\n]+|\s+(?!\S)|\s++"""
    ),
}
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
# What the patterns write, token by token: a property, \s or \S, a class's opening or closing bracket, $,
# any other escape (kept as it is), any other character. (A string: `re` compiles it on first use.)
_TOKEN = r"(?s)\\p\{(\w+)\}|\\([sS])|(\[\^?)|(\])|(\$)|\\.|."


@cache
def code_point_runs(name: str) -> tuple[tuple[int, int], ...]:
    """The inclusive ``(first, last)`` runs of ``\\p{name}`` (``"White_Space"`` for ``\\s``) in Unicode 16.0.

    >>> code_point_runs("N")[:2]
    ((48, 57), (178, 179))
    """
    runs = []
    for cell in RANGES[name].split():
        first, _, last = cell.partition("-")
        runs.append((int(first, 16), int(last or first, 16)))
    return tuple(runs)


def _bmp_class_body(name: str) -> str:
    """The BMP part of ``\\p{name}`` as the inside of an ``re`` character class."""
    parts = []
    for first, last in code_point_runs(name):
        if first >= BMP_END:
            break
        last = min(last, BMP_END - 1)
        parts.append(re.escape(chr(first)) if first == last else f"{re.escape(chr(first))}-{re.escape(chr(last))}")
    return "".join(parts)


def stdlib_pattern_text(pat_str: str) -> str:
    """``pat_str`` with its ``\\p{...}``, ``\\s``, ``\\S`` and ``$`` spelled for ``re`` (BMP classes only), and
    possessive where that changes nothing (:data:`POSSESSIVE_SPELLINGS`)."""
    pat_str = POSSESSIVE_SPELLINGS.get(pat_str, pat_str)
    out = []
    in_class = False
    bodies: dict[str, str] = {}  # a pattern names each class several times
    for m in re.finditer(_TOKEN, pat_str):
        prop, space, class_open, class_close, dollar = m.groups()
        if prop or space:
            name = prop or "White_Space"
            body = bodies.get(name) or bodies.setdefault(name, _bmp_class_body(name))
            if space == "S":
                if in_class:
                    raise ValueError(r"\S inside a character class has no stdlib spelling here; use the regex path")
                out.append(f"[^{body}]")
            else:
                out.append(body if in_class else f"[{body}]")
        elif class_open:
            in_class = True
            out.append(class_open)
        elif class_close:
            in_class = False
            out.append(class_close)
        elif dollar and not in_class:
            out.append(r"\Z")
        else:
            out.append(m.group())
    return "".join(out)


def stdlib_pattern(pat_str: str) -> re.Pattern[str]:
    """``pat_str`` (one of OpenAI's patterns) compiled for ``re``; split text with :func:`stand_in_astral`."""
    return re.compile(stdlib_pattern_text(pat_str))


class FastPretokenizer:
    """:class:`tokenizer.pretokenize.Pretokenizer`'s pieces, by ``re`` for OpenAI's patterns (``uses_stdlib``);
    any other pattern is run by the readable split as it is."""

    def __init__(self, pat_str: str):
        self.pat_str = pat_str
        self.uses_stdlib = pat_str in KNOWN_PATTERNS
        if self.uses_stdlib:
            self._findall = stdlib_pattern(pat_str).findall
        else:
            self.split = compile_pattern(pat_str).split  # type: ignore[method-assign]

    def split(self, text: str) -> list[str]:
        if not has_astral(text):
            return self._findall(text)
        return unmask(text, self._findall(stand_in_astral(text)))

    def piece_lengths_between(
        self, text: str, firsts: list[int], ends: list[int], *, astral: bool | None = None
    ) -> tuple[list[int], list[int]]:
        """``(counts, lengths)``: how many pieces each ``text[first:end]`` has, split alone, and the lengths of all
        those pieces, one stretch after another. For the short ends of the texts of one call
        (:func:`tokenizer.fast.array_split.piece_starts_of_texts`): ``re`` runs on ``text`` itself between the
        two places, which it treats as the ends of the string (OpenAI's patterns look neither behind nor at line
        starts), so no copy of each stretch is made. ``astral`` says whether any stretch holds a character beyond
        the BMP (None: look); those are split as copies, each with its stand-ins."""
        if astral is None:
            astral = has_astral(text)
        if self.uses_stdlib and not astral:
            pieces = list(map(self._findall, repeat(text), firsts, ends))
        else:
            pieces = [self.split(text[first:end]) for first, end in zip(firsts, ends)]
        return list(map(len, pieces)), list(map(len, chain.from_iterable(pieces)))


@cache
def compile_fast(pat_str: str) -> FastPretokenizer:
    """A (shared) :class:`FastPretokenizer` for ``pat_str``."""
    return FastPretokenizer(pat_str)


def has_astral(text: str) -> bool:
    """Does ``text`` hold a character beyond the BMP?

    >>> has_astral("naïve"), has_astral("👍")
    (False, True)
    """
    # A character beyond the BMP is the only one UTF-16 spells with 4 bytes (a lone surrogate passes as 2): this
    # encoding is several times faster than searching the text for such a character.
    return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


def stand_in_astral(text: str) -> str:
    """``text`` with each character beyond the BMP replaced by a BMP character in the same classes.

    >>> stand_in_astral("a𝐀1𝟏👍")  # a mathematical bold A (Lu), a bold 1 (N), an emoji (no class)
    'aÀ1²\\x80'
    """
    astral = _ASTRAL.findall(text)
    if not astral:
        return text
    stand_ins = "".join(astral).translate(_astral_stand_ins())
    between = _ASTRAL.split(text)  # the text around the astral characters: one part more than them
    return "".join(chain.from_iterable(zip(between, stand_ins))) + between[-1]


def _classes_of(code_point: int) -> frozenset[str]:
    """The property names (keys of RANGES) whose class holds ``code_point``."""
    return frozenset(
        name
        for name in RANGES
        if (i := bisect_right(code_point_runs(name), (code_point, 0x10FFFF)) - 1) >= 0
        and code_point_runs(name)[i][1] >= code_point
    )


@cache
def _astral_stand_ins() -> str:
    """A ``str.translate`` table: at each astral code point, a BMP character in exactly the same classes."""
    edges = {0x80, BMP_END} | {edge for name in RANGES for a, b in code_point_runs(name) for edge in (a, b + 1)}
    edges = sorted(e for e in edges if e <= 0x10FFFF) + [0x110000]
    stand_in_for = {}  # the classes -> the first BMP character in exactly those
    for start in edges:
        if start >= BMP_END:
            break
        # ASCII and what (?i) matches to ASCII letters could meet the patterns' literal characters
        if start > 0x7F and not re.fullmatch("(?i)[a-z]", chr(start)):
            stand_in_for.setdefault(_classes_of(start), chr(start))
    # the BMP part is never looked up (only astral characters are translated); a run of one character each
    runs = ["\0" * BMP_END]
    for start, end in zip(edges, edges[1:]):
        if start >= BMP_END:
            runs.append(stand_in_for[_classes_of(start)] * (end - start))
    return "".join(runs)
