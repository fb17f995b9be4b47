"""The BPE core: the fast paths (incremental, heap) against the readable reference loop."""

from __future__ import annotations

import doctest
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.bpe as bpe
import tokenizer.fast.uncrossable as uncrossable
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


def test_a_str_piece_or_an_encoding_for_its_table_is_refused_in_one_line():
    """A learner who forgets the b of b" capes" (walkthroughs 01, 03 and 04 call these on bytes) got
    [' ', 'c', 'a', 'p', 'e', 's'] from merge_reference and [] from teach.merge_steps: no str equals a bytes key,
    so nothing merged, and nothing said so. Now a TypeError says to pass the bytes."""
    from tokenizer.teach import merge_steps

    ranks = get_encoding("gpt2").merge_ranks
    for call in (lambda: bpe.merge_reference(" capes", ranks), lambda: merge_steps(" capes", ranks)):
        with pytest.raises(TypeError, match=r"takes a piece's bytes, not str: pass ' capes'\.encode\('utf-8'\)"):
            call()
    assert bpe.merge_reference(" capes".encode("utf-8"), ranks) == [b" cap", b"es"]
    # the encoding where its table goes: AttributeError ('RegisteredEncoding' object has no attribute 'get')
    for call in (lambda: bpe.merge_reference(b" capes", get_encoding("gpt2")),
                 lambda: merge_steps(b" capes", get_encoding("gpt2"))):
        with pytest.raises(TypeError, match=r"merge_ranks maps token bytes to ranks \(an encoding's \.merge_ranks\)"):
            call()


def test_merge_and_merge_heap_refuse_a_str_piece_as_merge_reference_does():
    """tokenizer.merge(" capes", ranks) raised "list indices must be integers or slices, not str", and
    merge_heap (and merge on a long str) returned the characters, unmerged: both now say to pass the bytes."""
    import tokenizer

    ranks = get_encoding("gpt2").merge_ranks
    calls = {"merge": lambda piece: tokenizer.merge(piece, ranks),
             "merge_heap": lambda piece: bpe.merge_heap(piece, ranks)}
    for name, call in calls.items():
        for piece in (" capes", " capes" * 100):  # the short pieces' loop and the heap's
            with pytest.raises(TypeError, match=rf"^{name} takes a piece's bytes, not str: pass ' capes"):
                call(piece)
        assert call(" capes".encode("utf-8")) == [b" cap", b"es"]


def test_every_merge_takes_a_bytearray_or_memoryview_piece_and_refuses_other_types_in_one_line():
    """merge_reference(bytearray(b"hello"), ranks) and merge_heap(...) failed with "unhashable type: 'bytearray'"
    (their slices are the table's keys): a bytes-like piece is now read as its bytes, and any other type is a
    TypeError that says what to pass."""
    import tokenizer

    ranks = get_encoding("gpt2").merge_ranks
    calls = {"merge_reference": lambda piece: bpe.merge_reference(piece, ranks),
             "merge_heap": lambda piece: bpe.merge_heap(piece, ranks),
             "merge": lambda piece: tokenizer.merge(piece, ranks)}
    for name, call in calls.items():
        for text in (b" capes", b" capes" * 100, "\u4f60\u597d".encode("utf-8") * 20):  # the rescan and the heap
            expected = bpe.merge_reference(text, ranks)
            assert call(bytearray(text)) == call(memoryview(text)) == expected
            assert all(type(part) is bytes for part in call(bytearray(text)))
        with pytest.raises(TypeError, match=rf"^{name} takes a piece's bytes \(b'\.\.\.', or a bytearray\), got list"):
            call([104, 105])


def test_merge_from_refuses_parts_that_are_not_bytes_and_says_what_to_pass():
    """merge_from(["he", "l", "l", "o"], ranks) failed inside with "descriptor '__add__' requires a 'bytes' object",
    a long list of str parts with "sequence item 0: expected a bytes-like object", and a lone str part came back
    unmerged as if it were a token: each is now a TypeError naming the wrong part and what to pass."""
    ranks = get_encoding("gpt2").merge_ranks
    for parts, wrong in ((["he", "l", "l", "o"], "str 'he'"), (["h"] * 40, "str 'h'"), (["hello"], "str 'hello'"),
                         ([b"he", "llo"], "str 'llo'"), ("hello", "str 'hello'"), (b"hello", "bytes b'hello'"),
                         ([104, 101], "int 104")):
        with pytest.raises(TypeError, match=rf"^merge_from takes a list of bytes parts such as \[b'he', b'llo'\], "
                                            rf"got {wrong}"):
            bpe.merge_from(parts, ranks)
    assert bpe.merge_from([b"he", b"l", b"l", b"o"], ranks) == [b"hello"]
    assert bpe.merge_from([b"h"] * 40, ranks) == bpe.merge_reference(b"h" * 40, ranks)


def test_max_rank_is_the_reference_on_a_truncated_table():
    ranks = {b"aa": 0, b"ab": 1, b"aab": 2}
    assert bpe.merge_reference(b"aab", ranks, max_rank=0) == [b"a", b"a", b"b"]
    assert bpe.merge_reference(b"aab", ranks, max_rank=1) == [b"aa", b"b"]
    assert bpe.merge_reference(b"aab", ranks, max_rank=3) == bpe.merge_reference(b"aab", ranks) == [b"aab"]


def test_recover_merges_gives_back_the_merges_a_table_was_built_from():
    # ranks as a trainer makes them: bytes first, then one token per merge, in order
    merges = [(b"a", b"b"), (b"ab", b"c"), (b"c", b"c"), (b"a", b"cc"), (b"abc", b"acc")]
    ranks = {bytes([b]): b for b in range(256)} | {a + b: 256 + r for r, (a, b) in enumerate(merges)}
    assert bpe.recover_merges(ranks) == merges
    del ranks[b"ab"]  # now "abc" (rank 257) is a|b|c under the merges below it: not one merge
    with pytest.raises(ValueError, match=r"b'abc' \(merge rank 257\)"):
        bpe.recover_merges(ranks)


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


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(small_pieces, rank_tables, st.integers(0, 31))
def test_hooks_agree_with_the_plain_reference(piece, ranks, max_rank):
    # max_rank = the plain reference on the table without the merges of that rank or above
    below = {t: r for t, r in ranks.items() if r < max_rank}
    assert bpe.merge_reference(piece, ranks, max_rank=max_rank) == bpe.merge_reference(piece, below)
    # on_merge reports each merge as it happens (two adjacent parts joined, at their rank), one call per merge,
    # and the last parts reported are the plain reference's
    steps = []
    parts = bpe.merge_reference(piece, ranks, on_merge=lambda *step: steps.append(step))
    assert parts == bpe.merge_reference(piece, ranks)
    before = [piece[i : i + 1] for i in range(len(piece))]
    for rank, left, right, after in steps:
        assert ranks[left + right] == rank
        i = next(i for i in range(len(before) - 1) if (before[i], before[i + 1]) == (left, right))
        assert list(after) == before[:i] + [left + right] + before[i + 2 :]
        before = list(after)
    assert before == parts and len(steps) == len(piece) - len(parts)


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


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_heap_path_used_for_long_non_ascii_pieces_is_exact(name):
    ranks = get_encoding(name).merge_ranks
    for text in ["ドキュメントを参照してください。設定ファイルの場所", "Параметрыкоманднойстроки", "中文字符串的处理方法与示例"]:
        data = text.encode()
        assert bpe.HEAP_THRESHOLD_NON_ASCII < len(data) <= bpe.HEAP_THRESHOLD
        all_three(data, ranks)


@functools.lru_cache(maxsize=None)
def uncrossable_table(name):
    return uncrossable.uncrossable_pairs(get_encoding(name).merge_ranks)


@settings(max_examples=max(FUZZ_EXAMPLES // 10, 100), deadline=None)
@given(st.text(max_size=80), st.sampled_from(["gpt2", "cl100k_base", "o200k_base"]))
def test_split_uncrossable_parts_merge_like_the_whole(text, name):
    enc = get_encoding(name)
    table = uncrossable_table(name)
    piece = text.encode("utf-8", "surrogatepass")
    parts = uncrossable.split_uncrossable(piece, table)
    assert b"".join(parts) == piece
    assert [t for part in parts for t in bpe.merge(part, enc.merge_ranks)] == bpe.merge_reference(piece, enc.merge_ranks)


def test_split_uncrossable_cuts_gpt2_chinese_at_every_character():
    ranks = get_encoding("gpt2").merge_ranks
    table = uncrossable_table("gpt2")
    assert table[ord("t") << 8 | ord("h")] == 0  # "th" is inside many tokens
    text = "本文档的最新版本"
    piece = text.encode()
    parts = uncrossable.split_uncrossable(piece, table)
    # GPT-2 has no token spanning two of these characters, so every character boundary is a cut ...
    boundaries = {len(text[:i].encode()) for i in range(1, len(text))}
    cuts = {len(b"".join(parts[:k])) for k in range(1, len(parts))}
    assert boundaries <= cuts and b"".join(parts) == piece
    # ... and BPE of the parts, one by one, is BPE of the whole.
    assert [t for part in parts for t in bpe.merge(part, ranks)] == bpe.merge_reference(piece, ranks)


def test_split_uncrossable_small_table():
    ranks = {b"ab": 0, b"bc": 1}
    table = uncrossable.uncrossable_pairs(ranks)
    assert uncrossable.split_uncrossable(b"abcab", table) == [b"abc", b"ab"]  # "ca" never meets in a token


def test_uncrossable_pairs_of_a_table_without_merges():
    # A vocab of the 256 bytes alone (a trainer asked for no merges): every pair is uncrossable.
    table = uncrossable.uncrossable_pairs({bytes([b]): b for b in range(256)})
    assert set(table) == {1}
    assert uncrossable.split_uncrossable("é中".encode(), table) == [bytes([b]) for b in "é中".encode()]


def carry_on_reference(parts: list[bytes], ranks: dict[bytes, int]) -> list[bytes]:
    """merge_reference's loop started from ``parts`` instead of single bytes: what merge_from must give."""
    parts = list(parts)
    while len(parts) > 1:
        pair_ranks = [ranks.get(a + b, float("inf")) for a, b in zip(parts, parts[1:])]
        best = min(pair_ranks)
        if best == float("inf"):
            break
        i = pair_ranks.index(best)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(small_pieces, rank_tables, st.lists(st.integers(1, 39), max_size=12), st.integers(0, 80))
def test_merge_from_carries_on_from_any_parts_both_ways(piece, ranks, cuts, threshold):
    # any cutting of a piece, through the rescanning loop and (threshold low) the heap, as the plain loop does
    places = sorted({c for c in cuts if c < len(piece)})
    parts = [piece[a:b] for a, b in zip([0, *places], [*places, len(piece)]) if a < b]
    saved = bpe.HEAP_THRESHOLD_NON_ASCII
    try:
        bpe.HEAP_THRESHOLD_NON_ASCII = threshold
        assert bpe.merge_from(parts, ranks) == carry_on_reference(parts, ranks)
    finally:
        bpe.HEAP_THRESHOLD_NON_ASCII = saved
    assert bpe.merge_from([piece[i : i + 1] for i in range(len(piece))], ranks) == bpe.merge_reference(piece, ranks)
