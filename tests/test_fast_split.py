"""The stdlib-``re`` split (tokenizer.fast.stdlib_patterns) against the `regex` reference and tiktoken's own engine.

The classes in tokenizer/fast/unicode16.py are checked twice: regenerated from `regex`'s tables less the Unicode 17.0
changes (tools/generate_unicode16.py), and compared with what tiktoken's Rust regex matches on every code
point. Then the split itself is compared with the reference on every BMP code point in several contexts, on
fuzz and on every corpus (every code point in one context: test_every_code_point.py).
"""

from __future__ import annotations

import doctest
import importlib.util
import re

import pytest
import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.stdlib_patterns as stdlib_patterns
from conftest import CORPUS_FILES, FUZZ_EXAMPLES, REPO, corpus_text
from tokenizer import get_encoding
from tokenizer.patterns import KNOWN_PATTERNS, NEWER_THAN_TIKTOKEN, RECATEGORISED_SINCE_TIKTOKEN
from test_pretokenize import both_splits
from tokenizer.fast.stdlib_patterns import FastPretokenizer, compile_fast
from tokenizer.pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN
from tokenizer.fast.stdlib_patterns import code_point_runs, stand_in_astral
from tokenizer.fast.unicode16 import RANGES

KNOWN = tuple(KNOWN_PATTERNS)  # OpenAI's, and Llama 3's
IDS = ["gpt2", "r50k", "cl100k", "o200k", "llama3"]
EVERY_CHARACTER = "".join(map(chr, range(0x110000)))  # surrogates included: Python strings may hold them
# The \p{...} (and \s) escapes as tiktoken's patterns write them, one per RANGES key.
ESCAPE = {name: rf"\p{{{name}}}" for name in RANGES} | {"White_Space": r"\s"}


def code_points(name: str) -> set[int]:
    return {cp for first, last in code_point_runs(name) for cp in range(first, last + 1)}


def tiktoken_matches(pattern: str) -> set[int]:
    """The code points tiktoken's engine matches with ``pattern`` (one character each), surrogates aside."""
    # With the 256 single bytes as the vocabulary, the ids are the bytes of the matched characters, in order.
    probe = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks={bytes([b]): b for b in range(256)},
                              special_tokens={})
    text = "".join(c for c in EVERY_CHARACTER if not "\ud800" <= c <= "\udfff")
    return set(map(ord, probe.decode_bytes(probe.encode_ordinary(text)).decode("utf-8")))


def test_docstring_examples():
    result = doctest.testmod(stdlib_patterns)
    assert result.failed == 0 and result.attempted > 0


def test_generated_classes_are_up_to_date():
    spec = importlib.util.spec_from_file_location("generate_unicode16", REPO / "tools" / "generate_unicode16.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert set(generator.PROPERTIES) == set(RANGES)
    shipped = (REPO / "tokenizer" / "fast" / "unicode16.py").read_text(encoding="utf-8")
    assert generator.module_source() == shipped, "run python tools/generate_unicode16.py"


@pytest.mark.parametrize("name", list(RANGES))
def test_classes_equal_tiktokens_engine_on_every_code_point(name):
    assert code_points(name) == tiktoken_matches(ESCAPE[name])


@pytest.mark.parametrize("letter", "sdmtlvre")
def test_case_insensitive_letters_equal_tiktokens_engine(letter):
    # the contractions' (?i:...) stay as they are in the stdlib spelling, so re's case folding must be Rust's
    expected = tiktoken_matches(rf"(?i:{letter})")
    assert set(map(ord, regex.findall(rf"(?i:{letter})", EVERY_CHARACTER))) == expected
    assert set(map(ord, re.findall(rf"(?i:{letter})", EVERY_CHARACTER))) == expected


def test_unicode17_tables_explain_every_difference_from_regex():
    # what `regex` (Unicode 17.0) and tiktoken (16.0) disagree on is exactly what patterns.py lists
    changed = {cp for first, last in NEWER_THAN_TIKTOKEN for cp in range(first, last + 1)}
    changed |= set(RECATEGORISED_SINCE_TIKTOKEN)
    for name, escape in ESCAPE.items():
        newer = set(map(ord, regex.findall(escape, EVERY_CHARACTER)))
        assert newer ^ code_points(name) <= changed, name


def test_recategorised_stand_ins_have_the_old_category_in_both_versions():
    for cp, (old, new, stand_in) in RECATEGORISED_SINCE_TIKTOKEN.items():
        assert cp in code_points(old) and stand_in in code_points(old)
        assert regex.fullmatch(rf"\p{{{new}}}", chr(cp)) and regex.fullmatch(rf"\p{{{old}}}", chr(stand_in))


def test_o200k_case_split_uses_unicode16_category():
    # U+0295 is a lowercase letter to tiktoken (an "other letter" in 17.0): it cannot open o200k's word "Ab"
    for split in (both_splits(O200K_PATTERN).split, both_splits(O200K_PATTERN).split_reference):
        assert split("ʕAb") == ["ʕ", "Ab"]
    assert regex.findall(O200K_PATTERN, "ʕAb") == ["ʕAb"]  # what `regex` alone would say


def test_astral_stand_ins_are_in_the_same_classes():
    for name in RANGES:
        members = code_points(name)
        astral = [cp for cp in range(0x10000, 0x110000, 7)] + [first for first, _ in code_point_runs(name)]
        astral = [cp for cp in astral if cp >= 0x10000]
        stand_ins = stand_in_astral("".join(map(chr, astral)))
        assert max(stand_ins) < "\U00010000"
        for cp, stand_in in zip(astral, stand_ins):
            assert (cp in members) == (ord(stand_in) in members), (name, hex(cp), hex(ord(stand_in)))


def test_possessive_spellings_only_add_possessive_marks():
    # The faster spellings differ from the patterns in possessive marks alone; that they split alike is the
    # every-code-point, fuzz and corpus tests' to show (each was checked to catch a possessive that gives back).
    assert set(stdlib_patterns.POSSESSIVE_SPELLINGS) <= set(KNOWN)
    for pattern, spelling in stdlib_patterns.POSSESSIVE_SPELLINGS.items():
        assert spelling != pattern
        without_possessive_marks = [re.sub(r"(?<=[?+*}])\+", "", text) for text in (spelling, pattern)]
        assert without_possessive_marks[0] == without_possessive_marks[1]


# Contexts that tell the classes apart: letter or not (a_b, 's), number (1_2), case (A_b, _Ab), mark, space.
CONTEXTS = ["{}", "a{}b", "{}'s", "'{}", " {}", "1{}2", "A{}b", "{}Ab", "x{}\u0301", "{} \n", "!{}\r\n", "{}{}"]
BMP = EVERY_CHARACTER[:0x10000]


def every_code_point_differences(split, reference, context: str, characters: str = EVERY_CHARACTER) -> list[str]:
    """The texts ``context.format(c, c, ...)`` for every ``c`` in ``characters`` on which two splits differ."""
    texts = [context.replace("{}", c) for c in characters]
    found = []
    for start in range(0, len(texts), 1 << 16):
        chunk = texts[start : start + (1 << 16)]
        joined = "\n\n".join(chunk)  # a findall may join neighbours across "\n\n", but the same for both splits
        if split(joined) != reference(joined):
            found += [t for t in chunk if split(t) != reference(t)]
    return found


@pytest.mark.parametrize("pattern", KNOWN, ids=IDS)
def test_every_bmp_code_point_in_every_context_equals_reference(pattern):
    pre = both_splits(pattern)
    for context in CONTEXTS:
        assert every_code_point_differences(pre.split, pre.split_reference, context, BMP)[:5] == [], context


def test_a_wrong_class_is_caught(monkeypatch):
    # U+0295 in "Lo" as Unicode 17.0 has it: the every-code-point check must see o200k's case split move
    right = both_splits(O200K_PATTERN)  # (before the change: compile_fast caches)
    monkeypatch.setitem(RANGES, "Lo", "0295 " + RANGES["Lo"])
    code_point_runs.cache_clear()
    try:
        wrong = FastPretokenizer(O200K_PATTERN)
        assert every_code_point_differences(wrong.split, right.split_reference, "{}Ab", BMP) == ["ʕAb"]
    finally:
        monkeypatch.undo()
        code_point_runs.cache_clear()


# Fuzz: runs and mixes of characters that sit on class edges, from every plane.
EDGES = [
    "a", "Z", "ǅ", "ʰ", "ʕ", "中", "\u0301", "1", "²", "Ⅻ", "𝐀", "𝟏", "\U000323b0", "\U00010400", "\U0001e900",
    chr(NEWER_THAN_TIKTOKEN[0][0]), "👍", "\ud800", "\udcff", "'", "s", "S", "ſ", "K", "/", "!", ".",
    " ", "  ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1f", "\x85", "\xa0", "\u2028", "\u3000",
]
edge_runs = st.lists(st.tuples(st.sampled_from(EDGES), st.integers(1, 4)).map(lambda t: t[0] * t[1]), max_size=25)
fuzz_texts = st.one_of(
    edge_runs.map("".join),
    st.text(max_size=40),
    st.text(st.characters(min_codepoint=0x10000), max_size=20),
    st.lists(st.one_of(st.text(max_size=4), st.sampled_from(EDGES)), max_size=25).map("".join),
)


@pytest.mark.parametrize("pattern", KNOWN, ids=IDS)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=fuzz_texts)
def test_fuzz_equals_reference(pattern, text):
    pre = both_splits(pattern)
    assert pre.split(text) == pre.split_reference(text)


@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_corpus_equals_reference(filename):
    text = corpus_text(filename, 1_000_000)
    for pattern in KNOWN:
        pre = both_splits(pattern)
        assert pre.split(text) == pre.split_reference(text), pattern


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_astral_text_ids_equal_tiktoken(name):
    text = "".join(chr(cp) + " ab𝐀c 12𝟏3 " for cp in range(0x10000, 0x30000, 37))
    assert get_encoding(name).encode_ordinary(text) == tiktoken.get_encoding(name).encode_ordinary(text)


def test_custom_pattern_runs_on_regex():
    pre = both_splits(r"\p{L}+|\P{L}")
    assert pre.split("ab中, c") == pre.split_reference("ab中, c") == ["ab中", ",", " ", "c"]
    assert all(compile_fast(p).uses_stdlib for p in (R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN))
    assert not compile_fast(r"\p{L}+|\P{L}").uses_stdlib


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "B", " ", "  ", "\n", "\r\n", "'s", "1234", "!", "/", "é", "中", "\u0301",
                                      "😀", "𝐀", "\ud800", "\x00"])).map("".join),
       cuts=st.lists(st.integers(0, 40), min_size=2, max_size=10),
       pattern=st.sampled_from(sorted(KNOWN) + [r"\p{L}+|\P{L}"]))
def test_piece_lengths_between_places_equal_the_split_of_each_slice(text, cuts, pattern):
    # re between two places of the text (not a copy of the slice): each place must act as the string's end
    # (whitespace before it, "\s+(?!\S)", "$") and its start, astral characters stood in for on the whole text
    bounds = sorted(min(cut, len(text)) for cut in cuts)
    firsts, ends = bounds[:-1], bounds[1:]
    pre = compile_fast(pattern)
    pieces = [pre.split(text[a:b]) for a, b in zip(firsts, ends)]
    expected = [len(each) for each in pieces], [len(piece) for each in pieces for piece in each]
    assert pre.piece_lengths_between(text, firsts, ends) == expected
    # told (as the array split tells it from the code points) whether the stretches hold an astral character
    stretches_astral = any(stdlib_patterns.has_astral(text[a:b]) for a, b in zip(firsts, ends))
    assert pre.piece_lengths_between(text, firsts, ends, astral=stretches_astral) == expected


def test_has_astral():
    assert not stdlib_patterns.has_astral("") and not stdlib_patterns.has_astral("plain ascii")
    assert not stdlib_patterns.has_astral("é中\uffff\ud800\udfff")  # lone surrogates are not astral characters
    assert stdlib_patterns.has_astral("a😀") and stdlib_patterns.has_astral("\U0010ffff") and stdlib_patterns.has_astral("\U00010000")
