"""Batch BPE: many pieces encoded together with NumPy array operations, exactly as :func:`tokenizer.bpe.merge`.

``bpe.merge`` works on one piece at a time in Python. A call that meets new text has tens of thousands of
distinct pieces, and the per-piece Python loop becomes the cost. Here all of them are laid end to end in one
array of part ids and every piece takes one or more merges per *round*, each round a handful of array
operations over all pieces at once.

The pair table. A merge joins two adjacent parts whose concatenated bytes are a token (tiktoken's rule admits
any such pair, not only the pairs training merged). :class:`PairTable` lists every ``(left id, right id)`` whose
bytes join into a mergeable token, with that token's merge priority and id, sorted by ``left, right`` so a
round looks up all its pairs with one ``searchsorted``. It is built with NumPy from substring hashes
(:func:`build_pair_table`), each candidate checked byte for byte, so a hash collision cannot create or hide a pair.

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

What this module does not do: the whole-piece rule (a piece that is itself a token is that token: the caller
decides, as :class:`tokenizer.encoding.Encoding` does), pre-tokenization, caching, or ids other than the
table's. A vocabulary whose parts cannot be named by distinct ids (two byte strings with one id, or a single
byte missing) has no table: :func:`build_pair_table` returns None and the caller keeps ``bpe.merge``.
"""

from __future__ import annotations

from operator import add, eq
from typing import Mapping, NamedTuple, Sequence

import numpy as np

# Polynomial hash of a byte string, modulo 2**64 (uint64 arithmetic wraps): sum of (byte + 1) * BASE**(n-1-i).
_BASE = np.uint64(0x100000001B3)
_BASE_INVERSE = np.uint64(pow(0x100000001B3, -1, 1 << 64))


# Ranks at or above this are renumbered (rank << 32 | position must fit an int64).
_LARGEST_RANK = 1 << 30


class PairTable(NamedTuple):
    """Everything a round needs, as arrays indexed by part id (a part is named by its token id)."""

    keys: np.ndarray  # int64, sorted: left * n_ids + right for every pair whose bytes join into a mergeable token
    ranks: np.ndarray  # int64: merge priority of that pair (renumbered 0, 1, ... if huge: same order and ties)
    merged: np.ndarray  # int64: id of the token the pair makes
    n_ids: int  # ids run from 0 to n_ids - 1
    no_merge: int  # a rank above every real one
    byte_ids: np.ndarray  # int64[256]: id of each single byte
    first_byte: np.ndarray  # int64[n_ids]: the first byte of each token (its last: last_byte)
    last_byte: np.ndarray
    boundary_rank: np.ndarray  # int64[65536]: u(a << 8 | b), lowest rank of a mergeable token containing a, b


def _mix(x: np.ndarray) -> np.ndarray:
    """A bijection of uint64 that spreads every input bit over the top bits (splitmix64's finalizer): the
    polynomial hash of a short string is small, and buckets are chosen by the top bits."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _substring_hasher(tokens: Sequence[bytes]):
    """(blob, starts, hash(start, end)) for the bytes of ``tokens`` laid end to end: ``hash`` gives the hash of
    ``blob[start:end]`` for arrays of starts and ends, independent of where the substring lies."""
    blob = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    starts = np.cumsum(lengths) - lengths
    with np.errstate(over="ignore"):
        power = np.cumprod(np.full(len(blob) + 1, _BASE, dtype=np.uint64))  # power[i] = BASE ** (i + 1)
        power[1:] = power[:-1]
        power[0] = 1
        inverse = np.cumprod(np.full(len(blob) + 1, _BASE_INVERSE, dtype=np.uint64))
        inverse[1:] = inverse[:-1]
        inverse[0] = 1
        # prefix[i] = sum over t < i of (blob[t] + 1) * BASE**-t
        prefix = np.zeros(len(blob) + 1, dtype=np.uint64)
        np.cumsum((blob.astype(np.uint64) + 1) * inverse[:-1], out=prefix[1:])

    def hash_of(start: np.ndarray, end: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return _mix((prefix[end] - prefix[start]) * power[np.maximum(end - 1, 0)])

    return blob, starts, lengths, hash_of


def _hash_index(hashes: np.ndarray):
    """A function from an array of hashes to the index in ``hashes`` of each (-1 where absent), or None if two
    entries of ``hashes`` are equal. Hashes are spread evenly, so their top bits pick a bucket of a few entries."""
    order = np.argsort(hashes)
    ordered = hashes[order]
    if len(ordered) > 1 and not np.all(ordered[1:] != ordered[:-1]):
        return None
    shift = np.uint64(64 - max(1, int(len(hashes)).bit_length()))
    bucket_start = np.searchsorted(ordered, np.arange((1 << (64 - int(shift))) + 1, dtype=np.uint64) << shift)
    bucket_start[-1] = len(ordered)

    def find(queries: np.ndarray) -> np.ndarray:
        bucket = (queries >> shift).astype(np.int64)
        at, stop = bucket_start[bucket], bucket_start[bucket + 1]
        result = np.full(len(queries), -1, dtype=np.int64)
        open_ = np.flatnonzero(at < stop)
        while len(open_):  # each pass looks at one more entry of every bucket still searched
            pos = at[open_]
            hit = ordered[pos] == queries[open_]
            result[open_[hit]] = order[pos[hit]]
            at[open_] += 1
            open_ = open_[~hit & (at[open_] < stop[open_])]
        return result

    return find


def build_pair_table(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> PairTable | None:
    """The :class:`PairTable` of an encoding (``merge_ranks``: token bytes -> merge priority; ``token_ids``:
    token bytes -> id), or None when its parts cannot be named by distinct ids."""
    singles = [token_ids.get(bytes([b])) for b in range(256)]
    if None in singles or not token_ids:
        return None
    vocab = list(token_ids)
    ids = np.fromiter(token_ids.values(), dtype=np.int64, count=len(vocab))
    if ids.min() < 0 or np.bincount(ids).max() > 1:
        return None
    n_ids = int(ids.max()) + 1
    v_blob, v_starts, v_lengths, v_hash = _substring_hasher(vocab)
    find = _hash_index(v_hash(v_starts, v_starts + v_lengths))
    if find is None:
        return None  # two tokens share a hash: lookups by hash would be ambiguous (never seen in practice)

    mergeable = [t for t in merge_ranks if len(t) > 1]
    m_ranks = np.fromiter(map(merge_ranks.__getitem__, mergeable), dtype=np.int64, count=len(mergeable))
    m_ids = np.fromiter(map(token_ids.__getitem__, mergeable), dtype=np.int64, count=len(mergeable))
    m_blob, m_starts, m_lengths, m_hash = _substring_hasher(mergeable)
    # One candidate per (token, inner position): the token's bytes cut there into a left and a right part.
    byte_owner = np.repeat(np.arange(len(mergeable)), m_lengths)
    cut = np.flatnonzero(np.arange(len(m_blob)) != m_starts[byte_owner])
    owner = byte_owner[cut]
    start, end = m_starts[owner], m_starts[owner] + m_lengths[owner]
    left = find(m_hash(start, cut))
    found = np.flatnonzero(left >= 0)
    owner, start, cut, end, left = owner[found], start[found], cut[found], end[found], left[found]
    right = find(m_hash(cut, end))
    found = np.flatnonzero(right >= 0)
    owner, left, right = owner[found], left[found], right[found]
    # A hash match is not proof: check that the two parts' bytes make the token's, byte for byte.
    left_bytes = map(vocab.__getitem__, left.tolist())
    right_bytes = map(vocab.__getitem__, right.tolist())
    token_bytes = map(mergeable.__getitem__, owner.tolist())
    same = np.fromiter(map(eq, map(add, left_bytes, right_bytes), token_bytes), dtype=bool, count=len(owner))
    owner, left, right = owner[same], ids[left[same]], ids[right[same]]

    if len(m_ranks) and (m_ranks.min() < 0 or m_ranks.max() >= _LARGEST_RANK):
        # a round packs a rank and a position into one int64: renumber 0, 1, ... keeping order and ties
        distinct_ranks, dense = np.unique(m_ranks, return_inverse=True)
        no_merge = len(distinct_ranks)
    else:
        dense, no_merge = m_ranks, int(m_ranks.max(initial=-1)) + 1
    dense = dense.reshape(-1)
    keys = left * n_ids + right
    by_key = np.argsort(keys)

    # u(a, b): every byte pair inside a mergeable token, with that token's rank; keep the lowest.
    inside = np.ones(len(m_blob), dtype=bool)
    inside[m_starts + m_lengths - 1] = False  # a token's last byte starts no pair inside it
    inside = np.flatnonzero(inside)
    byte_pairs = (m_blob[inside].astype(np.int64) << 8) | m_blob[inside + 1]
    pair_ranks = dense[byte_owner[inside]]
    boundary_rank = np.full(65536, no_merge, dtype=np.int64)
    np.minimum.at(boundary_rank, byte_pairs, pair_ranks)

    first_byte = np.zeros(n_ids, dtype=np.int64)
    last_byte = np.zeros(n_ids, dtype=np.int64)
    first_byte[ids] = v_blob[v_starts]
    last_byte[ids] = v_blob[v_starts + v_lengths - 1]
    return PairTable(
        keys=keys[by_key],
        ranks=dense[owner][by_key],
        merged=m_ids[owner][by_key],
        n_ids=n_ids,
        no_merge=no_merge,
        byte_ids=np.array(singles, dtype=np.int64),
        first_byte=first_byte,
        last_byte=last_byte,
        boundary_rank=boundary_rank,
    )


def _lookup(table: PairTable, left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rank, merged id) of each pair; rank ``no_merge`` where the pair makes no mergeable token."""
    keys = left * table.n_ids + right
    if not len(table.keys):
        return np.full(len(keys), table.no_merge, dtype=np.int64), keys
    at = np.minimum(np.searchsorted(table.keys, keys), len(table.keys) - 1)
    found = table.keys[at] == keys
    return np.where(found, table.ranks[at], table.no_merge), table.merged[at]


def encode_pieces(pieces: Sequence[bytes], table: PairTable) -> list[tuple[int, ...]]:
    """The token ids of each piece (bytes), as ``bpe.merge`` gives them (no whole-piece rule).

    >>> from tokenizer import get_encoding
    >>> enc = get_encoding("gpt2")
    >>> table = build_pair_table(enc.merge_ranks, enc.token_ids)
    >>> encode_pieces([b" hello", b"qqqq", b"x"], table)
    [(23748,), (38227, 38227), (87,)]
    """
    out: list[tuple[int, ...]] = [()] * len(pieces)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    piece_index = np.flatnonzero(lengths)  # empty pieces have no ids
    lengths = lengths[piece_index]
    blob = np.frombuffer(b"".join(pieces), dtype=np.uint8).astype(np.int64)
    no_merge = table.no_merge
    # Flat arrays, one entry per part: its id; whether it ends its piece; u of the boundary after it; the rank
    # and result of joining it with the next part (no_merge at a piece's end).
    parts = table.byte_ids[blob]
    ends = np.zeros(len(parts), dtype=bool)
    ends[np.cumsum(lengths) - 1] = True
    boundary = np.full(len(parts), no_merge, dtype=np.int64)
    if len(parts) > 1:
        boundary[:-1] = table.boundary_rank[(blob[:-1] << 8) | blob[1:]]
    boundary[ends] = no_merge
    rank = np.full(len(parts), no_merge, dtype=np.int64)
    merged = np.zeros(len(parts), dtype=np.int64)
    inner = np.flatnonzero(~ends)
    rank[inner], merged[inner] = _lookup(table, parts[inner], parts[inner + 1])
    done_index, done_lengths, done_parts = [], [], []

    while len(parts):
        starts = np.cumsum(lengths) - lengths
        position = np.arange(len(parts), dtype=np.int64)
        lowest = np.minimum.reduceat((rank << 32) | position, starts)  # leftmost lowest pair of each piece
        finished = (lowest >> 32) == no_merge
        if finished.any():
            done_index.append(piece_index[finished])
            done_lengths.append(lengths[finished])
            keep = ~np.repeat(finished, lengths)
            done_parts.append(parts[~keep])
            piece_index, lengths = piece_index[~finished], lengths[~finished]
            parts, ends, boundary, rank, merged = parts[keep], ends[keep], boundary[keep], rank[keep], merged[keep]
            if not len(parts):
                break
            position = np.arange(len(parts), dtype=np.int64)
            starts = np.cumsum(lengths) - lengths
            lowest = np.minimum.reduceat((rank << 32) | position, starts)
        # Isolated pairs: rank below u of the boundary before the left part and after the right part.
        before = np.empty_like(boundary)
        before[0] = no_merge
        before[1:] = boundary[:-1]
        after = np.empty_like(boundary)
        after[-1] = no_merge
        after[:-1] = boundary[1:]
        join = (rank < before) & (rank < after)
        join[lowest & 0xFFFFFFFF] = True
        at = np.flatnonzero(join)
        parts[at] = merged[at]
        # The right part of each join disappears; the joined part ends where it ended.
        keep = np.ones(len(parts), dtype=bool)
        keep[at + 1] = False
        keep_right_edge = ~join
        lengths = lengths - np.add.reduceat(join, starts)
        parts = parts[keep]
        ends, boundary = ends[keep_right_edge], boundary[keep_right_edge]
        rank, merged = rank[keep], merged[keep]
        # Pairs touching a joined part changed: the one it starts and the one before it.
        changed = np.zeros(len(join) + 1, dtype=bool)
        changed[at] = True
        changed[at - 1] = True  # at - 1 == -1 writes the spare last slot
        changed = np.flatnonzero(changed[:-1][keep] & ~ends)
        rank[changed], merged[changed] = _lookup(table, parts[changed], parts[changed + 1])
        rank[ends] = no_merge

    if done_index:
        index = np.concatenate(done_index).tolist()
        sizes = np.concatenate(done_lengths).tolist()
        flat = np.concatenate(done_parts).tolist()
        start = 0
        for i, size in zip(index, sizes):
            out[i] = tuple(flat[start : start + size])
            start += size
    return out
