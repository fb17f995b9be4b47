"""Sequential BPE compiled with numba: the same ids as :func:`tokenizer.bpe.merge`, without Python's cost per merge.

Each piece starts as its single bytes; while two neighbouring parts join into a mergeable token, the pair of
lowest rank (the leftmost among equals) is joined; each part is then a token. That is ``bpe.merge``'s rule, run
here on token ids instead of byte strings: whether two parts join, with what rank and into which id, is read
from batch BPE's pair table (:class:`tokenizer.fast.batch_bpe.PairTable`: every pair of ids whose bytes join
into a mergeable token, in a hash table laid out in arrays; the pairs of two single bytes in direct tables).

A piece that is itself a token is that token, without BPE (tiktoken's whole-piece rule; the caller says
whether it holds): the piece is looked up in the vocabulary's token table
(:class:`tokenizer.fast.piece_arrays.PieceTable`), by the same key that table's own look-ups compute
(:func:`tokenizer.fast.piece_arrays.piece_keys`: a hash of the piece's first and last eight bytes, its length,
and above 16 bytes all its words), and the bytes of the entry found are compared, so a collision cannot give a
wrong id.

A piece that needs BPE is first cut where no token holds the two bytes on either side (the table's
``boundary_rank`` says so): no merge can cross such a cut, so each segment is merged on its own. A segment keeps
its parts in a small array and looks for the lowest pair by scanning it; a segment is short (an English word, a
few characters of another script), so the scan costs less than keeping a heap would. A long one (a million ``a``
for GPT-2, text without spaces for a vocabulary trained on such text) keeps its candidate pairs in a heap instead
(``HEAP_MIN_PARTS``): a scan per merge would cost the square of its length (200,000 ``a`` took 38 s).

:class:`CompiledBPE` holds the arguments for one vocabulary and calls the kernel on a list of byte strings (or,
for the array path, on pieces laid end to end), or carries on merging a segment batch BPE has partly merged
(:meth:`CompiledBPE.merge_from`).

Only :mod:`tokenizer.fast.compiled_bpe` imports this module, and only when numba is installed (the ``train``
extra); the machine code is cached on disk (:func:`tokenizer.numba_cache.folder`): compiled once per machine by
that module's compile program (several seconds), loaded by later processes (under a second).

What it does not do: pre-tokenization, caching, or building the tables.
"""

from __future__ import annotations

from itertools import accumulate, chain
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .. import numba_cache

if TYPE_CHECKING:
    from .batch_bpe import PairTable
    from .piece_arrays import PieceTable

# An empty slot of the pair table and of the token table (batch_bpe._EMPTY, piece_arrays.EMPTY), the
# multiplier of their home slots, and the constants of piece_arrays' hashes (mix64, _BASE).
_EMPTY = -1
_SLOT_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_BASE = np.uint64(0x100000001B3)

# A segment of this many bytes or more is merged with a heap of its pairs (_merge_with_heap), a shorter one by
# scanning its pairs for the lowest at each merge.
HEAP_MIN_PARTS = 256

CACHE_FOLDER = numba_cache.folder("bpe_kernel")
_uncached: list[str] = []  # the functions numba found no writable cache folder for


def _compiled(function):
    return numba_cache.compiled(function, CACHE_FOLDER, _uncached)


@_compiled
def _pair(left, right, slot_keys, slot_ranks, slot_merged, shift, n_ids, no_merge):
    """``(rank, merged id)`` of joining the parts ``left`` and ``right``; ``(no_merge, 0)`` if they make no token."""
    key = np.int64(left) * n_ids + right
    slot = np.int64((np.uint64(key) * _SLOT_MULTIPLIER) >> np.uint64(shift))
    while True:  # linear probing: the key is in its home slot or after it, before the next empty slot
        found = slot_keys[slot]
        if found == key:
            return slot_ranks[slot], slot_merged[slot]
        if found == _EMPTY:
            return no_merge, 0
        slot += 1


@_compiled
def _heap_push(heap, size, key):
    """Put ``key`` into the binary min-heap ``heap[:size]``; returns the heap's new size."""
    at = size
    while at > 0:
        parent = (at - 1) >> 1
        if heap[parent] <= key:
            break
        heap[at] = heap[parent]
        at = parent
    heap[at] = key
    return size + 1


@_compiled
def _heap_pop(heap, size):
    """Take the smallest key out of the binary min-heap ``heap[:size]`` (size > 0): ``(key, new size)``."""
    top = heap[0]
    size -= 1
    last = heap[size]
    at = 0
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= last:
            break
        heap[at] = heap[child]
        at = child
    heap[at] = last
    return top, size


@_compiled
def _merge_with_heap(parts, ranks, merged, n, slot_keys, slot_ranks, slot_merged, shift, n_ids, no_merge):
    """The merges of a long segment (``parts[:n]``, ``ranks`` and ``merged`` of its pairs as merge_pieces keeps
    them), the lowest pair found in a heap of ``rank << 32 | position`` keys instead of by a scan: the leftmost of
    equal ranks comes first, as the scan's. A key whose pair has changed since it was pushed (its left part gone,
    or its rank another now) is skipped. The parts are left in ``parts[:count]``; returns count."""
    following = np.empty(n, np.int64)  # following[at]: where the part after the one at ``at`` is (n: none)
    preceding = np.empty(n, np.int64)  # preceding[at]: where the part before it is (-1: none)
    alive = np.ones(n, np.bool_)
    heap = np.empty(3 * n, np.int64)  # room for the first pairs and two more per merge
    size = 0
    for at in range(n):
        following[at] = at + 1
        preceding[at] = at - 1
        if at + 1 < n and ranks[at] != no_merge:
            size = _heap_push(heap, size, (np.int64(ranks[at]) << 32) | at)
    while size > 0:
        key, size = _heap_pop(heap, size)
        rank, at = key >> 32, key & 0xFFFFFFFF
        if not alive[at] or following[at] >= n or ranks[at] != rank:
            continue  # stale: the pair at ``at`` is gone or has another rank now
        after = following[at]
        parts[at] = merged[at]
        alive[after] = False
        following[at] = following[after]
        if following[at] < n:
            preceding[following[at]] = at
            ranks[at], merged[at] = _pair(parts[at], parts[following[at]], slot_keys, slot_ranks, slot_merged,
                                          shift, n_ids, no_merge)
            if ranks[at] != no_merge:
                size = _heap_push(heap, size, (np.int64(ranks[at]) << 32) | at)
        else:
            ranks[at] = no_merge
        before = preceding[at]
        if before >= 0:
            ranks[before], merged[before] = _pair(parts[before], parts[at], slot_keys, slot_ranks, slot_merged,
                                                  shift, n_ids, no_merge)
            if ranks[before] != no_merge:
                size = _heap_push(heap, size, (np.int64(ranks[before]) << 32) | before)
    count = 0
    at = 0
    while at < n:
        parts[count] = parts[at]
        count += 1
        at = following[at]
    return count


@_compiled
def merge_from_parts(parts, slot_keys, slot_ranks, slot_merged, slot_bits, n_ids, no_merge):
    """BPE carried on from ``parts`` (the ids of one segment, some of them merged already), in place, as
    :func:`tokenizer.bpe.merge_from` carries on from bytes: the pairs the parts make are looked up, then merged
    by _merge_with_heap, the loop that merges a long segment from its bytes. For batch BPE, whose rounds (or
    merges one at a time in Python) hand over a long segment part way. Returns how many parts are left, in
    ``parts[:count]``."""
    n = len(parts)
    shift = 64 - slot_bits
    ranks = np.full(n, no_merge, np.int32)  # ranks[i]: rank of joining parts i and i + 1 (no_merge: none)
    merged = np.zeros(n, np.int32)
    for at in range(n - 1):
        ranks[at], merged[at] = _pair(parts[at], parts[at + 1], slot_keys, slot_ranks, slot_merged, shift, n_ids,
                                      no_merge)
    return _merge_with_heap(parts, ranks, merged, n, slot_keys, slot_ranks, slot_merged, shift, n_ids, no_merge)


@_compiled
def _mix64(x):
    """piece_arrays.mix64 of one uint64."""
    x = (x ^ (x >> np.uint64(30))) * _MIX_1
    x = (x ^ (x >> np.uint64(27))) * _MIX_2
    return x ^ (x >> np.uint64(31))


@_compiled
def _word(blob, start, count):
    """The ``count`` (1 to 8) bytes of ``blob`` from ``start`` as a little-endian uint64 (higher bytes zero)."""
    word = np.uint64(0)
    for i in range(count):
        word |= np.uint64(blob[start + i]) << np.uint64(8 * i)
    return word


@_compiled
def _token_id(blob, start, length, token_blob, token_starts, token_lengths, token_values, token_slot_key,
              token_slot_entry, token_slot_bits):
    """The id of the token ``blob[start:start + length]`` is (length > 0), or -1 if it is none: a look-up in the
    token table, by its key (piece_arrays.piece_keys), the entry's bytes compared."""
    short = min(length, 8)
    first = _word(blob, start, short)
    last = _word(blob, start + length - short, short)
    if length < 8:
        key = _mix64(first | (np.uint64(length) << np.uint64(56)))
    else:
        key = _mix64(_mix64(_mix64(first) + last) + np.uint64(length))
    if length > 16:  # every word but the last, times BASE ** 1, 2, ...
        words = np.uint64(0)
        power = np.uint64(1)
        for i in range((length - 1) // 8):
            power *= _BASE
            words += _word(blob, start + 8 * i, 8) * power
        key += _mix64(words)
    slot = np.int64((key * _SLOT_MULTIPLIER) >> np.uint64(64 - token_slot_bits))
    while True:
        entry = token_slot_entry[slot]
        if entry == _EMPTY:
            return -1
        if token_slot_key[slot] == key:
            break
        slot += 1
    if token_lengths[entry] != length:
        return -1
    other = token_starts[entry]
    for i in range(length):
        if token_blob[other + i] != blob[start + i]:
            return -1
    return token_values[entry]


@_compiled
def merge_pieces(blob, ends, whole_piece_tokens, token_blob, token_starts, token_lengths, token_values,
                 token_slot_key, token_slot_entry, token_slot_bits, slot_keys, slot_ranks, slot_merged, slot_bits,
                 n_ids, no_merge, byte_ids, byte_pair_ranks, byte_pair_merged, boundary_rank, out_ids, out_ends):
    """The ids of the pieces laid end to end in ``blob`` (uint8), piece ``i`` ending at ``ends[i]``, written one
    piece after another into ``out_ids`` (room for ``len(blob)``), piece ``i``'s ending at ``out_ends[i]``.
    With ``whole_piece_tokens`` a piece that is a token is that token; the ``token_`` arguments are the token
    table's arrays (piece_arrays.PieceTable), the others from ``slot_keys`` on the pair table's fields.
    Returns how many ids were written."""
    shift = 64 - slot_bits
    parts = np.empty(len(blob), np.int32)  # the parts of the segment being merged
    ranks = np.empty(len(blob), np.int32)  # ranks[i]: rank of joining parts i and i + 1 (no_merge: none)
    merged = np.empty(len(blob), np.int32)  # merged[i]: the id that join makes
    written = 0
    start = 0
    for piece in range(len(ends)):
        end = ends[piece]
        if whole_piece_tokens and end > start:
            token = _token_id(blob, start, end - start, token_blob, token_starts, token_lengths, token_values,
                              token_slot_key, token_slot_entry, token_slot_bits)
            if token >= 0:
                out_ids[written] = token
                written += 1
                out_ends[piece] = written
                start = end
                continue
        while start < end:
            # The segment: up to the first boundary no token crosses, or the piece's end.
            n = 1
            parts[0] = byte_ids[blob[start]]
            while start + n < end:
                pair_of_bytes = (np.int32(blob[start + n - 1]) << 8) | blob[start + n]
                if boundary_rank[pair_of_bytes] == no_merge:
                    break
                parts[n] = byte_ids[blob[start + n]]
                ranks[n - 1] = byte_pair_ranks[pair_of_bytes]
                merged[n - 1] = byte_pair_merged[pair_of_bytes]
                n += 1
            start += n
            if n >= HEAP_MIN_PARTS:
                n = _merge_with_heap(parts, ranks, merged, n, slot_keys, slot_ranks, slot_merged, shift, n_ids,
                                     no_merge)
            else:
                while n > 1:
                    lowest, at = no_merge, -1
                    for i in range(n - 1):
                        if ranks[i] < lowest:  # strictly lower: the leftmost of equal ranks stays
                            lowest, at = ranks[i], i
                    if at < 0:
                        break
                    parts[at] = merged[at]
                    n -= 1
                    for i in range(at + 1, n):  # the right part of the pair goes
                        parts[i] = parts[i + 1]
                        ranks[i] = ranks[i + 1]
                        merged[i] = merged[i + 1]
                    if at + 1 < n:
                        ranks[at], merged[at] = _pair(parts[at], parts[at + 1], slot_keys, slot_ranks, slot_merged,
                                                      shift, n_ids, no_merge)
                    if at > 0:
                        ranks[at - 1], merged[at - 1] = _pair(parts[at - 1], parts[at], slot_keys, slot_ranks,
                                                              slot_merged, shift, n_ids, no_merge)
            out_ids[written : written + n] = parts[:n]
            written += n
        out_ends[piece] = written
    return written


class CompiledBPE:
    """The kernel with one vocabulary's tables: ``encode`` gives each piece's ids. With ``whole_piece_tokens``
    (tiktoken's rule) a piece that is a token is that token, else ``bpe.merge``'s ids."""

    def __init__(self, pairs: PairTable, tokens: PieceTable, *, whole_piece_tokens: bool):
        token = tokens.arrays
        token_starts = np.cumsum(token["lengths"]) - token["lengths"]
        # Numba compiles the kernel once for each set of argument types, read-only arrays being a type of their
        # own: every table is passed read-only (as a table read from disk is), so that the kernel warmed up on
        # a small table (_warm_up) is the one every later call runs, never compiled again mid-encode.
        arrays = [(token["blob"], np.uint8), (token_starts, np.int64), (token["lengths"], np.int64),
                  (token["values"], np.int64), (token["slot_key"], np.uint64), (token["slot_entry"], np.int64)]
        pair_arrays = [(pairs.slot_keys, np.int64), (pairs.slot_ranks, np.int32), (pairs.slot_merged, np.int32)]
        byte_arrays = [(pairs.byte_ids, np.int32), (pairs.byte_pair_ranks, np.int32),
                       (pairs.byte_pair_merged, np.int32), (pairs.boundary_rank, np.int32)]
        self._pair_tables = (*map(_read_only, pair_arrays), int(pairs.slot_bits), int(pairs.n_ids),
                             int(pairs.no_merge))
        self._tables = (bool(whole_piece_tokens), *map(_read_only, arrays), int(token["slot_bits"]),
                        *self._pair_tables, *map(_read_only, byte_arrays))

    def encode(self, pieces: Sequence[bytes]) -> list[tuple[int, ...]]:
        """The token ids of each piece (bytes)."""
        blob = np.frombuffer(b"".join(pieces), dtype=np.uint8)
        ends = np.fromiter(accumulate(map(len, pieces)), dtype=np.int64, count=len(pieces))
        ids = np.empty(len(blob), dtype=np.int32)
        id_ends = np.empty(len(pieces), dtype=np.int64)
        written = merge_pieces(blob, ends, *self._tables, ids, id_ends)
        flat = tuple(ids[:written].tolist())  # (a slice of a tuple is a tuple)
        id_ends = id_ends.tolist()
        return list(map(flat.__getitem__, map(slice, chain((0,), id_ends), id_ends)))

    def encode_blob(self, blob: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, sizes)``: plain BPE (no whole-piece rule) of the pieces laid end to end in ``blob`` (uint8)
        with these lengths, as :func:`tokenizer.fast.batch_bpe.encode_blob` gives it: for the array path, whose
        segments are parts of pieces."""
        ends = np.cumsum(lengths, dtype=np.int64)
        ids = np.empty(len(blob), dtype=np.int32)
        id_ends = np.empty(len(lengths), dtype=np.int64)
        blob = np.ascontiguousarray(blob, dtype=np.uint8).view()
        blob.flags.writeable = False  # (the one type the kernel is compiled for)
        written = merge_pieces(blob, ends, False, *self._tables[1:], ids, id_ends)
        return ids[:written], np.diff(id_ends, prepend=0)

    def merge_from(self, parts: np.ndarray) -> np.ndarray:
        """The ids BPE gives a segment whose parts are ``parts`` (ids, some merged already), as
        :func:`tokenizer.bpe.merge_from` gives bytes: for batch BPE's segments handed over part way merged."""
        parts = np.array(parts, dtype=np.int32)  # (a copy, writable: the kernel merges in place)
        return parts[: merge_from_parts(parts, *self._pair_tables)]


def _read_only(array_and_type: tuple[np.ndarray, type]) -> np.ndarray:
    """The array as a C-contiguous array of that type, read-only (a view: the table's own flags are kept)."""
    array, dtype = array_and_type
    view = np.ascontiguousarray(array, dtype=dtype).view()
    view.flags.writeable = False
    return view


# Whether every function's machine code is cached on disk (else each process compiles what it calls).
CACHED_ON_DISK = not _uncached
