"""Byte-pair encoding: the one algorithm every encoding in this package is built on.

A pre-token (one piece of text such as ``" hello"``) is first written as its UTF-8 bytes, one part per byte:

    b" hello" -> [b" ", b"h", b"e", b"l", b"l", b"o"]

Training learned an ordered list of merges; ``merge_ranks`` maps the bytes a merge produces to its position
in that list (lower = learned earlier = applied first). Encoding repeats one step: among all adjacent pairs
of parts, find the pair whose concatenation has the lowest rank and join it. When no adjacent pair is in
``merge_ranks`` the parts are final tokens:

    [b" ", b"h", b"e", b"l", b"l", b"o"] -> [b" h", b"e", b"l", b"l", b"o"] -> ... -> [b" hello"]

When two pairs have the same rank (the same merge at two places) the leftmost goes first. This is
tiktoken's formulation; for GPT-2's files it gives exactly the ids of OpenAI's ``encoder.py``, which ranks
pairs instead (``vocab.bpe`` line numbers), because each GPT-2 token is produced by one merge.

``merge_reference`` is that loop, written to be read. ``merge`` is the same function made fast:
it remembers the rank of every adjacent pair and only re-ranks the two neighbours of each merge, and for long
pieces (a million ``a``) it switches to a heap so the work is O(n log n) instead of O(n²). Tests check all
three paths give identical output.
"""

from __future__ import annotations

import heapq
from itertools import compress, count, repeat
from operator import lshift, or_
from typing import Mapping

# A rank larger than any real one: "this pair cannot be merged".
_NO_MERGE = float("inf")

_SINGLE_BYTES = [bytes([b]) for b in range(256)]

# Above this many bytes the heap version wins over rescanning the pair list (measured in bench/).
HEAP_THRESHOLD = 256


def merge_reference(piece: bytes, merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """Split ``piece`` into tokens by applying merges lowest rank first (the readable version).

    >>> merge_reference(b"aaab", {b"aa": 0, b"ab": 1, b"aab": 2})  # aa|a|b -> then a+b: nothing ranks aa+ab
    [b'aa', b'ab']
    """
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        ranks = [merge_ranks.get(parts[i] + parts[i + 1], _NO_MERGE) for i in range(len(parts) - 1)]
        best = min(ranks)
        if best == _NO_MERGE:
            break
        i = ranks.index(best)  # index() finds the leftmost pair of that rank
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def merge(piece: bytes, merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """Same result as :func:`merge_reference`, faster: pair ranks are kept and updated locally.

    >>> merge(b"hello", {b"he": 0, b"ll": 1, b"llo": 2, b"hello": 3})
    [b'hello']
    """
    if len(piece) > HEAP_THRESHOLD:
        return merge_heap(piece, merge_ranks)
    get = merge_ranks.get
    parts = list(map(_SINGLE_BYTES.__getitem__, piece))
    # ranks[i] is the rank of joining parts[i] and parts[i+1]
    ranks = list(map(get, map(bytes.__add__, parts, parts[1:]), repeat(_NO_MERGE)))
    while ranks:
        best = min(ranks)  # min() and index() run in C: cheaper than a Python loop over pairs
        if best == _NO_MERGE:
            break
        i = ranks.index(best)
        parts[i] += parts[i + 1]
        del parts[i + 1]
        del ranks[i]
        # Only the pairs touching the new part changed.
        if i < len(ranks):
            ranks[i] = get(parts[i] + parts[i + 1], _NO_MERGE)
        if i > 0:
            ranks[i - 1] = get(parts[i - 1] + parts[i], _NO_MERGE)
    return parts


def merge_heap(piece: bytes, merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """Same result as :func:`merge_reference` in O(n log n): for very long pieces.

    Parts form a doubly linked list over byte offsets (``nxt``/``prv``); the heap holds candidate pairs as
    ``(rank, start)``. Ordering by start makes equal ranks merge leftmost first, as in the reference. A heap
    entry goes stale when either of its parts has since been merged into something else; it is recognised on
    pop by re-checking that the pair still exists with the same bytes, and skipped.
    """
    n = len(piece)
    if n < 2:
        return [piece] if piece else []
    get = merge_ranks.get
    nxt = list(range(1, n + 1))  # nxt[s]: start of the part after the one starting at s (n = end)
    prv = list(range(-1, n - 1))  # prv[s]: start of the part before (-1 = none)
    alive = [True] * n  # alive[s]: a part currently starts at s
    heap = []
    for s in range(n - 1):
        r = get(piece[s : s + 2])
        if r is not None:
            heap.append((r, s, s + 2))
    heapq.heapify(heap)

    def push_pair(s: int) -> None:
        t = nxt[s]
        if s >= 0 and t < n:
            end = nxt[t]
            r = get(piece[s:end])
            if r is not None:
                heapq.heappush(heap, (r, s, end))

    while heap:
        r, s, end = heapq.heappop(heap)
        t = nxt[s] if alive[s] else n
        if t >= n or nxt[t] != end:
            continue  # stale: the left or right part has changed since this entry was pushed
        # join the part at s with the part at t
        alive[t] = False
        nxt[s] = end
        if end < n:
            prv[end] = s
        push_pair(prv[s])
        push_pair(s)

    parts = []
    s = 0
    while s < n:
        parts.append(piece[s : nxt[s]])
        s = nxt[s]
    return parts


def uncrossable_pairs(merge_ranks: Mapping[bytes, int]) -> bytearray:
    """A 65536-entry table: ``table[a << 8 | b]`` is 1 when no mergeable token contains the bytes ``a, b``
    next to each other.

    Where a piece has such a pair, no merge can ever join across it (every merge makes a token, and the token
    would contain that pair), so BPE of the piece is BPE of the two sides, concatenated: see
    :func:`split_uncrossable`. Byte-level vocabularies with few tokens for a script (GPT-2 and Chinese) have many
    such pairs, which turns one long, unique piece into short, cacheable ones.
    """
    import numpy as np  # only here: building the table for a 200k vocabulary in pure Python takes ~0.4 s

    tokens = [t for t in merge_ranks if len(t) > 1]
    blob = np.frombuffer(b"".join(tokens), dtype=np.uint8).astype(np.int32)
    pairs = (blob[:-1] << 8) | blob[1:]
    ends = np.cumsum([len(t) for t in tokens])[:-1] - 1  # a pair starting at a token's last byte spans two
    inside = np.ones(len(pairs), dtype=bool)
    inside[ends] = False
    table = np.ones(65536, dtype=np.uint8)
    table[pairs[inside]] = 0
    return bytearray(table.tobytes())


def split_uncrossable(piece: bytes, table: bytearray) -> list[bytes]:
    """Cut ``piece`` between every two bytes that no token contains together (``table`` from
    :func:`uncrossable_pairs`): ``merge(piece)`` is the concatenation of ``merge`` of each part."""
    # flags[i] = 1 when piece[i], piece[i+1] never meet in a token; the maps run in C
    flags = bytes(map(table.__getitem__, map(or_, map(lshift, piece, repeat(8)), piece[1:])))
    if 1 not in flags:
        return [piece]
    cuts = list(compress(count(1), flags))
    return list(map(piece.__getitem__, map(slice, [0, *cuts], [*cuts, len(piece)])))
