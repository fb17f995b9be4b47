"""OpenAI's pre-tokenization patterns, exactly as tiktoken runs them.

Four regular expressions cut text into pre-tokens for every OpenAI encoding (gpt2/r50k/p50k, cl100k, o200k);
:mod:`tokenizer.pretokenize` runs them and :mod:`tokenizer.cuts` proves where text may be cut without changing
what they give. They are written for the ``regex`` package (``\\p{L}`` is any letter, ``++`` possessive).

One subtlety: a character class means what the Unicode tables say, and the tables differ by version. tiktoken
uses Unicode 16.0; the ``regex`` package here knows Unicode 17.0, whose new letters, digits and marks tiktoken
still calls "other". :data:`NEWER_THAN_TIKTOKEN` lists them, and :data:`RECATEGORISED_SINCE_TIKTOKEN` the few
older characters whose category 17.0 changed (U+0295 ʕ went from lowercase letter to "other letter", which
moves o200k's case split). :func:`mask_newer` stands in for both — U+FFFF (never assigned: "other" in every
version) for a new character, a character of the old category for a recategorised one — so that ``regex``
splits as tiktoken does. :mod:`tokenizer.fast.unicode16` holds the classes tiktoken sees, generated from these
tables.

Whitespace is one such class, and the one other modules spell most often: :data:`WHITESPACE` is the set they
all use (the trainer's coarse split, the safe cuts, the unstable tokens), and :data:`WHITESPACE_CLASS` the same
characters as the inside of a character class; the fast tier's class tables, generated from the same ``regex``
tables, are tested equal to it.

This module does not split anything (that is :mod:`tokenizer.pretokenize`) and holds no fast path.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

# GPT-2 as released in encoder.py.
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# The same splits as Stanford CS336's handout writes them: the contractions grouped (after "'" one letter decides
# which contraction can match, so their order does not matter), tested on the corpora. Not used to split: it is
# here so that the walkthroughs and the tests compare one spelling of it.
CS336_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
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

# OpenAI's patterns (tiktoken's spellings, and GPT-2's own).
OPENAI_PATTERNS = (GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN)
# Llama 3's, as its tokenizer.json (and Meta's tiktoken-based tokenizer) writes it: cl100k's as tiktoken first
# wrote it. It is not cl100k's in another spelling: a whitespace run that ends the text is cut after its last line
# break ("a\n " -> "a", "\n", " "), where cl100k's ``\s++$`` keeps it whole ("a", "\n "); everywhere else they
# agree (tests/test_known_patterns.py).
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)


@dataclass(frozen=True)
class KnownPattern:
    """What the package has for a pattern it knows, besides the ``regex`` split every pattern has: each known
    pattern is split with tiktoken's Unicode 16.0 classes (see :func:`mask_newer`) and spelled for the standard
    library's ``re`` (:mod:`tokenizer.fast.stdlib_patterns`); ``array_rules`` names its rules in
    :mod:`tokenizer.fast.array_split` (None: it has none, and long texts are split by ``re``); ``safe_cuts`` says
    whether :mod:`tokenizer.cuts`' rule holds for it (streaming, parallel jobs, the fast core's checkpoint)."""

    array_rules: str | None
    safe_cuts: bool


# The one table of the patterns the package knows, and what each has: a new pattern gets the fast core's routes
# (tokenizer/fast/core.py, FastCore.route) by being declared here, once its rules exist and are tested.
KNOWN_PATTERNS = {
    GPT2_PATTERN: KnownPattern(array_rules="gpt2", safe_cuts=True),
    R50K_PATTERN: KnownPattern(array_rules="gpt2", safe_cuts=True),
    CL100K_PATTERN: KnownPattern(array_rules="cl100k", safe_cuts=True),
    O200K_PATTERN: KnownPattern(array_rules="o200k", safe_cuts=True),
    LLAMA3_PATTERN: KnownPattern(array_rules="llama3", safe_cuts=True),
}
# A pattern not in the table: the generic routes only.
UNKNOWN_PATTERN = KnownPattern(array_rules=None, safe_cuts=False)

# Letters, digits and marks new in Unicode 17.0, which would split differently (a new CJK ideograph before "'s"
# joins a letter run instead of a punctuation run), found by probing tiktoken with each one in context.
NEWER_THAN_TIKTOKEN = [
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

# Characters assigned before Unicode 17.0 whose general category 17.0 changed, found by comparing every code
# point's classes in tiktoken and in `regex`: code point -> (category to tiktoken, category to `regex`, a
# stand-in that has the old category in both).
RECATEGORISED_SINCE_TIKTOKEN = {0x0295: ("Ll", "Lo", 0x0296)}

# Punctuation and symbols new in Unicode 17.0, found by comparing every code point's \p{P} and \p{S} in `regex`
# and in HF tokenizers' Oniguruma, which has Unicode 16.0's tables as tiktoken does. OpenAI's patterns never name
# these classes (to them a new symbol and an unassigned code point are both "other"), so only the steps of a
# tokenizer.json need them masked: DeepSeek V3's splits name \p{P} and \p{S} (tokenizer.hf_steps).
NEWER_SYMBOLS_THAN_TIKTOKEN = [
    (0x20C1, 0x20C4), (0x2B96, 0x2B96), (0x2E60, 0x2E63), (0xFBC3, 0xFBD2), (0xFD90, 0xFD91), (0xFDC8, 0xFDCE),
    (0x10EC9, 0x10ECA), (0x10ED0, 0x10ED8), (0x1CCFA, 0x1CCFC), (0x1CEBA, 0x1CED0), (0x1CED2, 0x1CED4),
    (0x1CEDD, 0x1CEFD), (0x1D1EB, 0x1D1FF), (0x1D253, 0x1D25A), (0x1D25D, 0x1D25E), (0x1D260, 0x1D27F),
    (0x1DB00, 0x1DB1C), (0x1F1AE, 0x1F1AE), (0x1F6D8, 0x1F6D9), (0x1F777, 0x1F77A), (0x1F7DA, 0x1F7DB),
    (0x1F7F1, 0x1F7FF), (0x1F8D0, 0x1F8D8), (0x1FA54, 0x1FA57), (0x1FA8A, 0x1FA8E), (0x1FAC8, 0x1FAC8),
    (0x1FACC, 0x1FACD), (0x1FADD, 0x1FADD), (0x1FAEA, 0x1FAEB), (0x1FAEF, 0x1FAEF), (0x1FAF9, 0x1FAFA),
    (0x1FBFA, 0x1FBFA),
]

# Whitespace: what \s means in the patterns, to `regex` and to tiktoken alike: Unicode's White_Space, 25 code points
# (tab to CR, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000; none above
# U+3000, which the tests check on every code point, as they check the fast tier's tables against tiktoken).
# Python's str.isspace and the standard library's \s also take "\x1c".."\x1f", so neither may stand for it. As a
# set of characters, and as the inside of a character class for `re` or `regex`, e.g. rf"[^{WHITESPACE_CLASS}]"
# (none of the characters is special inside a class).
WHITESPACE = frozenset(regex.findall(r"\s", "".join(map(chr, range(0x3001)))))
WHITESPACE_CLASS = "".join(sorted(WHITESPACE))

# The same characters as the inside of a `regex` character class, e.g. rf"[{NEWER_CLASS}]".
NEWER_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in NEWER_THAN_TIKTOKEN)
_MASK_NEWER = {cp: 0xFFFF for a, b in NEWER_THAN_TIKTOKEN for cp in range(a, b + 1)}
_MASK_NEWER.update({cp: stand_in for cp, (_, _, stand_in) in RECATEGORISED_SINCE_TIKTOKEN.items()})
_NEWER_CHARS = frozenset(map(chr, _MASK_NEWER))
_NEWER_MIN = min(_NEWER_CHARS)


def has_newer(text: str) -> bool:
    """Does ``text`` hold a character that tiktoken's Unicode tables do not know yet (or know otherwise)?

    >>> has_newer("Hello"), has_newer("\U000323b0's")
    (False, True)
    """
    return _holds_any(text, _NEWER_CHARS, _NEWER_MIN)


def mask_newer(text: str) -> str:
    """``text`` with each character newer than tiktoken's tables replaced by U+FFFF, and each recategorised one
    by a stand-in of its old category (same length).

    >>> mask_newer("\U000323b0's ʕ")
    "\\uffff's ʖ"
    """
    return text.translate(_MASK_NEWER)


_MASK_ALL_NEWER = _MASK_NEWER | {cp: 0xFFFF for a, b in NEWER_SYMBOLS_THAN_TIKTOKEN for cp in range(a, b + 1)}
_ALL_NEWER_CHARS = frozenset(map(chr, _MASK_ALL_NEWER))
_ALL_NEWER_MIN = min(_ALL_NEWER_CHARS)


def has_any_newer(text: str) -> bool:
    """:func:`has_newer`, counting the punctuation and symbols new in Unicode 17.0 too.

    >>> has_newer("\u2e60"), has_any_newer("\u2e60")
    (False, True)
    """
    return _holds_any(text, _ALL_NEWER_CHARS, _ALL_NEWER_MIN)


def _holds_any(text: str, chars: frozenset[str], lowest: str) -> bool:  # lowest: min(chars), a cheap first test
    return max(text, default="\0") >= lowest and not chars.isdisjoint(set(text))


def mask_any_newer(text: str) -> str:
    """:func:`mask_newer`, masking the punctuation and symbols new in Unicode 17.0 too: ``text`` as a Unicode
    16.0 regular expression engine (tiktoken's, or HF tokenizers' Oniguruma) classifies it, for patterns that
    name ``\\p{P}`` or ``\\p{S}``.

    >>> mask_any_newer("\U000323b0\u2e60ʕ")
    '\\uffff\\uffffʖ'
    """
    return text.translate(_MASK_ALL_NEWER)


def unmask(text: str, pieces: list[str]) -> list[str]:
    """The pieces of ``text`` with the lengths of ``pieces`` (which were split from a masked copy)."""
    out = []
    start = 0
    for piece in pieces:
        end = start + len(piece)
        out.append(text[start:end])
        start = end
    return out
