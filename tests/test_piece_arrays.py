"""piece_arrays: exact look-ups and counts of pieces given as (start, length) in a text's UTF-8 bytes."""

from collections import Counter

import numpy as np
import pytest
from conftest import CORPUS_FILES, FUZZ_SHARE, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenizer import get_encoding

from tokenizer.fast import piece_arrays
from tokenizer.fast.piece_arrays import PieceTable, byte_offsets, code_points, count_distinct, utf8_blob
from tokenizer.pretokenize import compile_pattern


def blob_of(pieces: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blob of the pieces laid end to end, and each piece's byte start and length."""
    text = "".join(pieces)
    ends = np.cumsum([len(p) for p in pieces], dtype=np.int64)
    starts = byte_offsets(code_points(text), ends - np.array([len(p) for p in pieces], dtype=np.int64))
    return utf8_blob(text), starts, byte_offsets(code_points(text), ends) - starts


@pytest.fixture(scope="module")
def gpt2_table():
    return PieceTable(dict(get_encoding("gpt2").token_ids))


@pytest.mark.parametrize("text", ["aé€\U0001f600b", "a" * 100 + "é€\U0001f600", "中文" * 50 + "ab", "", "plain"])
def test_utf8_blob_offsets_and_code_points(text):
    blob = utf8_blob(text)
    data = text.encode()
    assert blob[: len(data)].tobytes() == data and not blob[len(data) :].any()
    everywhere = np.arange(len(text) + 1)
    assert byte_offsets(code_points(text), everywhere).tolist() == [len(text[:i].encode()) for i in everywhere]
    assert code_points(text).tolist() == list(map(ord, text))


@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_corpus_pieces_found_and_counted_exactly(filename, gpt2_table):
    token_ids = get_encoding("gpt2").token_ids
    pieces = compile_pattern(get_encoding("gpt2").pat_str).split(corpus_text(filename, 300_000))
    blob, starts, lengths = blob_of(pieces)
    assert gpt2_table.find(blob, starts, lengths).tolist() == [token_ids.get(p.encode(), -1) for p in pieces]
    representatives, counts = count_distinct(blob, starts, lengths)
    assert {pieces[i]: n for i, n in zip(representatives.tolist(), counts.tolist())} == Counter(pieces)


# Pieces that share their first and last eight bytes and their length: only the middle tells them apart.
TWINS = ["Passwortagentenzpezifikation", "Passwortagentenspezifikation", "x" * 40, "x" * 19 + "y" + "x" * 20]


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(st.lists(st.sampled_from(TWINS) | st.text(alphabet="ab é€\U0001f600\x00", min_size=1, max_size=30),
                min_size=1, max_size=40),
       st.lists(st.sampled_from(TWINS) | st.text(alphabet="ab é\x00", min_size=1, max_size=30), max_size=20))
def test_fuzz_find_and_count_equal_dict_and_counter(pieces, table_pieces):
    values = {p.encode(): i for i, p in enumerate(dict.fromkeys(table_pieces))}
    blob, starts, lengths = blob_of(pieces)
    assert PieceTable(values).find(blob, starts, lengths).tolist() == [values.get(p.encode(), -1) for p in pieces]
    representatives, counts = count_distinct(blob, starts, lengths)
    assert {pieces[i]: n for i, n in zip(representatives.tolist(), counts.tolist())} == Counter(pieces)


def test_a_key_collision_costs_time_not_exactness(monkeypatch):
    pieces = ["ab", "ba", "ab", "c" * 20, "c" * 19 + "d", "ab", "abcdefgh", "abcdefgi", "hgfedcba"]
    blob, starts, lengths = blob_of(pieces)
    keys_of = piece_arrays.piece_keys

    def colliding_keys(blob, starts, lengths, first, last):
        # every piece of eight bytes or more now has one key: their bytes must still tell them apart
        keys = keys_of(blob, starts, lengths, first, last)
        keys[lengths >= 8] = 0
        return keys

    monkeypatch.setattr(piece_arrays, "piece_keys", colliding_keys)
    table = PieceTable({b"ab": 7, b"abcdefgh": 8})
    assert table.find(blob, starts, lengths).tolist() == [7, -1, 7, -1, -1, 7, 8, -1, -1]
    representatives, counts = count_distinct(blob, starts, lengths)
    assert sorted((pieces[i], n) for i, n in zip(representatives.tolist(), counts.tolist())) == sorted(
        Counter(pieces).items())
    with pytest.raises(ValueError, match="same key"):
        PieceTable({b"abcdefgh": 1, b"abcdefgi": 2})


def test_keys_of_short_pieces_are_distinct():
    # pieces under eight bytes skip the byte comparison: their keys must differ whenever they differ
    pieces = sorted({bytes(p) for p in np.random.default_rng(0).integers(0, 4, (20_000, 7)).tolist()})
    pieces += [b"a", b"a\x00", b"\x00", b"\x00\x00", b"\x00a"]
    blob = np.zeros(sum(map(len, pieces)) + piece_arrays.PADDING, dtype=np.uint8)
    blob[: blob.size - piece_arrays.PADDING] = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    lengths = np.array([len(p) for p in pieces])
    starts = np.cumsum(lengths) - lengths
    first, last = piece_arrays.piece_words(blob, starts, lengths)
    keys = piece_arrays.piece_keys(blob, starts, lengths, first, last)
    by_length = {(k, n) for k, n in zip(keys.tolist(), lengths.tolist())}
    assert len(by_length) == len(set(pieces))


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(st.lists(st.sampled_from(TWINS + ["ab", "ba", "a", "\x00", "\x00\x00", "é"]), min_size=1, max_size=60),
       st.integers(0, 2**64 - 1))
def test_count_distinct_when_keys_share_their_high_bits(pieces, salt):
    # count_distinct groups pieces by the high bits of their keys only: keys that differ in their low bits
    # alone (here a small number, salted) put unequal pieces in one group, which must still be counted apart.
    blob, starts, lengths = blob_of(pieces)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(piece_arrays, "piece_keys", lambda blob, starts, lengths, first, last: (
            (first ^ last ^ np.uint64(salt)) & np.uint64(0xFF)))
        representatives, counts = count_distinct(blob, starts, lengths)
        same_representatives, group = piece_arrays.distinct_pieces(blob, starts, lengths)
    assert [pieces[i] for i in same_representatives[group].tolist()] == pieces
    assert len(set(representatives.tolist())) == len(representatives)
    assert {pieces[i]: n for i, n in zip(representatives.tolist(), counts.tolist())} == Counter(pieces)


def test_empty_inputs():
    blob = utf8_blob("")
    none = np.zeros(0, dtype=np.int64)
    assert PieceTable({b"a": 1}).find(blob, none, none).tolist() == []
    assert [a.tolist() for a in count_distinct(blob, none, none)] == [[], []]
    with pytest.raises(ValueError, match="empty string"):
        PieceTable({b"": 1})
