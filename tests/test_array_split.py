"""tokenizer.fast.array_split against the `regex` reference: the same piece starts on fuzz, corpora and every BMP code
point in many contexts (every code point in one context: test_every_code_point.py).

The oracle is ``compile_pattern(p).split_reference(text)`` (the pattern itself on `regex`, with tiktoken's Unicode
16.0 classes); its pieces give starts by their cumulative lengths.
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.array_split as array_split
from conftest import CORPUS_FILES, FUZZ_EXAMPLES, FUZZ_SHARE, corpus_text
from tokenizer.fast.array_split import (
    CASELESS,
    LOWER,
    OTHER,
    hard_segments,
    has_array_split,
    o200k_class_table,
    piece_starts,
)
from tokenizer.patterns import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    KNOWN_PATTERNS,
    LLAMA3_PATTERN,
    NEWER_THAN_TIKTOKEN,
    O200K_PATTERN,
    R50K_PATTERN,
    mask_newer,
)
from tokenizer.pretokenize import compile_pattern

IDS = ["gpt2", "r50k", "cl100k", "o200k"]
# What the module promises to split; the test below fails if one of them loses its array form.
SUPPORTED = [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN]
SUPPORTED_IDS = ["gpt2", "r50k", "cl100k", "o200k", "llama3"]

# One or two representatives of every class and every character the patterns name: letters of each case
# (with the contraction letters in both cases, and the long s that (?i) folds to s), Lm/Lo/Lt, marks, digits
# and other numbers, an astral letter and digit, each kind of whitespace, the apostrophe and slash,
# punctuation, an unassigned code point, a Unicode 17.0 letter tiktoken calls "other", and U+0295 (Ll to tiktoken).
ALPHABET = [
    *"aBxZ", *"stremvld", *"STREMVLD", "ſ", "ǅ", "ʰ", "中", "\u0301", "\u0903", "1", "9", "²", "Ⅻ",
    "\U00010400", "\U0001d7cf", " ", "\t", "\n", "\r", "\u3000", "\xa0", "\x85", "\x0b", "\u2028",
    "'", "/", ".", "!", "\uffff", chr(NEWER_THAN_TIKTOKEN[0][0]), "\u0295",
]
runs = st.lists(st.tuples(st.sampled_from(ALPHABET), st.integers(1, 4)).map(lambda t: t[0] * t[1]), max_size=20)
fuzz_texts = st.one_of(
    st.text(st.sampled_from(ALPHABET), max_size=30),
    runs.map("".join),
    # few characters, so that each meets each other in every order
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=4).flatmap(
        lambda few: st.text(st.sampled_from(few), max_size=25)
    ),
)
# o200k's own material, beside single characters: contractions of either case, a mark on a letter, CR LF,
# "/" after a line break, a caseless letter before an upper-case one
O200K_PIECES = [*ALPHABET, "'S", "'ll", "'Re", "'D", "x\u0301", "\r\n", "\n/", "中A", "ʰB"]
o200k_texts = st.one_of(
    st.lists(st.sampled_from(O200K_PIECES), max_size=20).map("".join),
    st.lists(st.sampled_from(O200K_PIECES), min_size=1, max_size=4).flatmap(
        lambda few: st.lists(st.sampled_from(few), max_size=15).map("".join)
    ),
)
long_runs = st.lists(
    st.tuples(st.sampled_from(ALPHABET), st.integers(1, 300)).map(lambda t: t[0] * t[1]), max_size=6
).map("".join)

# Contexts that tell the classes apart (as tests/test_fast_split.py uses them): every code point in each.
CONTEXTS = [
    "{}", "a{}b", "{}'s", "'{}", " {}", "1{}2", "A{}b", "{}Ab", "x{}\u0301", "{} \n", "!{}\r\n", "{}{}", "{}\n/{}a",
]
EVERY_CONTEXT = "a{}b1{}2{}Ab{}'s"
EVERY_CHARACTER = "".join(map(chr, range(0x110000)))  # surrogates too: the table must call them "other"
BMP = EVERY_CHARACTER[:0x10000]


def code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)


def reference_starts(text: str, pattern: str) -> list[int]:
    # split_reference splits a copy with Unicode 17.0's changes masked (same length) and cuts the text by its
    # pieces' lengths; only the lengths matter here, so the masked copy is split directly (no pieces rebuilt)
    pieces = compile_pattern(pattern).split_reference(mask_newer(text))
    lengths = np.fromiter(map(len, pieces), np.int64, len(pieces))
    return np.concatenate([[0], np.cumsum(lengths[:-1])]).tolist() if len(pieces) else []


def array_starts(text: str, pattern: str) -> list[int]:
    starts = piece_starts(code_points(text), pattern)
    assert starts.dtype == np.int64
    return starts.tolist()


def every_code_point_text(context: str, characters: str) -> str:
    # "\n\n" between the copies, as test_fast_split does: each copy is split as it would be alone
    return "\n\n".join(context.replace("{}", c) for c in characters)


def test_docstring_examples():
    result = doctest.testmod(array_split)
    assert result.failed == 0 and result.attempted > 0


def test_both_class_tables_call_the_same_code_points_whitespace():
    # the separators between joined texts and the safe cuts read whitespace from o200k's table for every pattern
    o200k_whitespace = (o200k_class_table() & 3) == array_split.SPACE_KIND
    assert np.array_equal(o200k_whitespace, (array_split.class_table() & array_split.SPACE) != 0)
    assert o200k_whitespace.sum() == 25  # White_Space: tab to CR, space, U+0085, U+00A0, U+1680, U+2000-U+200A...


def test_supported_patterns():
    assert [p for p in KNOWN_PATTERNS if has_array_split(p)] == SUPPORTED
    assert not has_array_split(r"\p{L}+|\P{L}")
    assert piece_starts(code_points("ab"), r"\p{L}+|\P{L}") is None


@pytest.mark.parametrize("pattern", SUPPORTED, ids=SUPPORTED_IDS)
def test_empty_and_one_character(pattern):
    empty = piece_starts(code_points(""), pattern)
    assert empty.dtype == np.int64 and empty.tolist() == []
    for c in ALPHABET:
        assert array_starts(c, pattern) == [0]


def test_examples():
    text = "Hello world, it's 2024!"
    assert array_starts(text, GPT2_PATTERN) == [0, 5, 11, 12, 15, 17, 22]  # ' 2024' one piece
    assert array_starts(text, CL100K_PATTERN) == [0, 5, 11, 12, 15, 17, 18, 21, 22]  # ' ', '202', '4'
    text = "x\t'LL\n\n  y  "
    # gpt2: x, \t, ', LL, "\n\n ", " y", "  " (contractions are lower case); cl100k: x, \t, 'LL, "\n\n", " ",
    # " y", "  "
    assert array_starts(text, GPT2_PATTERN) == [0, 1, 2, 3, 5, 8, 10] == reference_starts(text, GPT2_PATTERN)
    assert array_starts(text, CL100K_PATTERN) == [0, 1, 2, 5, 7, 8, 10] == reference_starts(text, CL100K_PATTERN)


@pytest.mark.parametrize("pattern", SUPPORTED, ids=SUPPORTED_IDS)
@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(text=fuzz_texts)
def test_fuzz_equals_reference(pattern, text):
    assert array_starts(text, pattern) == reference_starts(text, pattern)


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(text=o200k_texts)
def test_o200k_fuzz_equals_reference(text):
    assert array_starts(text, O200K_PATTERN) == reference_starts(text, O200K_PATTERN)


@pytest.mark.parametrize("pattern", SUPPORTED, ids=SUPPORTED_IDS)
@settings(max_examples=max(FUZZ_EXAMPLES // 10, 30), deadline=None)
@given(text=long_runs)
def test_long_runs_equal_reference(pattern, text):
    assert array_starts(text, pattern) == reference_starts(text, pattern)


@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_corpus_equals_reference(filename):
    text = corpus_text(filename, 1_000_000)
    for pattern in SUPPORTED:
        assert array_starts(text, pattern) == reference_starts(text, pattern), pattern
    # o200k's regex fallback is for rare material: a rule that made common text hard would stay exact but slow
    segments = hard_segments(code_points(text))
    assert (segments[:, 1] - segments[:, 0]).sum() < len(text) / 1000


@pytest.mark.parametrize("pattern", SUPPORTED, ids=SUPPORTED_IDS)
def test_every_bmp_code_point_in_every_context_equals_reference(pattern):
    for context in CONTEXTS:
        text = every_code_point_text(context, BMP)
        assert array_starts(text, pattern) == reference_starts(text, pattern), context


def test_a_wrong_class_is_caught(monkeypatch):
    # U+2028 (line separator) taken for "other": the every-code-point text must show it
    wrong = array_split.class_table().copy()
    wrong[0x2028] = 0
    monkeypatch.setattr(array_split, "class_table", lambda: wrong)
    text = every_code_point_text(EVERY_CONTEXT, BMP)
    for pattern in [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN]:  # (o200k has a table of its own: see below)
        assert array_starts(text, pattern) != reference_starts(text, pattern), pattern


# o200k: text whose segments its rules leave to the regex (a mark after punctuation or a space, after a
# contraction, or first; contractions in a chain), each with the segment it makes hard
HARD = [
    ("x\n//\u0301\n//\u0301a b", (1, 10)),  # (cuts: after a letter before anything outside a word, before a space)
    ("a b.\u0301c d", (3, 6)),
    ("it's\u0301 x", (0, 5)),
    ("\u0301a b", (0, 2)),
    ("x'll'll's y", (0, 9)),
]


@pytest.mark.parametrize("text, segment", HARD)
def test_o200k_hard_segments_are_split_by_the_regex(monkeypatch, text, segment):
    assert hard_segments(code_points(text)).tolist() == [list(segment)]
    expected = reference_starts(text, O200K_PATTERN)
    assert array_starts(text, O200K_PATTERN) == expected
    # the regex's pieces are spliced in: one that never splits leaves the segment one piece
    class OnePiece:
        def split(self, segment_text):
            return [segment_text]

    monkeypatch.setattr(array_split, "compile_fast", lambda pattern: OnePiece())
    first, end = segment
    outside = [s for s in expected if not first <= s < end]
    assert array_starts(text, O200K_PATTERN) == sorted([first, *outside])


def test_o200k_simple_text_has_no_hard_segment():
    text = "Hello wörld, it's 2024!\n/usr/bin\r\n  中文 ǅx ʰA 'Ll: é\u0301 x//\n/.a"
    assert hard_segments(code_points(text)).tolist() == []
    assert hard_segments(code_points("")).tolist() == []
    assert array_starts(text, O200K_PATTERN) == reference_starts(text, O200K_PATTERN)


# One class changed in o200k's table, and a text in which that changes the pieces: each rule is needed.
@pytest.mark.parametrize(
    "character, wrong_class, text",
    [
        ("/", OTHER, ".\n/.a"),  # "/" no longer taken after a line break
        ("'", OTHER, "it's"),  # no contractions
        ("ǅ", LOWER, "aǅ"),  # title case taken for lower case
        ("\u0301", CASELESS, "x\n//\u0301\n//\u0301a"),  # a mark only a letter (never hard)
        ("\n", OTHER, "a\nb"),
    ],
)
def test_a_wrong_o200k_class_is_caught(monkeypatch, character, wrong_class, text):
    wrong = o200k_class_table().copy()
    wrong[ord(character)] = wrong_class
    monkeypatch.setattr(array_split, "o200k_class_table", lambda: wrong)
    assert array_starts(text, O200K_PATTERN) != reference_starts(text, O200K_PATTERN)


# Text with many hard segments: the material of HARD and marks among the alphabet's characters
many_hard = st.lists(
    st.one_of(st.sampled_from([text for text, _ in HARD]), st.sampled_from(["\u0301", "\u0903", "'ll's", " ", "."]),
              st.sampled_from(ALPHABET)),
    max_size=40,
).map("".join)


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(text=many_hard)
def test_o200k_many_hard_segments_equal_reference(text):
    assert array_starts(text, O200K_PATTERN) == reference_starts(text, O200K_PATTERN)
    # the hard segments are split in one regex call, joined by the separator: each splits as it would alone,
    # and the separator is a piece of its own
    split = compile_pattern(O200K_PATTERN).split_reference
    segments = [text[first:end] for first, end in hard_segments(code_points(text)).tolist()]
    alone = [piece for segment in segments for piece in split(segment) + [array_split.SEPARATOR]][:-1]
    assert split(array_split.SEPARATOR.join(segments)) == (alone if segments else [])


def test_o200k_hard_segments_take_one_regex_call(monkeypatch):
    text = "".join(text for text, _ in HARD) * 50
    assert len(hard_segments(code_points(text))) > 100
    expected = reference_starts(text, O200K_PATTERN)
    calls = []
    pretokenizer = compile_pattern(O200K_PATTERN)

    class Counted:
        def split(self, joined):
            calls.append(joined)
            return pretokenizer.split(joined)

    monkeypatch.setattr(array_split, "compile_fast", lambda pattern: Counted())
    assert array_starts(text, O200K_PATTERN) == expected
    assert len(calls) == 1
