"""The NumPy merge loop's tables: the distinct pre-tokens laid end to end, and every adjacent pair of them.

:class:`FlatWords` is the layout both fast merge loops start from (the compiled one,
:mod:`tokenizer.training.train_kernel`, takes its arrays); :class:`PairTable` finds the most frequent pair and
makes a merge with a few NumPy operations, and :class:`TokenOrder` breaks a tie among its pairs (CS336's rule: the
greater pair of byte strings) with a few more. :mod:`tokenizer.training.fast_merges` drives them; they learn the
merges of :func:`tokenizer.training.reference.learn_merges_reference`.

What is not here: the loop that drives them, and the choice of the compiled one (:mod:`tokenizer.training.fast_merges`).
"""

from __future__ import annotations

import bisect
import itertools

import numpy as np

from .merge_state import CANDIDATES  # how many pairs the best one is looked for among, in both loops

class FlatWords:
    """The distinct pre-tokens of two bytes or more, end to end, one slot per byte: ``tok`` (the byte, as a
    token id), ``nxt``/``prv`` (the next/previous slot of the same pre-token, -1 at its ends) and ``weight``
    (the pre-token's count). Pre-tokens of one byte have no pair and never change, so they are left out."""

    def __init__(self, counts: dict[str, int]):
        words = [w.encode("utf-8") if isinstance(w, str) else bytes(w) for w in counts]
        lengths = np.fromiter(map(len, words), np.int64, len(words))
        freqs = np.fromiter(map(int, counts.values()), np.int64, len(words))  # beyond int64: OverflowError
        kept = (lengths > 1) & (freqs > 0)
        words = list(itertools.compress(words, kept))
        lengths, freqs = lengths[kept], freqs[kept]
        n = int(lengths.sum())
        if n >= 2**31 - 1:
            raise ValueError("too many bytes of distinct pre-tokens for one training run (at most 2**31 - 2)")
        ends = np.cumsum(lengths)
        self.tok = np.frombuffer(b"".join(words), np.uint8).astype(np.int32)  # (n,)
        weight_type = np.int32 if freqs.max(initial=0) < 2**31 else np.int64  # half the memory when it fits
        self.weight = np.repeat(freqs.astype(weight_type), lengths)  # (n,)
        self.nxt = np.arange(1, n + 1, dtype=np.int32)  # (n,)
        self.nxt[ends - 1] = -1
        self.prv = np.arange(-1, n - 1, dtype=np.int32)  # (n,)
        self.prv[ends - lengths] = -1




class TokenOrder:
    """Every token's place in the byte order of the tokens made so far (tokens of equal bytes share a place), so
    that a tie among many pairs is broken by array operations: late in a small corpus's training thousands of
    pairs tie at a count of 2 or 1, and comparing their bytes in Python at every merge was most of the time.

    Pair ``(a, b)`` sorts before ``(c, d)`` as ``(bytes of a, bytes of b)`` before ``(bytes of c, bytes of d)``:
    exactly when ``(place[a], place[b])`` comes before ``(place[c], place[d])``."""

    def __init__(self, num_ids: int):
        self.sorted_tokens = [bytes([i]) for i in range(256)]  # the distinct bytes of the tokens, ascending
        self.place = np.zeros(num_ids, np.int64)  # token id -> index of its bytes in sorted_tokens
        self.place[:256] = np.arange(256)
        self.num_tokens = 256

    def add(self, token: bytes) -> None:
        """Give the next token id (the one a merge just made) the bytes ``token``."""
        at = bisect.bisect_left(self.sorted_tokens, token)
        if at == len(self.sorted_tokens) or self.sorted_tokens[at] != token:
            self.sorted_tokens.insert(at, token)
            places = self.place[: self.num_tokens]
            places += places >= at  # the tokens after it move one place up
        self.place[self.num_tokens] = at
        self.num_tokens += 1

    def greatest(self, left: np.ndarray, right: np.ndarray) -> int:
        """The index of the greatest of the pairs ``(left[i], right[i])``, the first one if several are equal."""
        key = self.place[left] * len(self.sorted_tokens) + self.place[right]
        return int(np.argmax(key))


class PairTable:
    """Every adjacent pair of the pre-tokens: its count, its slots, and the merge that rewrites them.

    Pair ids are given out in blocks, one per merge (block 0 holds the pairs of the raw bytes); ``slots[k]``
    holds the slots of block ``k``'s pairs grouped by id, ascending within an id, and ``starts[k]`` where each
    id's group begins. A slot listed for a pair it no longer holds (``pid`` differs) is skipped when read.
    """

    def __init__(self, words: "FlatWords", num_ids: int):
        self.tok, self.nxt, self.prv, self.weight = words.tok, words.nxt, words.prv, words.weight
        self.pid = np.full(len(self.tok), -1, np.int32)  # (n,)
        self.num_ids = num_ids  # token ids are below this: a pair's code is left * num_ids + right
        self.size = 0  # pair ids given out so far
        self.count = np.zeros(0, np.int64)
        self.left = np.zeros(0, np.int32)
        self.right = np.zeros(0, np.int32)
        self.first_ids: list[int] = []  # block k's ids are first_ids[k] .. first_ids[k+1] - 1
        self.slots: list[np.ndarray] = []
        self.starts: list[np.ndarray] = []
        self.block_of: dict[int, int] = {}  # token id -> the block of the pairs born with it
        self.threshold = 0  # every pair with a count >= threshold (>= 1) is among the candidates
        self.candidates = np.zeros(0, np.int64)
        self._add_pairs(np.flatnonzero(self.nxt >= 0).astype(np.int32))

    def find(self, a: int, b: int) -> int:
        """The id of the pair ``(a, b)`` if it occurs now, else -1."""
        block = self.block_of.get(max(a, b), -1) if max(a, b) > 255 else 0
        if block < 0 or not self.first_ids:
            return -1
        first, end = self.first_ids[block], self.first_ids[block] + len(self.starts[block]) - 1
        codes = self.left[first:end].astype(np.int64) * self.num_ids + self.right[first:end]  # ascending
        k = int(np.searchsorted(codes, a * self.num_ids + b))
        found = k < len(codes) and codes[k] == a * self.num_ids + b and self.count[first + k] > 0
        return first + k if found else -1

    def _add_pairs(self, at: np.ndarray, made_by: int | None = None) -> None:
        """Give ids to the pairs starting at slots ``at`` (ascending; all of them pairs never seen before)."""
        if not len(at):
            return
        left, right = self.tok[at], self.tok[self.nxt[at]]  # (m,), (m,)
        codes = left.astype(np.int64) * self.num_ids + right  # (m,)
        # Stable, so slots stay ascending within a pair. The pairs of two bytes (the first call, the one with
        # the most slots) are sorted on a 16-bit key ordered like their codes: a radix sort in NumPy.
        key = (left << 8 | right).astype(np.uint16) if made_by is None and not self.size else codes
        order = np.argsort(key, kind="stable")
        codes = codes[order]
        starts = np.flatnonzero(np.concatenate(([True], codes[1:] != codes[:-1])))  # (k,) first of each pair
        first, k = self.size, len(starts)
        if first + k > len(self.count):  # grow geometrically
            cap = max(2 * len(self.count), first + k, 1024)
            self.count = np.resize(self.count, cap)
            self.left = np.resize(self.left, cap)
            self.right = np.resize(self.right, cap)
        at = at[order]
        ids = np.arange(first, first + k)
        self.count[first : first + k] = np.add.reduceat(self.weight[at], starts, dtype=np.int64)
        self.left[first : first + k] = codes[starts] // self.num_ids
        self.right[first : first + k] = codes[starts] % self.num_ids
        starts = np.append(starts, len(at))
        self.pid[at] = np.repeat(ids, starts[1:] - starts[:-1])
        if made_by is not None:
            self.block_of[made_by] = len(self.first_ids)
        self.first_ids.append(first)
        self.slots.append(at)
        self.starts.append(starts)
        self.size = first + k
        if self.threshold:
            new = ids[self.count[first : first + k] >= self.threshold]
            if len(new):
                self.candidates = np.concatenate((self.candidates, new))

    def best(self, tie_break) -> int:
        """The id of the most frequent pair (``tie_break(ids)`` picks among equal counts, an array of two or
        more ids), -1 if none is left."""
        counts = self.count[self.candidates]
        keep = counts >= self.threshold
        if not keep.all():
            self.candidates, counts = self.candidates[keep], counts[keep]
        if len(counts) > 4 * CANDIDATES:  # raise the threshold: fewer candidates to look at every merge
            self._choose_candidates(self.candidates)
            counts = self.count[self.candidates]
        elif not len(counts):
            self._choose_candidates(np.arange(self.size))
            counts = self.count[self.candidates]
            if not len(counts):
                return -1
        top = counts.max()
        ties = self.candidates[counts == top]
        return int(ties[0]) if len(ties) == 1 else tie_break(ties)

    def _choose_candidates(self, among: np.ndarray) -> None:
        """Candidates: the pairs ``among`` (a superset of those >= the threshold) with a count of at least the
        ``CANDIDATES``-th largest (and at least 1)."""
        counts = self.count[among]
        n = len(counts)
        top = np.partition(counts, n - CANDIDATES)[n - CANDIDATES] if n > CANDIDATES else 1
        self.threshold = max(int(top), 1)
        self.candidates = among[counts >= self.threshold]

    def merge(self, q: int, new: int) -> None:
        """Replace every occurrence of pair ``q`` by token ``new``, left to right without overlap."""
        block = bisect.bisect_right(self.first_ids, q) - 1
        i = q - self.first_ids[block]
        at = self.slots[block][self.starts[block][i] : self.starts[block][i + 1]]
        at = at[self.pid[at] == q]  # (m,) ascending
        if self.left[q] == self.right[q]:
            at = _every_other_in_runs(at, self.prv)
        tok, nxt, prv, pid = self.tok, self.nxt, self.prv, self.pid
        right_half = nxt[at]  # (m,)
        before, after = prv[at], nxt[right_half]  # (m,), -1 at the ends of a word
        # The pairs that change start before, at and at the right half of each occurrence; a slot before one
        # occurrence may be the right half of the previous one ("a b a b"), and is taken once.
        own = (before >= 0) & (before != _shifted(right_half))
        gone = np.concatenate((before[own], at, right_half[after >= 0]))
        np.subtract.at(self.count, pid[gone], self.weight[gone])
        pid[gone] = -1
        tok[at] = new
        nxt[at] = after
        linked = after >= 0
        prv[after[linked]] = at[linked]
        tok[right_half] = -1
        # The new pairs start before and at each merged token; "before" may be the previous occurrence.
        before = prv[at]
        own = (before >= 0) & (before != _shifted(at))
        self._add_pairs(np.sort(np.concatenate((before[own], at[linked]))), made_by=new)


def _shifted(a: np.ndarray) -> np.ndarray:
    """``a`` moved one place right, -2 (no slot) in front: entry k is a[k-1]."""
    out = np.empty_like(a)
    out[:1] = -2
    out[1:] = a[:-1]
    return out


def _every_other_in_runs(at: np.ndarray, prv: np.ndarray) -> np.ndarray:
    """Of the slots ``at`` of a pair ``(a, a)``, those merged left to right: in a run of consecutive ones
    (``a a a a`` has pairs at 0, 1, 2) the 1st, 3rd, ... (``aa aa``)."""
    if len(at) < 2:
        return at
    follows = np.zeros(len(at), bool)
    follows[1:] = prv[at[1:]] == at[:-1]
    index = np.arange(len(at))
    run_start = np.maximum.accumulate(np.where(follows, 0, index))
    return at[(index - run_start) % 2 == 0]
