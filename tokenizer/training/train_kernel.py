"""The trainer's merge loop compiled with numba: the same merges as ``train.learn_merges_reference``, one
merge costing time in proportion to the places it rewrites, with no fixed NumPy overhead per merge.

Only :mod:`tokenizer.training.compiled_merges` imports this module, and only when numba is installed (the ``train``
extra); without it the trainer uses its NumPy merge loop, and tests check all three agree.

The data, all flat arrays (one *slot* per byte of the distinct pre-tokens, laid end to end):

* ``tok[s]`` the token starting at slot ``s`` (-1 once the slot is the right half of a merged token),
  ``nxt[s]``/``prv[s]`` the next/previous live slot of the same pre-token (-1 at its ends), ``weight[s]`` how
  often the pre-token occurs, ``pid[s]`` the id of the pair starting at ``s`` (-1 if none).
* Per pair id: ``count``, ``left``, ``right``, and its slots ``pslots[pstart[id]:pstart[id + 1]]``, ascending.
  A slot stays listed after its pair is gone; it is skipped on reading because ``pid`` differs (and dropped
  when the lists are compacted, which happens instead of growing them when they are full).
* Per token id: its bytes ``tbytes[toff[t]:toff[t] + tlen[t]]`` (for the tie-break) and ``born[t]``, the first
  pair id given out when ``t`` was made.

Why the lists never need rewriting: every pair a merge creates contains the new token ``t`` (its left
neighbour's token with ``t``, or ``t`` with its right neighbour's), so a pair is born once, in the merge that
makes its younger token, with all of its slots; later merges only take slots away from it. A merge therefore
(1) walks the slots of the best pair in ascending order, takes away the pairs around each occurrence and
rewrites it (``a a a`` with ``(a, a)`` gives ``aa a``: the second slot lost its pair when the first merged),
then (2) walks the merged slots again to give the new pairs ids and append their slots. Looking a new pair up
needs no hash table: its other token indexes ``left_of_new`` or ``right_of_new``.

The best pair is looked for among *candidates*, the pairs with a count of at least a threshold (chosen so
that there are a few hundred); counts only go down, so the set stays valid until it runs out, and then it is
chosen again from all pairs. Among equal counts the greater ``(left bytes, right bytes)`` wins.

How it is compiled: by numba just in time, the machine code cached on disk (``cache=True``) in the folder
:func:`tokenizer.training.merge_loop_cache.folder` names, so only the first process on a machine compiles it (tens of
seconds: :mod:`tokenizer.training.compile_merge_loop` does that in a process of its own) and later ones load it
(about a second). :data:`CACHED_ON_DISK` says whether numba found a folder it can write.

What it does not do: count pre-tokens, grow its arrays, show progress or save checkpoints
(:class:`tokenizer.training.compiled_merges.CompiledMerger` calls :func:`merge_until` in batches and does those between
them).
"""

from __future__ import annotations

import numpy as np

from .. import numba_cache
from . import merge_loop_cache
# The merger's scalars state[...] and what state[STATUS] says after merge_until: shared with the merger, whose
# module does not import numba (numba reads these as constants when it compiles).
from .merge_state import (
    BYTES_USED, CANDIDATES, DONE, NEED_BYTES, NEED_PAIRS, NEED_ROOM, NEED_SLOTS, NO_PAIR_LEFT, NOT_A_PAIR,
    NUM_CANDIDATES, NUM_PAIRS, NUM_TOKENS, SLOTS_USED, STATUS, THRESHOLD,
)

_CACHE_FOLDER = merge_loop_cache.folder()
_uncached: list[str] = []  # the functions numba found no writable cache folder for


def _compiled(function):
    """``function`` compiled on first call, its machine code cached in the merge loop's folder
    (:func:`tokenizer.numba_cache.compiled`)."""
    return numba_cache.compiled(function, _CACHE_FOLDER, _uncached)


@_compiled
def start(tok, nxt, weight, pid, count, left, right, pstart, pslots, tbytes, toff, tlen, born, state):
    """The 256 single-byte tokens, and every pair of two bytes with its slots (a counting sort on 16 bits)."""
    for t in range(256):
        tbytes[t] = t
        toff[t] = t
        tlen[t] = 1
    state[BYTES_USED] = 256
    state[NUM_TOKENS] = 256
    slots_of_code = np.zeros(65_536, np.int64)
    for s in range(len(tok)):
        if nxt[s] >= 0:
            slots_of_code[tok[s] << 8 | tok[nxt[s]]] += 1
    id_of_code = np.full(65_536, -1, np.int64)
    num_pairs = 0
    for code in range(65_536):
        if slots_of_code[code]:
            id_of_code[code] = num_pairs
            left[num_pairs] = code >> 8
            right[num_pairs] = code & 255
            pstart[num_pairs + 1] = pstart[num_pairs] + slots_of_code[code]
            num_pairs += 1
    cursor = pstart[:num_pairs].copy()
    for s in range(len(tok)):
        if nxt[s] >= 0:
            q = id_of_code[tok[s] << 8 | tok[nxt[s]]]
            pslots[cursor[q]] = s
            cursor[q] += 1
            pid[s] = q
            count[q] += weight[s]
    state[NUM_PAIRS] = num_pairs
    state[SLOTS_USED] = pstart[num_pairs]
    born[256] = num_pairs  # the pairs of bytes are ids 0 .. born[256] - 1


@_compiled
def compact(pid, pstart, pslots, num_pairs):
    """Drop the listed slots that no longer hold their pair, in place; returns how many slots stay listed."""
    kept = 0
    for q in range(num_pairs):
        start, end = pstart[q], pstart[q + 1]
        pstart[q] = kept
        for j in range(start, end):
            if pid[pslots[j]] == q:
                pslots[kept] = pslots[j]
                kept += 1
    pstart[num_pairs] = kept
    return kept


@_compiled
def merge_until(until, replay, merges, tok, nxt, prv, weight, pid, count, left, right, candidates, pstart,
                 pslots, tbytes, toff, tlen, born, left_of_new, right_of_new, state):
    """Merge until ``state[NUM_TOKENS] - 256 == until``; stop early with state[STATUS] saying why."""
    state[STATUS] = DONE
    while state[NUM_TOKENS] - 256 < until:
        k = state[NUM_TOKENS] - 256  # this merge's index
        if k < len(replay):
            q = _find(replay[k, 0], replay[k, 1], left, right, count, born, state)
            if q < 0:
                state[STATUS] = NOT_A_PAIR
                return
        else:
            q = _best(count, left, right, candidates, tbytes, toff, tlen, state)
            if q < 0:
                state[STATUS] = NO_PAIR_LEFT
                return
        a, b = left[q], right[q]
        listed = pstart[q + 1] - pstart[q]  # at most this many occurrences, each making at most 2 pairs
        state[NEED_PAIRS] = state[NUM_PAIRS] + 2 * listed + 1
        state[NEED_SLOTS] = state[SLOTS_USED] + 2 * listed
        state[NEED_BYTES] = state[BYTES_USED] + tlen[a] + tlen[b]
        if state[NEED_PAIRS] > len(count) or state[NEED_SLOTS] > len(pslots) or state[NEED_BYTES] > len(tbytes):
            state[STATUS] = NEED_ROOM
            return
        t = state[NUM_TOKENS]
        used = state[BYTES_USED]
        tbytes[used : used + tlen[a]] = tbytes[toff[a] : toff[a] + tlen[a]]
        tbytes[used + tlen[a] : used + tlen[a] + tlen[b]] = tbytes[toff[b] : toff[b] + tlen[b]]
        toff[t] = used
        tlen[t] = tlen[a] + tlen[b]
        state[BYTES_USED] = used + tlen[t]
        merges[k, 0] = a
        merges[k, 1] = b
        _merge(q, t, tok, nxt, prv, weight, pid, count, left, right, candidates, pstart, pslots,
               left_of_new, right_of_new, state)
        born[t + 1] = state[NUM_PAIRS]
        state[NUM_TOKENS] = t + 1


@_compiled
def _find(a, b, left, right, count, born, state):
    """The id of the pair ``(a, b)`` if it occurs now, else -1: it was born with the younger token."""
    younger = max(a, b)
    if younger >= state[NUM_TOKENS]:
        return -1
    first, end = (0, born[256]) if younger < 256 else (born[younger], born[younger + 1])
    for q in range(first, end):
        if left[q] == a and right[q] == b:
            return q if count[q] > 0 else -1
    return -1


@_compiled
def _compare_bytes(tbytes, toff, tlen, x, y):
    """-1, 0 or 1 as token x's bytes sort before, equal to or after token y's."""
    ox, oy = toff[x], toff[y]
    for i in range(min(tlen[x], tlen[y])):
        if tbytes[ox + i] != tbytes[oy + i]:
            return 1 if tbytes[ox + i] > tbytes[oy + i] else -1
    return (tlen[x] > tlen[y]) - (tlen[x] < tlen[y])


@_compiled
def _best(count, left, right, candidates, tbytes, toff, tlen, state):
    """The id of the most frequent pair (the greater bytes among equal counts), -1 if none is left."""
    threshold = state[THRESHOLD]
    kept = 0
    for i in range(state[NUM_CANDIDATES]):  # drop the pairs that fell below the threshold
        if count[candidates[i]] >= threshold:
            candidates[kept] = candidates[i]
            kept += 1
    state[NUM_CANDIDATES] = kept
    if kept > 4 * CANDIDATES:
        _choose_candidates(candidates[:kept].astype(np.int64), count, candidates, state)
    elif kept == 0:
        _choose_candidates(np.arange(state[NUM_PAIRS]), count, candidates, state)
    best = -1
    for i in range(state[NUM_CANDIDATES]):
        q = candidates[i]
        if best < 0 or count[q] > count[best]:
            best = q
        elif count[q] == count[best]:
            order = _compare_bytes(tbytes, toff, tlen, left[q], left[best])
            if order == 0:
                order = _compare_bytes(tbytes, toff, tlen, right[q], right[best])
            if order > 0:
                best = q
    return best


@_compiled
def _choose_candidates(among, count, candidates, state):
    """Candidates: the pairs ``among`` (all those at or above the threshold) with a count of at least the
    CANDIDATES-th largest, and at least 1."""
    n = len(among)
    counts = np.empty(n, np.int64)
    for i in range(n):
        counts[i] = count[among[i]]
    threshold = 1
    if n > CANDIDATES:
        threshold = max(1, np.partition(counts, n - CANDIDATES)[n - CANDIDATES])
    kept = 0
    for i in range(n):
        if count[among[i]] >= threshold:
            candidates[kept] = among[i]
            kept += 1
    state[NUM_CANDIDATES] = kept
    state[THRESHOLD] = threshold


@_compiled
def _merge(q, t, tok, nxt, prv, weight, pid, count, left, right, candidates, pstart, pslots, left_of_new,
           right_of_new, state):
    """Replace every occurrence of pair ``q`` by token ``t`` (left to right, without overlap); give the pairs
    this makes ids and slots."""
    merged = np.empty(pstart[q + 1] - pstart[q], np.int32)
    num_merged = 0
    for j in range(pstart[q], pstart[q + 1]):
        s = pslots[j]
        if pid[s] != q:  # stale, or the right half of the occurrence just before
            continue
        r = nxt[s]
        p = prv[s]
        if p >= 0 and pid[p] >= 0:  # the pair ending at this occurrence goes away (unless already counted)
            count[pid[p]] -= weight[p]
            pid[p] = -1
        count[q] -= weight[s]
        pid[s] = -1
        if pid[r] >= 0:  # and so does the one starting at its right half
            count[pid[r]] -= weight[r]
            pid[r] = -1
        after = nxt[r]
        tok[s] = t
        nxt[s] = after
        if after >= 0:
            prv[after] = s
        tok[r] = -1
        merged[num_merged] = s
        num_merged += 1

    # The new pairs: (token before, t) where the token before is not itself a new t (that pair is the
    # previous occurrence's (t, token after)), and (t, token after). Pass 1 gives ids and counts slots.
    first = state[NUM_PAIRS]
    num_pairs = first
    base = state[SLOTS_USED]
    for i in range(num_merged):
        s = merged[i]
        p = prv[s]
        if p >= 0 and tok[p] != t:
            pair = left_of_new[tok[p]]
            if pair < 0:
                pair = num_pairs
                left_of_new[tok[p]] = pair
                num_pairs = _new_pair(pair, tok[p], t, count, left, right, pstart)
            count[pair] += weight[p]
            pstart[pair + 1] += 1
        r = nxt[s]
        if r >= 0:
            pair = right_of_new[tok[r]]
            if pair < 0:
                pair = num_pairs
                right_of_new[tok[r]] = pair
                num_pairs = _new_pair(pair, t, tok[r], count, left, right, pstart)
            count[pair] += weight[s]
            pstart[pair + 1] += 1
    pstart[first] = base
    for pair in range(first, num_pairs):
        pstart[pair + 1] += pstart[pair]
    # Pass 2: list the slots (ascending within a pair, as the merged slots are ascending).
    cursor = pstart[first:num_pairs].copy()
    for i in range(num_merged):
        s = merged[i]
        p = prv[s]
        if p >= 0 and tok[p] != t:
            pair = left_of_new[tok[p]]
            pslots[cursor[pair - first]] = p
            cursor[pair - first] += 1
            pid[p] = pair
        r = nxt[s]
        if r >= 0:
            pair = right_of_new[tok[r]]
            pslots[cursor[pair - first]] = s
            cursor[pair - first] += 1
            pid[s] = pair
    threshold = state[THRESHOLD]
    num_candidates = state[NUM_CANDIDATES]
    for pair in range(first, num_pairs):
        if left[pair] == t:
            right_of_new[right[pair]] = -1
        else:
            left_of_new[left[pair]] = -1
        if threshold > 0 and count[pair] >= threshold:
            candidates[num_candidates] = pair
            num_candidates += 1
    state[NUM_CANDIDATES] = num_candidates
    state[NUM_PAIRS] = num_pairs
    state[SLOTS_USED] = pstart[num_pairs]


@_compiled
def _new_pair(q, a, b, count, left, right, pstart):
    left[q] = a
    right[q] = b
    count[q] = 0
    pstart[q + 1] = 0
    return q + 1


# Whether every function's machine code is cached on disk (else each process compiles what it calls).
CACHED_ON_DISK = not _uncached
