"""Exact ids against tiktoken (the oracle) for every OpenAI encoding: real text and fuzz (every code point alone:
test_every_code_point.py).

Each suite runs over both cores (``core="fast"`` and ``core="reference"``), the reference on samples where it is
slow, so the readable core is an oracle for the fast one too."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPUS_FILES, FUZZ_EXAMPLES, corpus_text
from tokenizer import get_encoding, list_encoding_names

ALL = list_encoding_names()
SAMPLE_BYTES = 300_000
REFERENCE_SAMPLE_BYTES = 30_000  # the reference core is pure Python: a smaller sample of each file
CORES = ["fast", "reference"]


def both(name, core="fast"):
    return get_encoding(name, core=core), tiktoken.get_encoding(name)


def assert_same_ids(ours, oracle, text):
    # The corpora hold <|endoftext|> separators: allow them, as a dataset encoder would.
    ids = ours.encode(text, allowed_special="all")
    assert ids == oracle.encode(text, allowed_special="all")
    assert ours.decode(ids) == text
    assert ours.encode_ordinary(text) == oracle.encode_ordinary(text)


def corpus_matrix() -> list:
    """(corpus, encoding): every encoding on every corpus. The everyday tier takes a band of the matrix, each
    encoding on three corpora and each corpus under three encodings or more (every pair, when there are three
    corpora or fewer); the rest carries the exhaustive mark."""
    return [pytest.param(filename, name, marks=() if (j - i) % len(CORPUS_FILES) < 3 else pytest.mark.exhaustive)
            for j, filename in enumerate(CORPUS_FILES) for i, name in enumerate(ALL)]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("filename, name", corpus_matrix())
def test_corpus_ids_equal_tiktoken(name, filename, core):
    ours, oracle = both(name, core)
    assert_same_ids(ours, oracle, corpus_text(filename, SAMPLE_BYTES if core == "fast" else REFERENCE_SAMPLE_BYTES))


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_corpus_ids_equal_whole_files(name, filename):
    assert_same_ids(*both(name), corpus_text(filename))


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("name", ALL)
def test_api_values_equal_tiktoken(name, core):
    ours, oracle = both(name, core)
    assert ours.name == oracle.name
    assert ours.n_vocab == oracle.n_vocab
    assert ours.max_token_value == oracle.max_token_value
    assert ours.eot_token == oracle.eot_token
    assert ours.special_tokens_set == oracle.special_tokens_set
    assert ours.token_byte_values() == oracle.token_byte_values()
    for token in [0, 1, 255, 1000, ours.eot_token, *ours.special_tokens.values()]:
        assert ours.decode_single_token_bytes(token) == oracle.decode_single_token_bytes(token)
        assert ours.is_special_token(token) == oracle.is_special_token(token)
    for text in ["hello", " world", "<|endoftext|>", b"\xff"]:
        assert ours.encode_single_token(text) == oracle.encode_single_token(text)
    texts = ["hello world", "", "héllo <|endoftext|>"]
    assert ours.encode_batch(texts, allowed_special="all") == oracle.encode_batch(texts, allowed_special="all")
    assert ours.encode_ordinary_batch(texts) == oracle.encode_ordinary_batch(texts)
    ids = oracle.encode("héllo wörld 中文")
    assert ours.decode_tokens_bytes(ids) == oracle.decode_tokens_bytes(ids)
    assert ours.decode_bytes(ids) == oracle.decode_bytes(ids)
    assert ours.decode(ids[:-1]) == oracle.decode(ids[:-1])  # a cut character: U+FFFD both


# Pieces chosen to stress the patterns: whitespace runs, \r\n, contractions in any case, specials' fragments.
FRAGMENTS = [
    " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u2028", "\u3000",
    "'s", "'S", "'t", "'T", "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "'",
    "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|", "|>", "<|endof", "text|>", "endoftext",
    "a", "Hello", "HELLO", "camelCase", "x1", "123", "12345", "١٢٣", "½", "é", "e\u0301", "中文", "日本語",
    "Привет", "😀", "\U0001f468\u200d\U0001f469", "\ud800", "\udfff", "\ud83d\ude00", "\x00", "\x1c", "\x7f",
    "...", "!!", "/", "//", "$", "_", "ſ", "K",
]
texts = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8), st.characters(codec=None)),
    max_size=25,
).map("".join)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(texts)
def test_fuzz_equal_tiktoken(text):
    for name in ["gpt2", "p50k_base", "cl100k_base", "o200k_base"]:
        oracle = tiktoken.get_encoding(name)
        expected = oracle.encode(text, allowed_special="all")
        as_plain_text = oracle.encode(text, disallowed_special=())
        for core in CORES:
            ours = get_encoding(name, core=core)
            assert ours.encode(text, allowed_special="all") == expected, (name, core)
            assert ours.encode(text, disallowed_special=()) == as_plain_text, (name, core)


# What FRAGMENTS leaves out, from every script: a digit of any script (Nd), marks of any script stacked on a
# letter, emoji sequences (ZWJ, variation selectors, skin tones, flags, keycaps, tags), control characters, a run
# of one whitespace character, a special token cut by other text or misspelt, a lone surrogate. (tiktoken agreed
# on all of it over some 4,000 such texts per encoding; this keeps the generator in the suite.)
_BY_CATEGORY: dict = {}
for _cp in range(0x110000):
    _BY_CATEGORY.setdefault(unicodedata.category(chr(_cp)), []).append(chr(_cp))
ANY_SCRIPT_DIGITS, ANY_SCRIPT_MARKS = _BY_CATEGORY["Nd"], _BY_CATEGORY["Mn"] + _BY_CATEGORY["Mc"] + _BY_CATEGORY["Me"]
LETTERS = _BY_CATEGORY["Lu"] + _BY_CATEGORY["Ll"] + _BY_CATEGORY["Lo"] + _BY_CATEGORY["Lm"] + _BY_CATEGORY["Lt"]
EMOJI_SEQUENCES = ["\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f44d\U0001f3fd", "\u2764\ufe0f",
                   "\u2764\ufe0e", "1\ufe0f\u20e3", "\U0001f1fa\U0001f1f8", "\U0001f3f4\U000e0067\U000e0062\U000e007f",
                   "\u200d", "\ufe0f"]
WHITESPACE_CHARS = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x85", "\xa0", "\u1680", "\u2000", "\u2028", "\u3000",
                    "\u200b"]
SPECIALS = ["<|endoftext|>", "<|fim_middle|>", "<|endofprompt|>"]
any_script_piece = st.one_of(
    st.lists(st.sampled_from(ANY_SCRIPT_DIGITS), min_size=1, max_size=5).map("".join),
    st.tuples(st.sampled_from(LETTERS), st.lists(st.sampled_from(ANY_SCRIPT_MARKS), min_size=1, max_size=3))
    .map(lambda letter_marks: letter_marks[0] + "".join(letter_marks[1])),
    st.sampled_from(EMOJI_SEQUENCES),
    st.text(st.characters(max_codepoint=0x9F, categories=["Cc"]), min_size=1, max_size=3),
    st.tuples(st.sampled_from(WHITESPACE_CHARS), st.integers(1, 40)).map(lambda run: run[0] * run[1]),
    st.tuples(st.sampled_from(SPECIALS), st.integers(1, 12), st.sampled_from(["", " ", "x", "<|", "|>"]))
    .map(lambda cut: cut[0][: cut[1]] + cut[2] + cut[0][cut[1] :]),
    st.sampled_from(SPECIALS + ["\ud83d", "\ude00", "'S", "'ll", " "]),
    st.sampled_from(LETTERS),
)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.lists(any_script_piece, max_size=12).map("".join))
def test_fuzz_text_of_every_script_equals_tiktoken(text):
    for name in ["gpt2", "cl100k_base", "o200k_base"]:
        oracle = tiktoken.get_encoding(name)
        expected, expected_ordinary = oracle.encode(text, allowed_special="all"), oracle.encode_ordinary(text)
        for core in CORES:
            ours = get_encoding(name, core=core)
            assert ours.encode(text, allowed_special="all") == expected, (name, core)
            assert ours.encode_ordinary(text) == expected_ordinary, (name, core)
        # the ids less the first: a cut character raises UnicodeDecodeError in both
        assert outcome(ours.decode_with_offsets, expected[1:]) == outcome(oracle.decode_with_offsets, expected[1:])


def outcome(func, *args):
    """func's result, or the type of the exception it raised."""
    try:
        return func(*args)
    except Exception as e:  # noqa: BLE001 - the type is the outcome
        return type(e)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=60))
def test_fuzz_round_trip(text):
    for name in ["gpt2", "cl100k_base", "o200k_base"]:
        ours = get_encoding(name)
        assert ours.decode(ours.encode_ordinary(text)) == text


PATHOLOGICAL_NAMES = ["gpt2", "cl100k_base", "o200k_base"]
PATHOLOGICAL_TEXTS = [(" " * 1_000_000, "spaces"), ("^" * 1_000_000, "carets"), ("a" * 1_000_000, "a")]


# Every text under every encoding; the everyday tier takes each text under one of them, the spaces under o200k
# (where tiktoken gives up), carets under cl100k, "a" under gpt2 (test_array_encode's test_runs_equal_tiktoken runs
# shorter runs under all three)
@pytest.mark.parametrize("text, name", [
    pytest.param(text, name, id=f"{text_id}-{name}",
                 marks=() if i + k == len(PATHOLOGICAL_NAMES) - 1 else pytest.mark.exhaustive)
    for i, (text, text_id) in enumerate(PATHOLOGICAL_TEXTS) for k, name in enumerate(PATHOLOGICAL_NAMES)])
def test_pathological_input(name, text):
    ours, oracle = both(name)
    ids = ours.encode_ordinary(text)
    assert ours.decode(ids) == text
    if name == "o200k_base" and text[0] == " ":
        # tiktoken's o200k panics on a million spaces (its regex gives up); ours must not. Compare with
        # tiktoken on pieces it can do: the run is one pre-token, and BPE of a run of one byte is the same
        # for a shorter run up to the longest space token, so check the start and the total length.
        assert ids[:4] == oracle.encode_ordinary(text[:10_000])[:4]
        assert len(set(ids[:-1])) == 1
        return
    assert ids == oracle.encode_ordinary(text)


def test_a_refused_special_token_keeps_its_refusal_on_the_error_said_where(tmp_path, monkeypatch):
    # parity rebuilt the message, ValueError(f"{where}: {e}"), which keeps the refusal only as the error's context:
    # pickled (an error from a worker process) it was lost, and with it the advice in the caller's words
    import pickle

    from tokenizer.jobs.parity import check_file
    from tokenizer.special_advice import refusal_of

    monkeypatch.chdir(tmp_path)
    Path("p.txt").write_text("hi <|endoftext|>", encoding="utf-8")
    gpt2 = get_encoding("gpt2")
    with pytest.raises(ValueError) as refused:
        check_file(Path("p.txt"), gpt2, gpt2, allowed_special=set(), disallowed_special="all")
    assert str(refused.value).startswith("p.txt: The text contains the special token '<|endoftext|>'")
    refusal = refusal_of(pickle.loads(pickle.dumps(refused.value)))
    assert refusal is not None and (refusal.token, refusal.place) == ("<|endoftext|>", "p.txt: ")


def test_parity_bars_show_a_small_file_in_a_unit_that_says_something(tmp_path, capsys):
    """parity's bars counted in MB with one decimal: a file under 50 KB read "0.0/0.0 MB" from start to end.
    They count bytes and show them in B, kB or MB, as the shared bar does (check_file's and check_ids')."""
    import numpy as np

    from tokenizer.jobs.parity import check_file, check_ids

    gpt2 = get_encoding("gpt2")
    text = "a small file of words, " * 1000  # 23,000 bytes
    (tmp_path / "small.txt").write_text(text, encoding="utf-8")
    np.array(gpt2.encode(text), dtype=np.uint16).tofile(tmp_path / "small.bin")
    assert check_file(tmp_path / "small.txt", gpt2, gpt2, progress=True).shown == []
    drawn = capsys.readouterr().err  # (the bar is drawn as it starts; done, it is erased)
    assert "0.00B/23.0kB [" in drawn and "0.0/0.0" not in drawn, drawn
    assert check_ids([tmp_path / "small.txt"], tmp_path / "small.bin", gpt2, progress=True)[0].shown == []
    drawn = capsys.readouterr().err
    assert "0.00B/23.0kB [" in drawn and "0.0/0.0" not in drawn, drawn
