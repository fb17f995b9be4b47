"""The BPE core: the fast paths (incremental, heap) against the readable reference loop."""

from __future__ import annotations

import doctest
import functools

from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.bpe as bpe
from conftest import FUZZ_EXAMPLES
from tokenizer import get_encoding


def all_three(piece: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    expected = bpe.merge_reference(piece, ranks)
    assert bpe.merge_heap(piece, ranks) == expected
    assert bpe.merge(piece, ranks) == expected
    assert b"".join(expected) == piece
    return expected


def test_docstring_examples():
    assert doctest.testmod(bpe).failed == 0


def test_hand_worked_example():
    # a|a|a|b: pairs aa(0) aa(0) ab(1); the leftmost aa merges -> aa|a|b; pairs "aaa"(none) ab(1)
    # -> aa|ab; "aaab" has no rank, so that is the answer ("aab" never forms as a pair of parts).
    ranks = {b"aa": 0, b"ab": 1, b"aab": 2}
    assert all_three(b"aaab", ranks) == [b"aa", b"ab"]
    assert all_three(b"", ranks) == []
    assert all_three(b"a", ranks) == [b"a"]


def test_leftmost_wins_ties():
    ranks = {b"aa": 0}
    assert all_three(b"aaa", ranks) == [b"aa", b"a"]
    assert all_three(b"aaaaa", ranks) == [b"aa", b"aa", b"a"]


# Small alphabets and small rank tables make ties and long merge chains common.
small_pieces = st.binary(min_size=0, max_size=40).map(lambda b: bytes(x % 3 + 97 for x in b))
rank_tables = st.dictionaries(
    st.binary(min_size=2, max_size=6).map(lambda b: bytes(x % 3 + 97 for x in b)),
    st.integers(0, 30),
    max_size=30,
)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(small_pieces, rank_tables)
def test_fast_paths_equal_reference_on_random_tables(piece, ranks):
    all_three(piece, ranks)


@settings(max_examples=max(FUZZ_EXAMPLES // 10, 100), deadline=None)
@given(st.text(max_size=300), st.sampled_from(["gpt2", "cl100k_base", "o200k_base"]))
def test_fast_paths_equal_reference_on_openai_ranks(text, name):
    ranks = get_encoding(name).merge_ranks
    all_three(text.encode("utf-8", "surrogatepass"), ranks)


def test_heap_path_used_for_long_pieces_is_exact():
    ranks = get_encoding("gpt2").merge_ranks
    text = ("Supercalifragilisticexpialidocious" * 20).encode()
    assert len(text) > bpe.HEAP_THRESHOLD
    all_three(text, ranks)


@functools.lru_cache(maxsize=None)
def uncrossable_table(name):
    return bpe.uncrossable_pairs(get_encoding(name).merge_ranks)


@settings(max_examples=max(FUZZ_EXAMPLES // 10, 100), deadline=None)
@given(st.text(max_size=80), st.sampled_from(["gpt2", "cl100k_base", "o200k_base"]))
def test_split_uncrossable_parts_merge_like_the_whole(text, name):
    enc = get_encoding(name)
    table = uncrossable_table(name)
    piece = text.encode("utf-8", "surrogatepass")
    parts = bpe.split_uncrossable(piece, table)
    assert b"".join(parts) == piece
    assert [t for part in parts for t in bpe.merge(part, enc.merge_ranks)] == bpe.merge_reference(piece, enc.merge_ranks)


def test_split_uncrossable_cuts_gpt2_chinese_into_characters():
    table = uncrossable_table("gpt2")
    assert table[ord("t") << 8 | ord("h")] == 0  # "th" is inside many tokens
    piece = "本文档的最新版本".encode()
    parts = bpe.split_uncrossable(piece, table)
    assert len(parts) > 1 and b"".join(parts) == piece


def test_split_uncrossable_small_table():
    ranks = {b"ab": 0, b"bc": 1}
    table = bpe.uncrossable_pairs(ranks)
    assert bpe.split_uncrossable(b"abcab", table) == [b"abc", b"ab"]  # "ca" never meets in a token
