"""Byte-pair encoding: the one algorithm every encoding in this package is built on.

A pre-token (one piece of text such as ``" hello"``) is first written as its UTF-8 bytes, one part per byte:

    b" hello" -> [b" ", b"h", b"e", b"l", b"l", b"o"]

Training learned an ordered list of merges; ``merge_ranks`` maps the bytes a merge produces to its rank, a
number that only orders the merges (lower = learned earlier = applied first). Two tables of this shape exist:

* tiktoken's (every OpenAI encoding, ``Encoding.merge_ranks`` of gpt2): the rank is the token's id, and the
  table also holds the 256 single bytes (ranks no pair of parts can join into). ``b" c"`` -> 269: the token id,
  not the merge's place in ``vocab.bpe`` (13).
* a merge list's (``Encoding.from_vocab_merges``, a trained tokenizer): the rank is the merge's 0-based place
  in the list, and single bytes are not in it. ``b" t"`` -> 0 while its id is 256.

Either works here, as only the order matters. Encoding repeats one step: among all adjacent pairs of parts,
find the pair whose concatenation has the lowest rank and join it. When no adjacent pair joins into a key of
``merge_ranks`` the parts are final tokens:

    [b" ", b"h", b"e", b"l", b"l", b"o"] -> [b" h", b"e", b"l", b"l", b"o"] -> ... -> [b" hello"]

When two pairs have the same rank (the same merge at two places) the leftmost goes first. This is
tiktoken's formulation; for GPT-2's files it gives exactly the ids of OpenAI's ``encoder.py``, which ranks
pairs instead (``bpe_ranks``: each merge's place in ``vocab.bpe`` from 0, the header line not counted), because
each GPT-2 token is produced by one
merge (docs/04-three-spellings-of-bpe.md sets the spellings side by side).

``merge_reference`` is that loop, written to be read. Tools that replay BPE use it through two hooks instead of
re-typing it: a rank limit (``recover_merges`` rebuilds a ``.tiktoken`` file's merges with it) and a callback
per merge (``python -m tokenizer explain`` shows the steps with it). ``merge`` is the same function made fast:
it remembers the rank of every adjacent pair and only re-ranks the two neighbours of each merge, and for long
pieces (a million ``a``) it switches to a heap so the work is O(n log n) instead of O(n²). ``merge_from`` is
that loop carried on from parts a caller has already merged (characters whose merges are known to come first).
Tests check they all give identical output; the fast core (:mod:`tokenizer.fast`) merges many pieces at once
and is tested equal to ``merge_reference`` too.

This module knows nothing of text, patterns or ids: it turns one piece of bytes into token bytes.
:mod:`tokenizer.pretokenize` cuts text into pieces; :mod:`tokenizer.encoding` maps tokens to ids.
"""

from __future__ import annotations

import heapq
from itertools import repeat
from typing import Callable, Mapping, Sequence

# A rank larger than any real one: "this pair cannot be merged".
_NO_MERGE = float("inf")

_SINGLE_BYTES = [bytes([b]) for b in range(256)]

# Above this many bytes merge() uses the heap. Rescanning the pair list costs O(n) per merge but runs in C
# (min, index); the heap costs O(log n) per merge in Python. Short pieces (nearly all of them) favour the
# rescan, long ones the heap; `python bench/bench_encode.py` prints both paths' times by piece length.
HEAP_THRESHOLD = 256
# A piece with bytes beyond ASCII (Chinese, Japanese, Cyrillic) makes more merges per byte, and the heap is
# faster from this many bytes on (measured on the corpora's pieces that are not tokens: 1.2-2.2x at 32-128).
HEAP_THRESHOLD_NON_ASCII = 32


def merge_reference(
    piece: bytes,
    merge_ranks: Mapping[bytes, int],
    *,
    max_rank: int | None = None,
    on_merge: Callable[[int, bytes, bytes, tuple[bytes, ...]], None] | None = None,
) -> list[bytes]:
    """Split ``piece`` into tokens by applying merges lowest rank first (the readable version).

    >>> merge_reference(b"aaab", {b"aa": 0, b"ab": 1, b"aab": 2})  # aa|a|b -> then a+b: nothing ranks aa+ab
    [b'aa', b'ab']

    Two hooks, for the tools that replay BPE rather than use it:

    * ``max_rank``: apply only merges of rank below it, as if training had stopped there. The parts a token
      of rank ``r`` falls into with ``max_rank=r`` are the merge that made it (how merges are recovered from
      a ``.tiktoken`` file, which stores only ranks: :func:`recover_merges`).
    * ``on_merge``: called after each merge as ``on_merge(rank, left, right, parts)``, ``parts`` being all
      the parts after that merge (how ``python -m tokenizer explain`` shows BPE step by step).

    >>> merge_reference(b"aab", {b"aa": 0, b"ab": 1, b"aab": 2}, max_rank=2)
    [b'aa', b'b']
    >>> _ = merge_reference(b"aab", {b"aa": 0, b"aab": 2}, on_merge=lambda *step: print(*step))
    0 b'a' b'a' (b'aa', b'b')
    2 b'aa' b'b' (b'aab',)
    """
    piece = _piece_bytes("merge_reference", piece)
    if not hasattr(merge_ranks, "get"):  # an Encoding itself, say: its table is enc.merge_ranks
        raise TypeError(f"merge_ranks maps token bytes to ranks (an encoding's .merge_ranks), got a "
                        f"{type(merge_ranks).__name__}")
    limit = _NO_MERGE if max_rank is None else max_rank
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        ranks = [merge_ranks.get(parts[i] + parts[i + 1], _NO_MERGE) for i in range(len(parts) - 1)]
        best = min(ranks)
        if best >= limit:  # nothing can be merged (or nothing below max_rank)
            break
        i = ranks.index(best)  # index() finds the leftmost pair of that rank
        left, right = parts[i], parts[i + 1]
        parts[i : i + 2] = [left + right]
        if on_merge is not None:
            on_merge(best, left, right, tuple(parts))
    return parts


def _piece_bytes(function: str, piece) -> bytes:
    """``piece`` as bytes, converted once: a bytearray's or memoryview's slices are no keys of merge_ranks (a
    bytearray is unhashable). A str is refused: no str equals a bytes key, so nothing would merge and nothing
    would say why."""
    if isinstance(piece, bytes):
        return piece
    if isinstance(piece, str):
        raise TypeError(f"{function} takes a piece's bytes, not str: pass {piece[:20]!r}.encode('utf-8') (or "
                        "b'...'), as merge_ranks maps bytes to ranks")
    if isinstance(piece, (bytearray, memoryview)):
        return bytes(piece)
    raise TypeError(f"{function} takes a piece's bytes (b'...', or a bytearray), got {type(piece).__name__}")


def recover_merges(merge_ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges, in priority order, that ``merge_ranks`` was made from (tiktoken files store only ranks).

    Each token of rank ``r`` is what BPE makes of its own bytes with the merges below ``r``, joined once more:
    those two parts are its merge. A table where that is not one merge of two parts cannot come from training.

    >>> recover_merges({b"a": 0, b"b": 1, b"ab": 2, b"aab": 3})
    [(b'a', b'b'), (b'a', b'ab')]
    """
    merges = []
    for token, rank in sorted(((t, r) for t, r in merge_ranks.items() if len(t) > 1), key=lambda tr: tr[1]):
        parts = merge_reference(token, merge_ranks, max_rank=rank)
        if len(parts) != 2:
            raise ValueError(f"token {token!r} (merge rank {rank}) is not one merge of two tokens of lower rank")
        merges.append((parts[0], parts[1]))
    return merges


def merge(piece: bytes, merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """Same result as :func:`merge_reference`, faster: pair ranks are kept and updated locally.

    >>> merge(b"hello", {b"he": 0, b"ll": 1, b"llo": 2, b"hello": 3})
    [b'hello']
    """
    if type(piece) is not bytes:  # once per piece, never per merge: the loops below stay as they were
        piece = _piece_bytes("merge", piece)
    if len(piece) > HEAP_THRESHOLD or (len(piece) > HEAP_THRESHOLD_NON_ASCII and not piece.isascii()):
        return merge_heap(piece, merge_ranks)
    return _merge_parts(list(map(_SINGLE_BYTES.__getitem__, piece)), merge_ranks)


def merge_from(parts: list[bytes], merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """BPE carried on from ``parts`` (a piece already cut into parts, some of them merged): the loop of
    :func:`merge` starting where a caller that knows some merges are safe to do first has left off
    (:mod:`tokenizer.fast.characters_first`). ``merge(piece)`` is ``merge_from`` of the piece's single bytes.

    >>> merge_from([b"he", b"l", b"l", b"o"], {b"he": 0, b"ll": 1, b"llo": 2, b"hello": 3})
    [b'hello']
    """
    # A str part never equals a bytes key (a lone one came back unmerged, several failed deep inside): refused.
    if isinstance(parts, (str, bytes)) or not all(map(isinstance, parts, repeat(bytes))):
        wrong = parts  # (the whole piece given for its parts), else the first part that is not bytes:
        if not isinstance(parts, (str, bytes)):
            wrong = next(part for part in parts if not isinstance(part, bytes))
        hint = ": str.encode('utf-8') gives its bytes" if isinstance(wrong, str) else ""
        raise TypeError(f"merge_from takes a list of bytes parts such as [b'he', b'llo'], got "
                        f"{type(wrong).__name__} {wrong!r:.40}{hint}")
    if len(parts) > HEAP_THRESHOLD_NON_ASCII:
        starts = [0]
        for part in parts[:-1]:
            starts.append(starts[-1] + len(part))
        return merge_heap(b"".join(parts), merge_ranks, part_starts=starts)
    return _merge_parts(list(parts), merge_ranks)


def _merge_parts(parts: list[bytes], merge_ranks: Mapping[bytes, int]) -> list[bytes]:
    """The rescanning loop of :func:`merge` on ``parts`` (a list it may change)."""
    get = merge_ranks.get
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


def merge_heap(
    piece: bytes, merge_ranks: Mapping[bytes, int], *, part_starts: Sequence[int] | None = None
) -> list[bytes]:
    """Same result as :func:`merge_reference` in O(n log n): for very long pieces.

    Parts form a doubly linked list over byte offsets (``nxt``/``prv``); the heap holds candidate pairs as
    ``(rank, start)``. Ordering by start makes equal ranks merge leftmost first, as in the reference. A heap
    entry goes stale when either of its parts has since been merged into something else; it is recognised on
    pop by re-checking that the pair still exists with the same bytes, and skipped. ``part_starts`` (0 first,
    increasing) starts from those parts instead of single bytes, as :func:`merge_from`.
    """
    piece = _piece_bytes("merge_heap", piece)
    n = len(piece)
    if n < 2:
        return [piece] if piece else []
    get = merge_ranks.get
    if part_starts is None:
        nxt = list(range(1, n + 1))  # nxt[s]: start of the part after the one starting at s (n = end)
        prv = list(range(-1, n - 1))  # prv[s]: start of the part before (-1 = none)
        alive = [True] * n  # alive[s]: a part currently starts at s
        heap = []
        for s in range(n - 1):
            r = get(piece[s : s + 2])
            if r is not None:
                heap.append((r, s, s + 2))
    else:
        nxt, prv, alive = [n] * n, [-1] * n, [False] * n
        ends = [*part_starts[1:], n]
        for before, s, end in zip([-1, *part_starts], part_starts, ends):
            nxt[s], prv[s], alive[s] = end, before, True
        pairs = ((s, nxt[t]) for s, t in zip(part_starts, ends) if t < n)
        heap = [(r, s, end) for s, end in pairs if (r := get(piece[s:end])) is not None]
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
