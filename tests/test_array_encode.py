"""The array path (array_split + piece_arrays + batch BPE, tokenizer.fast.array_encode) against tiktoken and against
the piece-cache path, which stays the reference."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from conftest import CORPUS_FILES, FUZZ_SHARE, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.array_encode as array_encode
import tokenizer.fast.core as fast_core
from tokenizer import Encoding, get_encoding
from tokenizer.patterns import NEWER_THAN_TIKTOKEN
from tokenizer.pretokenize import compile_pattern

# o200k too: without an array split its pieces come from the regex split, the rest of the path is the same
ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]


def fresh(name: str) -> Encoding:
    enc = get_encoding(name)
    return Encoding(name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)


@pytest.fixture(scope="module")
def encodings():
    """One Encoding per name, its tables built once; each test decides which path its calls take."""
    return {name: fresh(name) for name in ENCODINGS}


def array_path(enc: Encoding, text: str) -> list[int]:
    saved = fast_core.ARRAY_MIN_CHARS
    fast_core.ARRAY_MIN_CHARS = 0  # hypothesis: no fixtures per example
    try:
        return enc.encode_ordinary(text)
    finally:
        fast_core.ARRAY_MIN_CHARS = saved


def test_docstring_examples():
    assert doctest.testmod(array_encode).failed == 0


def test_long_texts_take_the_array_path(tiktoken_encodings, monkeypatch):
    enc = fresh("gpt2")
    calls = []
    real = array_encode.encode_split_pieces
    monkeypatch.setattr(array_encode, "encode_split_pieces", lambda *a: calls.append(1) or real(*a))
    text = "hello world " * fast_core.ARRAY_MIN_CHARS
    assert enc.encode_ordinary(text) == tiktoken_encodings["gpt2"].encode_ordinary(text)
    # no piece strings, but for the few characters after its last safe cut (the checkpoint's rest: " ")
    assert calls == [1] and set(enc.core._cache) == {" "}, "a long text makes no piece strings"
    enc.encode_ordinary("hello world")
    assert calls == [1] and enc.core._cache, "a short one goes through the piece cache"


@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_corpora_equal_tiktoken_and_the_cache_path(filename, encodings, tiktoken_encodings):
    text = corpus_text(filename, 400_000)
    for name, enc in encodings.items():
        ids = array_path(enc, text)
        assert ids == tiktoken_encodings[name].encode_ordinary(text), name
        cache_path = fresh(name)
        assert cache_path.core._encode_through_cache([text])[0] == ids, name


@pytest.fixture(scope="module")
def tiktoken_encodings():
    import tiktoken

    return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


newer = st.sampled_from([chr(a) for a, _ in NEWER_THAN_TIKTOKEN] + ["\u0295"])
tricky = st.lists(
    st.one_of(
        st.sampled_from(["hello", " world", "中文", "日本語", "Привет", "١٢٣", "'s", "'LL", "\r\n", "  ", "\t", "\ud800",
                         "😀", "𝐀𝐁", "e\u0301", "ſ", "ǅ", "<|endoftext|>", " 123456", "/", "\u3000", "\xa0", "\x85"]),
        newer,
        st.tuples(st.sampled_from(["a", " ", "^", "ab", "中", "\n", "0", "'"]), st.integers(1, 300)).map(lambda t: t[0] * t[1]),
        st.text(max_size=10),
        st.characters(codec=None),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(tricky, st.sampled_from(ENCODINGS))
def test_fuzz_equals_tiktoken(text, name):
    import tiktoken

    enc = get_encoding(name)
    assert array_path(enc, text) == tiktoken.get_encoding(name).encode_ordinary(text)


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_tokens_and_batches_around_long_stretches(name, encodings, tiktoken_encodings):
    enc, oracle = encodings[name], tiktoken_encodings[name]
    long = corpus_text("de_manpages.txt", 3 * fast_core.ARRAY_MIN_CHARS)
    text = f"{long}<|endoftext|> kurz <|endoftext|>{long}\ud800"
    assert enc.encode(text, allowed_special="all") == oracle.encode(text, allowed_special="all")
    assert enc.encode(text, disallowed_special=()) == oracle.encode(text, disallowed_special=())
    with pytest.raises(ValueError, match="disallowed"):
        enc.encode(text)
    texts = [long, "short", "", long[:100] + "<|endoftext|>"]
    assert enc.encode_batch(texts, allowed_special="all") == oracle.encode_batch(texts, allowed_special="all")
    assert enc.encode_ordinary_batch(texts) == oracle.encode_ordinary_batch(texts)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("text", [" " * 200_000, "^" * 200_000, "a" * 200_000, "\n" * 100_000 + "x",
                                  "ab " * 70_000, "中" * 100_000])
def test_runs_equal_tiktoken(name, text, tiktoken_encodings):
    assert array_path(fresh(name), text) == tiktoken_encodings[name].encode_ordinary(text)


def test_a_custom_pattern_takes_the_array_path_through_its_regex_split():
    enc = get_encoding("gpt2")
    custom = Encoding("digits", pat_str=r"\d|\D+", mergeable_ranks=dict(enc.token_ids), special_tokens={})
    text = corpus_text("en_docs.txt", 100_000)
    assert array_path(custom, text) == custom.core._encode_through_cache([text])[0]
    assert custom.core._token_tables


def test_a_custom_pattern_that_skips_text_encodes_only_what_it_matches():
    enc = get_encoding("gpt2")
    words_only = Encoding("words", pat_str=r"\w+", mergeable_ranks=dict(enc.token_ids), special_tokens={})
    text = corpus_text("en_docs.txt", 100_000)
    ids = array_path(words_only, text)
    assert ids == words_only.core._encode_through_cache([text])[0]
    assert words_only.decode(ids) == "".join(compile_pattern(words_only.pat_str).split(text))


def test_without_the_whole_piece_rule_the_piece_cache_stays():
    # CS336's rule: every piece through BPE, where the piece cache is faster; and still exact
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}
    enc = Encoding.from_vocab_merges(vocab, [(b"a", b"b")], whole_piece_tokens=False)
    text = "abc abc ab " * 1000
    assert enc.encode_ordinary(text) == [256, 99, 32, 256, 99, 32, 256, 32] * 1000
    assert enc.core._cache and enc.core._array_tables() is None


def per_piece_ids(enc: Encoding, pieces: list[bytes]) -> list[int]:
    """The oracle for any cut of a text: a piece that is a token is that token, the others by bpe.merge."""
    from tokenizer.bpe import merge

    ids = []
    for piece in pieces:
        whole = enc.token_ids.get(piece)
        ids += [whole] if whole is not None else [enc.token_ids[part] for part in merge(piece, enc.merge_ranks)]
    return ids


# Text the vocabularies hardly know (most bytes segments of their own) mixed with text they know, repeated
# pieces and pieces met once, cut anywhere (not only where a pattern would)
rarely_known = st.lists(
    st.one_of(
        st.characters(min_codepoint=0x10000),
        st.characters(codec=None, exclude_categories=["Cs"]),
        st.sampled_from(["hello", " world", "  ", " ", "中文", "\U000e0041\U000e0042", "😀😀", "ab"]),
    ),
    max_size=60,
).map("".join)


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(rarely_known, st.lists(st.integers(1, 400), max_size=30), st.sampled_from(ENCODINGS))
def test_any_cut_equals_the_per_piece_oracle(text, cuts, name):
    from tokenizer.fast.piece_arrays import code_points

    enc = get_encoding(name)
    points = code_points(text)
    starts = np.unique(np.array([0] + [c for c in cuts if c < len(points)], dtype=np.int64))[: max(len(text), 0)]
    if not len(text):
        starts = starts[:0]
    bounds = starts.tolist() + [len(text)]
    pieces = [text[a:b].encode() for a, b in zip(bounds, bounds[1:])]
    ids = array_encode.encode_split_text(text, points, starts, enc.core._array_tables())
    assert ids.tolist() == per_piece_ids(enc, pieces)


@pytest.mark.parametrize("text", ["\U000e0041" * 3 + "x" * 5, "𝐀" * 20 + " a" * 10, "a" * 40])
def test_every_piece_distinct_and_none_a_token(text):
    # every piece its own and none a token: the distinct pieces are the text's, in order, and all go to BPE
    from tokenizer.fast.piece_arrays import code_points

    enc = get_encoding("gpt2")
    starts = np.arange(0, len(text), 3, dtype=np.int64)
    bounds = starts.tolist() + [len(text)]
    pieces = [text[a:b].encode() for a, b in zip(bounds, bounds[1:])]
    ids = array_encode.encode_split_text(text, code_points(text), starts, enc.core._array_tables())
    assert ids.tolist() == per_piece_ids(enc, pieces)


def test_a_text_of_one_byte_segments_makes_no_bpe_call(monkeypatch, tiktoken_encodings):
    # a million spaces for GPT-2 (no token holds two), random code points: every byte is its own token, found
    # in passes over the bytes without listing a segment or calling BPE
    calls = []
    real = array_encode.encode_blob
    monkeypatch.setattr(array_encode, "encode_blob", lambda *a: calls.append(1) or real(*a))
    enc = fresh("gpt2")
    text = " " * 50_000
    assert array_path(enc, text) == tiktoken_encodings["gpt2"].encode_ordinary(text)
    assert calls == []
    text = " " * 50_000 + "qqqq" + "\U000e0041" * 9  # " qqqq" is no token: BPE makes it
    assert array_path(enc, text) == tiktoken_encodings["gpt2"].encode_ordinary(text)
    assert calls == [1], "a segment of more than one byte does go to BPE"


@pytest.mark.parametrize("name, text", [("gpt2", "\U00010056 x" * 3000), ("cl100k_base", "\U000100a4 x" * 3000)])
def test_two_byte_segments_make_no_bpe_call(name, text, monkeypatch, tiktoken_encodings):
    # a letter of a script the vocabulary hardly knows: four bytes, two of which make a token (no token holds
    # more of them): the pair is joined by the byte-pair table, not by BPE
    calls = []
    real = array_encode.encode_blob
    monkeypatch.setattr(array_encode, "encode_blob", lambda *a: calls.append(1) or real(*a))
    ids = array_path(fresh(name), text)
    assert ids == tiktoken_encodings[name].encode_ordinary(text)
    assert len(ids) == 4 * 3000, "the letter's four bytes make three ids, then one for \" x\""
    assert calls == []


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_three_byte_character_alone_equals_the_oracle_without_bpe(name, monkeypatch):
    # every character of three UTF-8 bytes, alone and in pieces of two: a piece's segments are of one, two or
    # three bytes (a longer one, across the two, goes through BPE), which the byte-pair and pair tables join
    # without BPE rounds
    from tokenizer.fast.piece_arrays import code_points

    calls, joins = [], []
    real, real_lookup = array_encode.encode_blob, array_encode.lookup_pairs
    monkeypatch.setattr(array_encode, "encode_blob", lambda blob, lengths, *rest: calls.append(lengths.max())
                        or real(blob, lengths, *rest))

    def lookup(pairs, left, right):
        rank, merged = real_lookup(pairs, left, right)
        joins.append(np.where(rank != pairs.no_merge, merged, -1))
        return rank, merged

    monkeypatch.setattr(array_encode, "lookup_pairs", lookup)
    enc = get_encoding(name)
    text = "".join(chr(c) for c in range(0x800, 0x10000) if not 0xD800 <= c < 0xE000)
    for step in (1, 2):
        starts = np.arange(0, len(text), step)
        ids = array_encode.encode_split_text(text, code_points(text), starts, enc.core._array_tables())
        assert ids.tolist() == per_piece_ids(enc, [text[i : i + step].encode() for i in starts.tolist()])
    assert not calls or min(calls) > 3, "no segment of three bytes or fewer goes through BPE"
    joined = np.concatenate(joins)
    assert (joined >= 0).any() and (joined < 0).any(), "three bytes make one token, or stay two"
