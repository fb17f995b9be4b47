"""Batch BPE: many pieces encoded together with NumPy array operations, exactly as :func:`tokenizer.bpe.merge`.

``bpe.merge`` works on one piece at a time in Python. A call that meets new text has tens of thousands of
distinct pieces, and the per-piece Python loop becomes the cost. Here all of them are laid end to end in one
array of part ids and every piece takes one or more merges per *round*, each round a handful of array
operations over all pieces at once.

The pair table. A merge joins two adjacent parts whose concatenated bytes are a token (tiktoken's rule admits
any such pair, not only the pairs training merged). :class:`PairTable` lists every ``(left id, right id)`` whose
bytes join into a mergeable token, with that token's merge priority and id, in a hash table with linear probing
laid out in arrays, so a round looks up all its pairs at once (a few gathers, not a binary search each); the
pairs of two single bytes are also kept in a direct 65536-entry table for the first round. It is built with
NumPy (:func:`build_pair_table`): every token is cut at every position, both halves are found among the tokens
by a hash of their bytes, and each candidate is checked byte for byte, so a hash collision cannot create or
hide a pair. :mod:`tokenizer.fast.table_cache` keeps built tables on disk.

Which merges a round may do. Sequential BPE (``bpe.merge_reference``) always joins the leftmost pair of lowest
rank; so does every round, in every piece, which alone makes the batch exact. A round may also join any pair
that is *isolated*: call ``u(c)`` the lowest rank of any mergeable token containing the two bytes on either
side of a part boundary ``c`` (a table over the 65536 byte pairs). A pair of rank ``r`` whose outer boundaries
(left of its left part, right of its right part) both have ``u > r`` is merged, sooner or later, by the
sequential algorithm, with those same two parts: anything that would take one of them away must cross an outer
boundary, so has rank above ``r``, and is never chosen while the pair (rank ``r``) is still there. Joining it
early changes no choice in between: the only pairs it adds or removes cross those boundaries, so all rank
above ``r``, above every merge the sequential algorithm makes before it. Two isolated pairs, or an isolated
pair and the leftmost lowest one, never share a part (the shared boundary would have to be above both ranks).
So a round joins all of them at once, and the result is the sequential one; tests check it against
``bpe.merge`` on random vocabularies built to tie and on every distinct piece of the corpora.

Two more things keep the rounds few. A boundary with ``u = no_merge`` (no token holds both its bytes) is never
crossed, so pieces are cut there into *segments*, each finished on its own: a long piece of text in a script
the vocabulary hardly knows becomes many short segments. (A finer cut for scripts of multi-byte characters,
where nearly every byte pair occurs in some token, is :func:`char_windows_cross`: the caller cuts there before
grouping its segments.) And a run such as a million ``a`` ties every pair, so
neither rule above joins more than one pair per round; there a round also follows the chain of tied pairs after
the leftmost lowest one, as long as each join provably comes next (:func:`_chain_after_lowest`), so the run
takes a few rounds, not half a million. Where neither helps (a vocabulary trained on text without spaces keeps
a whole piece of it in one segment, and finds next to no pair isolated there), a long segment that a round
hardly shortens leaves the rounds and is finished one merge at a time with a heap (:func:`_merge_one_at_a_time`,
``LONG_SEGMENT_PARTS``): a round's pass over every part would otherwise buy a merge or two, and the rounds would
cost the square of the piece's length. Those merges run in Python, microseconds a part, as ``bpe.merge``'s do:
a caller that can have the compiled kernel passes ``kernel_soon`` (:data:`KernelSoon`), which batch BPE tells of
that work as it goes (the fast core counts it toward loading the kernel as bytes merged by ``bpe.merge``,
:mod:`tokenizer.fast.compiled_bpe`) and which gives the kernel's ``merge_from`` once it has arrived: from then on,
even in the middle of a call (a text of megabytes with no safe cut is one piece, one segment), the kernel carries
on merging each stalled segment from the parts it has reached, in the rounds or one at a time in Python (the
kernel's heap loop starts from any parts: no merge is done twice). :func:`parts_merged_one_at_a_time` counts the
parts merged in Python.

What this module does not do: the whole-piece rule (a piece that is itself a token is that token: the caller
decides, as :class:`tokenizer.encoding.Encoding` does), pre-tokenization, caching, or ids other than the
table's. A vocabulary whose parts cannot be named by distinct ids (two byte strings with one id, a single byte
missing, or ids beyond 2**31) has no table: :func:`build_pair_table` returns None and the caller keeps
``bpe.merge``.
"""

from __future__ import annotations

import heapq
import threading
import weakref
from itertools import compress, repeat
from operator import is_not
from typing import Callable, Mapping, NamedTuple, Sequence

import numpy as np

from .piece_arrays import hash_table_slots, home_slots, mix64

# Polynomial hash of a byte string, modulo 2**64 (uint64 arithmetic wraps): sum of (byte + 1) * BASE**(n-1-i).
_BASE = np.uint64(0x100000001B3)
_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))


# Ranks at or above this are renumbered (rank << 32 | position must fit an int64).
_LARGEST_RANK = 1 << 30

# Ids above this have no table (ids are kept as int32, and a pair's key left * n_ids + right as int64).
_LARGEST_ID = (1 << 31) - 1


# An empty slot of the pair table's hash table (keys are never negative).
_EMPTY = -1

# A segment of at least this many parts that a round shortens by fewer than one part in STALLED_PARTS_PER_JOIN
# leaves the rounds and is finished one merge at a time (_merge_one_at_a_time). A round costs a pass over every
# part (about 35 ns a part) and a merge done alone about 6 us, so a round that joins fewer than one part in
# ~180 is the dearer; a vocabulary trained on text without spaces (random letters, say) makes one segment of a
# whole piece (every byte pair is inside some token) whose merges neither rule of a round finds isolated, so the
# rounds joined one or two pairs each: 30,000 letters took seconds, growing with the square of the length.
LONG_SEGMENT_PARTS = 256
STALLED_PARTS_PER_JOIN = 128


# BPE carried on from a segment's parts (ids, some merged already) to its ids, as bpe.merge_from carries on from
# bytes: the compiled kernel's CompiledBPE.merge_from.
MergeFrom = Callable[[np.ndarray], np.ndarray]

# A caller's kernel_soon (encode_blob): told how many more parts batch BPE merged one at a time in Python (0: none
# since it was last told), it gives the compiled kernel's merge_from once the process has it (and at every later
# call), else None (at once, never waiting).
KernelSoon = Callable[[int], "MergeFrom | None"]

# A segment merged one at a time tells kernel_soon of its progress every this many merges (some 50-100 ms of
# Python), so that a kernel that arrives while a segment of megabytes is being merged takes over.
TELL_EVERY_MERGES = 1 << 14


class _OneAtATimeCount(threading.local):
    """The parts this thread's _merge_one_at_a_time has merged, as it tells kernel_soon of them (per thread, so that
    a reader of the count before and after a call sees its own work, not another thread's)."""

    parts = 0


_ONE_AT_A_TIME = _OneAtATimeCount()


def parts_merged_one_at_a_time() -> int:
    """How many parts this thread's batch BPE has finished one merge at a time so far (``LONG_SEGMENT_PARTS``):
    work done in Python at microseconds a part, which the fast core counts toward loading the compiled kernel."""
    return _ONE_AT_A_TIME.parts


class PairTable(NamedTuple):
    """Everything a round needs. A part is named by its token id; a pair by its key, ``left * n_ids + right``.

    The pairs are held in a hash table with linear probing: a key lives in its home slot (:func:`tokenizer.fast.piece_arrays.home_slots`)
    or in the first free slot after it, and no empty slot lies between its home and where it lives.
    """

    slot_keys: np.ndarray  # int64: the key of the pair in each slot, _EMPTY where none; the last slot is empty
    slot_ranks: np.ndarray  # int32: its merge priority (renumbered 0, 1, ... if huge: same order and ties)
    slot_merged: np.ndarray  # int32: the id of the token it makes
    slot_bits: int  # home slots run from 0 to 2**slot_bits - 1
    n_ids: int  # ids run from 0 to n_ids - 1
    no_merge: int  # a rank above every real one
    byte_ids: np.ndarray  # int32[256]: id of each single byte
    byte_pair_ranks: np.ndarray  # int32[65536]: rank of joining single bytes a and b (at a << 8 | b)
    byte_pair_merged: np.ndarray  # int32[65536]: the id that join makes
    boundary_rank: np.ndarray  # int32[65536]: u(a << 8 | b), lowest rank of a mergeable token containing a, b
    window_bits: np.ndarray  # uint8: a bit set of the character windows of mergeable tokens (char_windows_cross)
    window_pairs: np.ndarray  # uint8[65536]: the kinds of window with each middle byte pair, as bits


def _substring_hasher(blob: np.ndarray):
    """``hash(start, end)``: the hash of ``blob[start:end]`` for arrays of starts and ends, independent of where
    the substring lies (a polynomial hash made position-free by prefix sums of ``byte * BASE**-position``)."""
    with np.errstate(over="ignore"):
        power = np.empty(len(blob) + 1, dtype=np.uint64)  # power[i] = BASE ** i
        power[0] = 1
        np.cumprod(np.full(len(blob), _BASE, dtype=np.uint64), out=power[1:])
        inverse = np.empty(len(blob), dtype=np.uint64)  # inverse[i] = BASE ** -i
        inverse[0] = 1
        np.cumprod(np.full(len(blob) - 1, _BASE_INVERSE, dtype=np.uint64), out=inverse[1:])
        # prefix[i] = sum over t < i of (blob[t] + 1) * BASE**-t
        prefix = np.zeros(len(blob) + 1, dtype=np.uint64)
        np.cumsum((blob.astype(np.uint64) + 1) * inverse, out=prefix[1:])

    def hash_of(start: np.ndarray, end: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return mix64((prefix[end] - prefix[start]) * power[np.maximum(end - 1, 0)])

    return hash_of


def _segment_offsets(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(segment, offset)`` for ``sizes.sum()`` slots laid out segment by segment: which segment each slot is
    in and its position inside it. ``_segment_offsets([2, 3])`` is ``([0, 0, 1, 1, 1], [0, 1, 0, 1, 2])``."""
    segment = np.repeat(np.arange(len(sizes)), sizes)
    offset = np.arange(len(segment)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return segment, offset


def build_pair_table(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> PairTable | None:
    """The :class:`PairTable` of an encoding (``merge_ranks``: token bytes -> merge priority; ``token_ids``:
    token bytes -> id), or None when its parts cannot be named by distinct ids.

    Every token of ``merge_ranks`` is cut at every inner position; a cut whose two halves are both tokens is a
    pair. The halves are found by hash among the vocabulary's tokens, then checked byte for byte.
    """
    singles = [token_ids.get(bytes([b])) for b in range(256)]
    if None in singles or not token_ids:
        return None
    vocab = list(token_ids)
    ids = np.fromiter(token_ids.values(), dtype=np.int64, count=len(vocab))
    if ids.min() < 0 or np.bincount(ids).max() > 1:
        return None
    n_ids = int(ids.max()) + 1
    if n_ids > _LARGEST_ID + 1:
        return None  # a pair's key, left * n_ids + right, would not fit an int64
    lengths = np.fromiter(map(len, vocab), dtype=np.int64, count=len(vocab))
    starts = np.cumsum(lengths) - lengths
    blob = np.frombuffer(b"".join(vocab), dtype=np.uint8)
    hash_of = _substring_hasher(blob)
    vocab_hash = hash_of(starts, starts + lengths)
    by_hash = np.argsort(vocab_hash)
    sorted_hash = vocab_hash[by_hash]
    if len(sorted_hash) > 1 and not np.all(sorted_hash[1:] != sorted_hash[:-1]):
        return None  # two tokens share a hash: lookups by hash would be ambiguous (never seen in practice)

    def find(hashes: np.ndarray) -> np.ndarray:
        """The vocabulary index of the token with each hash, -1 where none has it."""
        at = np.minimum(np.searchsorted(sorted_hash, hashes), len(sorted_hash) - 1)
        return np.where(sorted_hash[at] == hashes, by_hash[at], -1)

    # The merge priority of each vocabulary token; only tokens of two or more bytes are made by a merge.
    rank_or_none = list(map(merge_ranks.get, vocab))
    has_rank = np.fromiter(map(is_not, rank_or_none, repeat(None)), dtype=bool, count=len(vocab))
    mergeable = np.flatnonzero(has_rank & (lengths > 1))
    all_ranks = np.zeros(len(vocab), dtype=np.int64)
    all_ranks[has_rank] = np.fromiter(compress(rank_or_none, has_rank), dtype=np.int64, count=int(has_rank.sum()))
    m_ranks = all_ranks[mergeable]

    # One candidate per (mergeable token, inner position): its bytes cut there into a left and a right part.
    owner, offset = _segment_offsets(lengths[mergeable] - 1)
    owner = mergeable[owner]
    start, end = starts[owner], starts[owner] + lengths[owner]
    cut = start + offset + 1
    left = find(hash_of(start, cut))
    found = np.flatnonzero(left >= 0)
    owner, start, cut, end, left = owner[found], start[found], cut[found], end[found], left[found]
    right = find(hash_of(cut, end))
    found = np.flatnonzero((right >= 0) & (lengths[np.maximum(left, 0)] == cut - start))
    owner, start, cut, end, left, right = owner[found], start[found], cut[found], end[found], left[found], right[found]
    found = np.flatnonzero(lengths[right] == end - cut)
    owner, start, cut, left, right = owner[found], start[found], cut[found], left[found], right[found]
    # A hash match is not proof: check that the two parts' bytes make the token's, byte for byte.
    candidate, at = _segment_offsets(lengths[owner])
    left_size = (cut - start)[candidate]
    source = np.where(
        at < left_size, starts[left][candidate] + at, starts[right][candidate] + (at - left_size)
    )
    wrong = np.zeros(len(owner) + 1, dtype=bool)
    wrong[np.where(blob[source] != blob[start[candidate] + at], candidate, len(owner))] = True
    same = ~wrong[:-1]
    owner, left, right = owner[same], ids[left[same]], ids[right[same]]

    if len(m_ranks) and (m_ranks.min() < 0 or m_ranks.max() >= _LARGEST_RANK):
        # a round packs a rank and a position into one int64: renumber 0, 1, ... keeping order and ties
        distinct_ranks, dense = np.unique(m_ranks, return_inverse=True)
        no_merge = len(distinct_ranks)
        all_ranks[mergeable] = dense.reshape(-1)
    else:
        no_merge = int(m_ranks.max(initial=-1)) + 1
    keys = left * n_ids + right
    where, size, slot_bits = hash_table_slots(keys)
    slot_keys = np.full(size, _EMPTY, dtype=np.int64)
    slot_ranks = np.full(size, no_merge, dtype=np.int32)
    slot_merged = np.zeros(size, dtype=np.int32)
    slot_keys[where], slot_ranks[where], slot_merged[where] = keys, all_ranks[owner], ids[owner]

    # u(a, b): every byte pair inside a mergeable token, with that token's rank; keep the lowest.
    token, at = _segment_offsets(lengths[mergeable] - 1)
    inside = starts[mergeable][token] + at
    byte_pairs = (blob[inside].astype(np.int64) << 8) | blob[inside + 1]
    boundary_rank = np.full(65536, no_merge, dtype=np.int32)
    np.minimum.at(boundary_rank, byte_pairs, all_ranks[mergeable][token])

    window_bits, window_pairs = _windows(blob, starts[mergeable], lengths[mergeable])
    table = PairTable(
        window_bits=window_bits,
        window_pairs=window_pairs,
        slot_keys=slot_keys,
        slot_ranks=slot_ranks,
        slot_merged=slot_merged,
        slot_bits=slot_bits,
        n_ids=n_ids,
        no_merge=no_merge,
        byte_ids=np.array(singles, dtype=np.int32),
        byte_pair_ranks=np.empty(0, dtype=np.int64),
        byte_pair_merged=np.empty(0, dtype=np.int64),
        boundary_rank=boundary_rank,
    )
    # Every pair of single bytes, looked up once: the first round of every batch needs only these.
    byte_pairs = np.arange(65536)
    ranks, merged = lookup_pairs(table, table.byte_ids[byte_pairs >> 8], table.byte_ids[byte_pairs & 255])
    return table._replace(byte_pair_ranks=ranks, byte_pair_merged=merged)


# Character windows. The byte-pair rule above cuts a piece where no token holds the two bytes on either side;
# but in a script of multi-byte characters almost every such byte pair is inside some token (CJK tokens hold
# many characters), so long pieces of Japanese stay whole although most of their character boundaries are
# never crossed. A finer rule, at character boundaries: a merge that crosses the boundary between characters
# A and B makes a token holding the text's bytes on both sides, so that token, read in the text, holds a suffix
# of A (all of A if it began before A) followed by a prefix of B (all of B if it ends after B). Call the bytes of
# a token on either side of a character start inside it, each up to the next character start or the token's
# end, a *window* (left, right). The boundary A|B can be crossed only if some window of some mergeable token is
# (a suffix of A, a prefix of B).
#
# The windows are kept as a bit set of their hashes (a false hit only keeps a boundary that could have been
# cut: no exact look-up is needed, and the rule stays exact), and, to look up few of them, by the byte pair at
# their middle and their kind: whole characters on both sides, or a side that is part of a character (the token
# began or ended inside it). Most boundaries then need one look-up: whole A, whole B.
_WHOLE, _PART_AFTER, _PART_BEFORE, _PARTS = 1, 2, 4, 8  # window kinds, as bits of PairTable.window_pairs


def _utf8_lead(values: np.ndarray) -> np.ndarray:
    """Whether each byte starts a character (is not a continuation byte, 0b10xxxxxx)."""
    return (values < 0x80) | (values >= 0xC0)


def _char_length(lead: np.ndarray) -> np.ndarray:
    """The length of a UTF-8 character from its first byte."""
    return 1 + (lead >= 0xC0).astype(np.int64) + (lead >= 0xE0) + (lead >= 0xF0)


def _words32(data: np.ndarray) -> np.ndarray:
    """The four bytes from each position of ``data`` (zeros past its end) as a little-endian uint32."""
    padded = np.zeros(len(data) + 4, dtype=np.uint8)
    padded[: len(data)] = data
    return np.ndarray((len(data),), dtype="<u4", buffer=padded, strides=(1,)).astype(np.uint32)


# the low n bytes of a uint32, for n = 0..4
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(5)], dtype=np.uint32)


def _window_hash(left: np.ndarray, right: np.ndarray, n_bits: int) -> np.ndarray:
    """Where the window ``(left, right)`` has its bit in a set of ``n_bits`` bits (a power of two); each side is
    its bytes as a little-endian uint32, padded with zeros (unambiguous: a zero byte is a character start,
    which a side holds only first)."""
    with np.errstate(over="ignore"):
        mixed = left * np.uint32(0x9E3779B1)
        mixed ^= right
        mixed *= np.uint32(0x85EBCA77)
    mixed >>= np.uint32(32 - (n_bits.bit_length() - 1))
    return mixed


def _windows(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(window_bits, window_pairs)`` of the tokens ``(starts, lengths)`` of ``blob``: the bit set of their
    windows (:func:`_window_hash`, at least 256 bits per window), and each middle byte pair's kinds of window.
    Windows with a side over 4 bytes are not in valid text; those of two ASCII bytes are the byte-pair rule's."""
    token, at = _segment_offsets(lengths)
    data = blob[starts[token] + at]  # the tokens' bytes, one after another
    index = np.arange(len(data))
    lead = _utf8_lead(data)
    begins = lead | (at == 0)  # a window side begins here
    inner = np.flatnonzero(lead & (at > 0))  # a character start inside a token: a window's middle
    last_begin = np.maximum.accumulate(np.where(begins, index, 0))
    next_begin = np.append(np.minimum.accumulate(np.where(begins, index, len(data))[::-1])[::-1], len(data))
    left_start = last_begin[inner - 1]
    right_end = next_begin[inner + 1]  # (a token's first byte begins a side: no window runs past its token)
    left_lengths, right_lengths = inner - left_start, right_end - inner
    keep = (left_lengths <= 4) & (right_lengths <= 4)
    keep &= (left_lengths > 1) | (right_lengths > 1) | (data[left_start] >= 0x80) | (data[inner] >= 0x80)
    inner, left_start, left_lengths, right_lengths = inner[keep], left_start[keep], left_lengths[keep], right_lengths[keep]
    words = _words32(data)
    part_before = ~lead[left_start]  # the token began inside the character before
    part_after = right_lengths < _char_length(data[inner])  # it ends inside the one after
    kinds = np.where(part_before, np.where(part_after, _PARTS, _PART_BEFORE), np.where(part_after, _PART_AFTER, _WHOLE))
    window_pairs = np.zeros(65536, dtype=np.uint8)
    np.bitwise_or.at(window_pairs, (data[inner - 1].astype(np.int64) << 8) | data[inner], kinds.astype(np.uint8))
    n_bits = 1 << max(6, int(256 * len(inner)).bit_length())
    bits = np.zeros(n_bits, dtype=bool)
    bits[_window_hash(words[left_start] & _LOW_BYTES[left_lengths], words[inner] & _LOW_BYTES[right_lengths], n_bits)] = True
    return np.packbits(bits, bitorder="little"), window_pairs


def _in_bit_set(bit_set: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    at = _window_hash(left, right, len(bit_set) * 8)
    return (bit_set[at >> np.uint32(3)] >> (at & np.uint32(7)).astype(np.uint8)) & np.uint8(1) != 0


def _before_lengths() -> np.ndarray:
    """The length of the character that ends a four-byte word (read little-endian: it ends in the high byte),
    by the top two bits of the word's last three bytes (see char_windows_cross)."""
    lengths = np.empty(64, dtype=np.int64)
    for index in range(64):
        continuation = [(index >> (2 * k) & 3) == 2 for k in range(3)]  # bytes 1, 2, 3 of the word
        lengths[index] = 1 if not continuation[2] else 2 if not continuation[1] else 3 if not continuation[0] else 4
    return lengths


_BEFORE_LENGTH = _before_lengths()
_CHAR_LENGTH = _char_length(np.arange(256))


def char_windows_cross(table: PairTable, text: np.ndarray, last_bytes: np.ndarray) -> np.ndarray:
    """Whether a merge may cross each boundary between two characters of ``text`` (UTF-8 bytes, followed by
    at least 4 more bytes), the one after the bytes ``last_bytes`` (ascending): False only where no window of
    any mergeable token is (a suffix of the character before, a prefix of the one after). Where False, no merge
    ever crosses the boundary, and BPE can be run on both sides apart.

    >>> from tokenizer import get_encoding
    >>> enc = get_encoding("o200k_base")
    >>> table = build_pair_table(enc.merge_ranks, enc.token_ids)
    >>> text = np.frombuffer("ドキュメント".encode() + bytes(4), dtype=np.uint8)
    >>> char_windows_cross(table, text, np.arange(5, 15, 3)).tolist()   # after キ, ュ, メ, ン
    [False, False, True, True]
    >>> [enc.decode([i]) for i in enc.encode("ドキュメント")]
    ['ド', 'キ', 'ュ', 'メント']
    """
    crosses = np.ones(len(last_bytes), dtype=bool)  # (the text's first three bytes: taken as crossed)
    first = int(np.searchsorted(last_bytes, 3))
    ends = last_bytes[first:]
    words = np.ndarray((len(text) - 3,), dtype="<u4", buffer=text, strides=(1,))
    before = words[ends - 3]  # the four bytes that end the character before (it in the high bytes)
    after = words[ends + 1]  # the four bytes from the character after on
    after_lead = (after & np.uint32(0xFF)).astype(np.intp)
    # the character before's length, by the top two bits of the word's bytes 1, 2, 3
    top_bits = ((before >> np.uint32(14)) & np.uint32(0x03)) | ((before >> np.uint32(20)) & np.uint32(0x0C))
    top_bits |= (before >> np.uint32(26)) & np.uint32(0x30)
    before_length = _BEFORE_LENGTH[top_bits]
    kinds = table.window_pairs[((before >> np.uint32(16)) & np.uint32(0xFF00)) | after_lead]  # the middle byte pair
    # Most boundaries need one look-up: whole characters on both sides, where such a window has their middle
    # bytes.
    whole = _in_bit_set(table.window_bits, before >> (np.uint32(32) - np.uint32(8) * before_length.astype(np.uint32)),
                        after & _LOW_BYTES[_CHAR_LENGTH[after_lead]])
    whole &= (kinds & _WHOLE) != 0
    crosses[first:] = whole
    # The few whose middle bytes also begin or end a window of a part of a character: each shorter side.
    parts = np.flatnonzero(((kinds & (_PART_AFTER | _PART_BEFORE | _PARTS)) != 0) & ~whole)
    if len(parts):
        before, after, kinds = before[parts], after[parts], kinds[parts]
        before_length, after_length = before_length[parts], _CHAR_LENGTH[after_lead[parts]]
        found = np.zeros(len(parts), dtype=bool)
        for drop_before in range(4):
            for drop_after in range(4) if drop_before else range(1, 4):
                kind = _PARTS if drop_before and drop_after else _PART_BEFORE if drop_before else _PART_AFTER
                left, right = before_length - drop_before, after_length - drop_after
                at = np.flatnonzero((left > 0) & (right > 0) & ((kinds & kind) != 0) & ~found)
                found[at[_in_bit_set(table.window_bits,
                                     before[at] >> (np.uint32(32) - np.uint32(8) * left[at].astype(np.uint32)),
                                     after[at] & _LOW_BYTES[right[at]])]] = True
        crosses[first + parts] = found
    return crosses


def pairs_of(table: PairTable) -> dict[tuple[int, int], tuple[int, int]]:
    """Every pair of the table as ``(left id, right id) -> (rank, merged id)``: to read or test it, not to encode.

    >>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    >>> pairs_of(build_pair_table({b"ab": 0}, vocab))
    {(97, 98): (0, 256)}
    """
    full = np.flatnonzero(table.slot_keys != _EMPTY)
    keys, ranks, merged = (a[full].tolist() for a in (table.slot_keys, table.slot_ranks, table.slot_merged))
    return {divmod(k, table.n_ids): (r, m) for k, r, m in zip(keys, ranks, merged)}


def lookup_pairs(table: PairTable, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rank, merged id)`` of each pair ``(left[i], right[i])`` of ids; rank ``no_merge`` where the pair makes no
    mergeable token."""
    keys = left.astype(np.int64)
    keys *= table.n_ids
    keys += right
    rank = np.full(len(keys), table.no_merge, dtype=np.int32)
    merged = np.zeros(len(keys), dtype=np.int32)
    slot = home_slots(keys, table.slot_bits)
    # (Index arrays throughout, not boolean masks: NumPy's take by index is several times faster than its
    # masked selection when the mask is irregular, as hits and misses are.)
    searching = None  # the keys not found yet, by index (None: all, in the first pass)
    while searching is None or len(searching):  # each pass looks one slot further
        at = slot if searching is None else slot[searching]
        in_slot = table.slot_keys[at]
        hit = in_slot == (keys if searching is None else keys[searching])
        found_at = np.flatnonzero(hit)
        at_hit = at[found_at]
        found = found_at if searching is None else searching[found_at]
        rank[found], merged[found] = table.slot_ranks[at_hit], table.slot_merged[at_hit]
        go_on = np.flatnonzero((in_slot != _EMPTY) & ~hit)  # never past an empty slot
        searching = go_on if searching is None else searching[go_on]
        slot[searching] += 1
    return rank, merged


def _chain_after_lowest(
    table: PairTable,
    parts: np.ndarray,
    boundary: np.ndarray,
    rank: np.ndarray,
    merged: np.ndarray,
    lowest_rank: np.ndarray,
    lowest_at: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
) -> np.ndarray:
    """Positions of the pairs that sequential BPE joins right after the leftmost lowest one of each segment,
    when they tie with it: a run such as ``b"aaaa..."`` then takes a few rounds, not one per merge.

    Say the leftmost lowest pair of a segment, rank ``r``, starts at part ``i``, and the pairs starting at
    ``i + 2``, ``i + 4``, ... also have rank ``r``. Sequential BPE joins ``i`` first. If every pair that join
    creates ranks above ``r``, the leftmost pair of rank ``r`` is then the one at ``i + 2`` (nothing left of it
    ranks ``r`` or less), so it is joined next, and so on. The chain goes on while each join's new pairs (with
    the part on its left, which is the previous join's token, and with the part on its right) rank above ``r``;
    the join that first makes a pair of rank ``r`` or less is still the next one, but ends the chain.
    """
    # Segments whose chain has a second link: the pair at i + 2 has rank r, inside the segment.
    second = lowest_at + 2
    linked = np.flatnonzero(lowest_rank < table.no_merge)  # not the finished segments
    linked = linked[boundary[lowest_at[linked] + 1] != table.no_merge]  # part i + 1 does not end the segment
    linked = linked[rank[second[linked]] == lowest_rank[linked]]
    if not len(linked):
        return linked
    # The linked segments are few (a long run is one segment): their parts are gathered, one after another,
    # and the chains are followed there.
    linked_lengths = lengths[linked]
    linked_starts = np.cumsum(linked_lengths) - linked_lengths  # where each begins among the gathered
    gathered = np.repeat(starts[linked] - linked_starts, linked_lengths) + np.arange(int(linked_lengths.sum()))
    # stop[p]: the first q >= p, in steps of 2, whose pair does not continue a chain reaching it.
    in_chain = np.zeros(len(gathered), dtype=bool)  # (a segment's first part: the part before it ends a segment)
    in_chain[1:] = ((rank[gathered[1:]] == np.repeat(lowest_rank[linked], linked_lengths)[1:])
                    & (boundary[gathered[:-1]] != table.no_merge))
    stop = np.arange(len(gathered) + 2)  # two spare slots past the end, where every chain stops
    stop[:-2] = np.where(in_chain, len(gathered) + 2, stop[:-2])
    for parity in (0, 1):  # the minimum of stop from p on, over positions of p's parity
        stop[parity::2] = np.minimum.accumulate(stop[parity::2][::-1])[::-1]
    first = lowest_at[linked]
    first_gathered = first - starts[linked] + linked_starts
    links = (stop[first_gathered + 2] - first_gathered) // 2  # joins at first, first + 2, ..., first + 2 * (links - 1)
    segment, step = _segment_offsets(links)
    at = first[segment] + 2 * step
    token = merged[at]
    # The pair each join makes on its left: with the previous join's token, or (the first) the part before.
    left = np.where(step > 0, merged[np.maximum(at - 2, 0)], parts[np.maximum(at - 1, 0)])
    has_left = (step > 0) | (at > starts[linked][segment])
    right_exists = boundary[at + 1] != table.no_merge
    right = parts[np.minimum(at + 2, len(parts) - 1)]
    r = lowest_rank[linked][segment]
    left_rank, _ = lookup_pairs(table, left, token)
    right_rank, _ = lookup_pairs(table, token, right)
    ends_chain = (has_left & (left_rank <= r)) | (right_exists & (right_rank <= r))
    # A join comes after the chain's end if an earlier join of its segment ends the chain.
    ended_before = np.cumsum(ends_chain) - ends_chain
    ended_before -= np.repeat(ended_before[np.cumsum(links) - links], links)
    return at[ended_before == 0]


def encode_pieces(pieces: Sequence[bytes], table: PairTable,
                  kernel_soon: KernelSoon | None = None) -> list[tuple[int, ...]]:
    """The token ids of each piece (bytes), as ``bpe.merge`` gives them (no whole-piece rule); ``kernel_soon``
    as :func:`encode_blob`'s.

    >>> from tokenizer import get_encoding
    >>> enc = get_encoding("gpt2")
    >>> table = build_pair_table(enc.merge_ranks, enc.token_ids)
    >>> encode_pieces([b" hello", b"qqqq", b"x"], table)
    [(23748,), (38227, 38227), (87,)]
    """
    piece_lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    flat, sizes = encode_blob(np.frombuffer(b"".join(pieces), dtype=np.uint8), piece_lengths, table, kernel_soon)
    flat = flat.tolist()
    ids_end = np.cumsum(sizes)
    return list(map(tuple, map(flat.__getitem__, map(slice, (ids_end - sizes).tolist(), ids_end.tolist()))))


def encode_blob(blob: np.ndarray, piece_lengths: np.ndarray, table: PairTable,
                kernel_soon: KernelSoon | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, sizes)``: :func:`encode_pieces` for pieces laid end to end in ``blob`` (uint8) with the given
    lengths, as arrays: the ids of all pieces one after another, and how many ids each piece has.

    ``kernel_soon`` (:data:`KernelSoon`), if given, is asked before each segment the rounds hardly shorten is
    merged one at a time, and told of those merges as they go; once it gives the compiled kernel's merge_from,
    the kernel carries on from that segment's parts as they are, and merges every later one from the parts the
    rounds left (the same ids: both follow ``bpe.merge``'s rule, from any parts BPE can reach).
    """
    piece_ends = np.cumsum(piece_lengths)
    if not len(blob):
        return np.zeros(0, dtype=np.int32), np.zeros(len(piece_lengths), dtype=np.int64)
    no_merge = table.no_merge
    # Segments: the pieces cut wherever no token holds the bytes on both sides (u = no_merge). No merge crosses
    # such a cut, so each segment is encoded alone, and a long piece does not stay in the rounds for long.
    byte_pairs = (blob[:-1].astype(np.int32) << 8) | blob[1:]
    # u of the boundary after each byte; no_merge where it ends a segment (the segments' ends are found where
    # no_merge is, so the rounds keep no separate flag). (Index arrays here and below, not boolean masks: see
    # lookup_pairs.)
    boundary = np.full(len(blob), no_merge, dtype=np.int32)
    boundary[:-1] = table.boundary_rank[byte_pairs]
    boundary[piece_ends[piece_lengths > 0] - 1] = no_merge
    segment_ends = np.flatnonzero(boundary == no_merge) + 1
    lengths = np.diff(segment_ends, prepend=0)
    kernel_merge_from = None  # the compiled kernel's merge_from, once kernel_soon gives it
    # A segment of one byte is finished already; the others go into the rounds.
    single = lengths == 1
    single_at = segment_ends[single] - 1
    done_index, done_lengths, done_parts = [np.flatnonzero(single)], [lengths[single]], [table.byte_ids[blob[single_at]]]
    segment_index, lengths = np.flatnonzero(~single), lengths[~single]
    in_rounds = np.ones(len(blob), dtype=bool)
    in_rounds[single_at] = False
    in_rounds = np.flatnonzero(in_rounds)
    # Flat arrays, one entry per part: its id; u of the boundary after it (no_merge: it ends its segment); the
    # rank and result of joining it with the next part (no_merge at a segment's end).
    parts = table.byte_ids[blob[in_rounds]]
    boundary = boundary[in_rounds]
    pair_of_bytes = byte_pairs[np.minimum(in_rounds, len(byte_pairs) - 1)]  # (the blob's last byte ends a segment)
    rank = np.where(boundary == no_merge, no_merge, table.byte_pair_ranks[pair_of_bytes])
    merged = table.byte_pair_merged[pair_of_bytes]
    position = np.arange(len(parts), dtype=np.int64)
    stalled = np.zeros(0, dtype=np.int64)  # the segments the last round hardly shortened (LONG_SEGMENT_PARTS)

    while len(parts):
        starts = np.cumsum(lengths) - lengths
        lowest = np.minimum.reduceat((rank.astype(np.int64) << 32) | position[: len(parts)], starts)
        lowest_rank, lowest_at = lowest >> 32, lowest & 0xFFFFFFFF  # the leftmost lowest pair of each segment
        finished = lowest_rank == no_merge
        stalled = stalled[~finished[stalled]]
        if len(stalled) or finished.all() or finished.sum() * 4 >= len(finished):
            # Move the finished segments out (not every round: moving costs a pass over all parts), and the
            # stalled ones, finished one merge at a time.
            done_index.append(segment_index[finished])
            done_lengths.append(lengths[finished])
            out = np.repeat(finished, lengths)
            done_parts.append(parts[np.flatnonzero(out)])
            if len(stalled):
                for segment in stalled.tolist():
                    if kernel_merge_from is None and kernel_soon is not None:
                        kernel_merge_from = kernel_soon(0)
                    begin = int(starts[segment])
                    ids = parts[begin : begin + int(lengths[segment])]  # (the parts the rounds reached)
                    if kernel_merge_from is None:  # Python merges, until the segment is done or the kernel comes
                        merged_so_far, kernel_merge_from = _merge_one_at_a_time(ids.tolist(), table, kernel_soon)
                        ids = np.array(merged_so_far, dtype=parts.dtype)
                    if kernel_merge_from is not None:  # the kernel carries on from the parts as they are
                        ids = kernel_merge_from(ids).astype(parts.dtype, copy=False)
                    done_index.append(segment_index[segment : segment + 1])
                    done_lengths.append(np.array([len(ids)], dtype=lengths.dtype))
                    done_parts.append(ids)
                finished[stalled] = True  # (out of the rounds too, from here on)
                stalled = stalled[:0]
                out = np.repeat(finished, lengths)
            if finished.all():
                break
            keep = np.flatnonzero(~out)
            going_on = np.flatnonzero(~finished)
            segment_index, lengths = segment_index[going_on], lengths[going_on]
            parts, boundary, rank, merged = parts[keep], boundary[keep], rank[keep], merged[keep]
            starts = np.cumsum(lengths) - lengths
            lowest_rank, lowest_at = lowest_rank[going_on], lowest_at[going_on]
            lowest_at -= (np.cumsum(out) - out)[lowest_at]  # parts moved out before it
        # Isolated pairs: rank below u of the boundary before the left part and after the right part.
        join = np.empty(len(parts), dtype=bool)
        join[-1] = False  # the last part ends its segment: it starts no pair
        np.less(rank[:-1], boundary[1:], out=join[:-1])
        join[1:] &= rank[1:] < boundary[:-1]
        join[lowest_at[lowest_rank < no_merge]] = True
        join[_chain_after_lowest(table, parts, boundary, rank, merged, lowest_rank, lowest_at, starts, lengths)] = True
        at = np.flatnonzero(join)
        parts[at] = merged[at]
        # The right part of each join disappears; the joined part ends (and bounds) where that part did.
        # (Index arrays, not boolean masks: see lookup_pairs.)
        keep = np.ones(len(parts), dtype=bool)
        keep[at + 1] = False
        keep = np.flatnonzero(keep)
        not_joined = np.flatnonzero(~join)
        joins = np.add.reduceat(join, starts)
        lengths = lengths - joins
        stalled = np.flatnonzero((lengths >= LONG_SEGMENT_PARTS) & (joins * STALLED_PARTS_PER_JOIN < lengths))
        parts, rank, merged = parts[keep], rank[keep], merged[keep]
        boundary = boundary[not_joined]
        # Pairs touching a joined part changed: the one it starts and the one before it. Each earlier join
        # removed one part before it, which gives its new position.
        joined = at - np.arange(len(at))
        changed = np.concatenate([joined, joined[joined > 0] - 1])
        at_end = boundary[changed] == no_merge
        rank[changed[np.flatnonzero(at_end)]] = no_merge
        changed = changed[np.flatnonzero(~at_end)]
        rank[changed], merged[changed] = lookup_pairs(table, parts[changed], parts[changed + 1])

    # Put the segments back in order: each piece's ids are then one slice of them.
    finished_index = np.concatenate(done_index)
    finished_sizes = np.concatenate(done_lengths)
    flat = np.concatenate(done_parts)
    if np.all(finished_index[1:] > finished_index[:-1]):  # they finished in order (all of one byte, say)
        sizes = finished_sizes
    else:
        finished_starts = np.cumsum(finished_sizes) - finished_sizes
        order = np.empty_like(finished_index)
        order[finished_index] = np.arange(len(finished_index))  # segment i is the order[i]-th finished
        sizes = finished_sizes[order]
        flat = flat[np.repeat(finished_starts[order], sizes) + _segment_offsets(sizes)[1]]
    # A piece's ids end where its last segment's do; an empty piece has no segment.
    segments_per_piece = np.searchsorted(segment_ends, piece_ends, side="right")
    ids_end = np.concatenate([[0], np.cumsum(sizes)])[segments_per_piece]
    return flat, np.diff(ids_end, prepend=0)


def _merge_one_at_a_time(parts: list[int], table: PairTable,
                         kernel_soon: KernelSoon | None = None) -> tuple[list[int], MergeFrom | None]:
    """``(ids, None)``: the ids of a segment whose parts are ``parts`` (ids, a list it changes) when BPE goes on
    from them: the leftmost pair of lowest rank joined, one after another, as :func:`tokenizer.bpe.merge_heap`
    does with bytes (O(n log n), for the segments the rounds hardly shorten). The candidate pairs wait in a heap
    as ``(rank, position, left, right, merged)``: ordered by where their left part is after their rank, so that
    of equal ranks the leftmost is joined first; an entry whose parts have changed since it was pushed is skipped.

    ``kernel_soon`` is told of the parts as they are merged (every ``TELL_EVERY_MERGES`` merges, the rest at the
    end: ``len(parts)`` in all). If it gives the compiled kernel's merge_from meanwhile, the merging stops there:
    ``(the parts reached, that merge_from)``, for the kernel to carry on from them (none of the work is lost)."""
    count = len(parts)
    told = 0  # the parts told of so far (to kernel_soon and the count of parts_merged_one_at_a_time)
    merges = 0
    pair_found = _pairs_by_key(table)
    n_ids = table.n_ids
    following = list(range(1, count + 1))  # following[at]: where the part after the one at ``at`` is (count: none)
    preceding = list(range(-1, count - 1))  # preceding[at]: where the part before it is (-1: none)

    def pair_at(at: int) -> tuple[int, int, int, int, int] | None:
        after = following[at] if at >= 0 else count
        found = pair_found.get(parts[at] * n_ids + parts[after]) if after < count else None
        return None if found is None else (found >> 32, at, parts[at], parts[after], found & 0xFFFFFFFF)

    heap = [entry for at in range(count - 1) if (entry := pair_at(at)) is not None]
    heapq.heapify(heap)
    while heap:
        _, at, left, right, merged = heapq.heappop(heap)
        after = following[at]
        if after >= count or parts[at] != left or parts[after] != right:
            continue  # this pair is gone: one of its parts has been joined to another since
        parts[at], parts[after] = merged, -1  # (-1: no part is there any more; no id is negative)
        following[at] = following[after]
        if following[at] < count:
            preceding[following[at]] = at
        for changed in (preceding[at], at):  # the pairs the joined part makes with its neighbours
            entry = pair_at(changed)
            if entry is not None:
                heapq.heappush(heap, entry)
        merges += 1
        if merges % TELL_EVERY_MERGES == 0:
            _ONE_AT_A_TIME.parts += merges - told
            kernel_merge_from = kernel_soon(merges - told) if kernel_soon is not None else None
            if kernel_merge_from is not None:
                return [part for part in parts if part >= 0], kernel_merge_from
            told = merges
    _ONE_AT_A_TIME.parts += count - told
    if kernel_soon is not None:
        kernel_soon(count - told)  # (the segment is done: a kernel that came just now serves the next one)
    return [part for part in parts if part >= 0], None


# The pairs of each pair table in a dict, ``key -> rank << 32 | merged id``, for _merge_one_at_a_time: made once
# per table (a pass over its slots), by the identity of its slot_keys array, dropped with that array.
_PAIR_DICTS: dict[int, dict[int, int]] = {}


def _pairs_by_key(table: PairTable) -> dict[int, int]:
    """The pairs of ``table`` by key (``left * n_ids + right``), each as ``rank << 32 | merged id``."""
    pairs = _PAIR_DICTS.get(id(table.slot_keys))
    if pairs is None:
        full = np.flatnonzero(table.slot_keys != _EMPTY)
        packed = (table.slot_ranks[full].astype(np.int64) << 32) | table.slot_merged[full]
        pairs = dict(zip(table.slot_keys[full].tolist(), packed.tolist()))
        _PAIR_DICTS[id(table.slot_keys)] = pairs
        weakref.finalize(table.slot_keys, _PAIR_DICTS.pop, id(table.slot_keys), None)
    return pairs
