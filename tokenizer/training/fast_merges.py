"""Phase 2 of training, fast: the merges of :func:`tokenizer.training.reference.learn_merges_reference`, learned
incrementally (:func:`learn_merges`), by a NumPy loop or the same loop compiled with numba.

It exists for speed: the reference recounts every pair for every merge; this loop counts them once and then
updates only the pairs around each merge. Tests check both learn the same merges.

What is not here: the tables the NumPy loop works on (:mod:`tokenizer.training.merge_tables`), the compiled
kernel and how it is loaded (:mod:`tokenizer.training.compiled_merges`, :mod:`tokenizer.training.compiled_loop_loader`),
and counting (:mod:`tokenizer.training.counting`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
from tqdm import tqdm

from ..extras import install_hint
from . import compiled_merges
from .compiled_loop_loader import LOADER, CompiledLoopLoader
from .merge_tables import FlatWords, PairTable, TokenOrder
from .reference import Merges

# Below this much work (bytes of distinct pre-tokens x merges) a job merges with NumPy and never touches numba.
# Measured on English text (one core, loaded): 130 KB and 243 merges is 1.2e7 and NumPy merges it in 0.14 s;
# 1e8 takes 0.4-0.8 s and 4e8 1.5 s. Merely importing numba and loading the compiled loop from its disk cache
# takes 1.5-2.5 s (compiling it the first time, 20-40 s), so below about 2e8 the compiled loop could not pay
# for itself even when it is compiled already.
COMPILED_LOOP_MIN_WORK = 200_000_000


def wants_compiled_loop(work: int) -> bool:
    """Whether a job of ``work`` (bytes of distinct pre-tokens x merges) is large enough for the compiled loop."""
    return work >= COMPILED_LOOP_MIN_WORK


def learn_merges(
    counts: dict[str, int],
    num_merges: int,
    *,
    progress: bool = False,
    replay: Sequence[tuple[int, int]] = (),
    save: Callable[[list[tuple[int, int]]], None] | None = None,
    save_every: float = 60.0,
    compiled: bool | None = None,
    loader: CompiledLoopLoader | None = None,
) -> Merges:
    """Up to ``num_merges`` merges learned from pre-token counts: those of
    :func:`tokenizer.training.reference.learn_merges_reference`.

    The distinct pre-tokens (of two bytes or more) are laid end to end in flat arrays, one slot per byte
    (:class:`FlatWords`): the token starting at the slot, the next/previous live slot of the same pre-token
    (a merge unlinks its right half) and the pre-token's count. Every adjacent pair gets an id, a count and
    the list of its slots, and a merge rewrites the slots of the best pair and recounts the pairs around them.

    Two merge loops do this, with the same results: one of a few NumPy operations per merge
    (:class:`PairTable`), and a compiled one (:mod:`tokenizer.training.train_kernel`, with numba, the ``train``
    extra). ``compiled`` picks one:

    * ``None`` (the default): NumPy for a job under :data:`COMPILED_LOOP_MIN_WORK`. A larger one asks
      ``loader`` (default: this process's) for the compiled loop (:mod:`tokenizer.training.compiled_loop_loader`:
      compiled in the background the first time on a machine, loaded in a thread later), merges with NumPy until
      it comes, then goes on with it; without numba, with NumPy to the end. It never waits for it.
    * ``True``: the compiled loop from the start, loaded (or compiled) in this thread first;
      ``ImportError`` without numba.
    * ``False``: NumPy.

    Why the bookkeeping stays small: a pair ``(x, y)`` can only come into being when the younger of ``x`` and
    ``y`` is made (slots only ever get younger tokens), so every pair gets its id and its full list of slots
    once, in the merge that creates it; afterwards its count only goes down and its slots only drop out. The
    best pair is found among the *candidates* (every pair whose count is at least a threshold), rebuilt
    with a full scan only when they run out.

    Resuming: ``replay`` lists merges already learned from the same counts as pairs of token ids; they are
    redone without searching for the best pair, then learning goes on. ``save(merge_ids)`` is called with the
    ids of every merge so far at most every ``save_every`` seconds and at the end (a checkpoint).
    """
    loader = LOADER if loader is None else loader
    words = FlatWords(counts)
    # Each merge joins two live slots into one, so there are never more merges than slots: a larger num_merges
    # (a vocab_size typed with a few digits too many) would only size the loops' tables for merges that cannot be.
    num_merges = min(num_merges, len(words.tok))
    bar = tqdm(total=num_merges, unit="merges", desc="merging", disable=not progress, leave=False)
    if compiled:
        kernel = compiled_merges.load_kernel()
        if kernel is None:
            bar.close()
            raise ImportError(f"compiled=True needs numba: {install_hint('train')}, or pass compiled=False")
        bar.set_description_str("merging (loading the fast merge loop; compiling it takes 20-40 s the first "
                                 "time on a machine)", refresh=True)
        compiled_merges.warm_up(kernel, (words.weight.dtype.name,))
        bar.set_description_str("merging", refresh=False)
        step = _compiled_steps(kernel, words, num_merges, replay)
    elif compiled is None and wants_compiled_loop(len(words.tok) * num_merges):
        loader.start_compiling()
        loader.start_loading()
        step = _numpy_then_compiled_steps(counts, words, num_merges, replay, loader, bar)
    else:
        step = _numpy_steps(words, num_merges, replay)
    del words  # the steps hold them, and may let them go
    merge_ids: list[tuple[int, int]] = []
    saved = time.monotonic()
    tokens: list[bytes] = [bytes([i]) for i in range(256)]  # id -> bytes
    for batch in step:
        for a, b in batch:
            merge_ids.append((a, b))
            tokens.append(tokens[a] + tokens[b])
        bar.update(len(batch))
        if progress and batch:
            a, b = batch[-1]
            bar.set_postfix_str(f"{tokens[a]!r} + {tokens[b]!r}", refresh=False)
        if save and time.monotonic() - saved >= save_every:
            save(merge_ids)
            saved = time.monotonic()
    bar.close()
    if save:
        save(merge_ids)
    pid = loader.compiling_pid() if progress else None
    if pid is not None:
        print(f"The fast merge loop goes on compiling in the background (process {pid}), once for this machine; "
              "later large jobs use it.", file=sys.stderr)
    return [(tokens[a], tokens[b]) for a, b in merge_ids]


# How often the NumPy loop asks whether the compiled one has come (seconds).
_POLL_EVERY = 0.1


def _numpy_then_compiled_steps(counts, words: "FlatWords", num_merges: int, replay: Sequence[tuple[int, int]],
                               loader: CompiledLoopLoader, bar):
    """Batches of merges from the NumPy loop until ``loader`` has the compiled loop, then from that loop (which
    redoes the merges made so far first, on fresh arrays, without yielding them again). The bar's description
    says what the loader is doing meanwhile."""
    done: list[tuple[int, int]] = []
    kernel = loader.kernel()
    if kernel is None:
        numpy_steps = _numpy_steps(words, num_merges, replay)
        polled = 0.0
        for batch in numpy_steps:
            done += batch
            yield batch
            if time.monotonic() - polled >= _POLL_EVERY:
                polled = time.monotonic()
                kernel = loader.kernel()
                activity = loader.activity()
                bar.set_description_str(f"merging ({activity})" if activity else "merging", refresh=False)
                if kernel is not None and len(done) < num_merges:
                    break
        else:
            return  # the NumPy loop finished first
        numpy_steps.close()
        del numpy_steps
        bar.set_description_str("merging", refresh=False)
        words = FlatWords(counts)  # the NumPy loop rewrote its arrays
    yield from _compiled_steps(kernel, words, num_merges, done + list(replay[len(done):]), skip=len(done))


def _replay_error(k: int, pair: tuple[int, int]) -> ValueError:
    return ValueError(f"merge {k} of the checkpoint, ids {tuple(pair)}, is not a pair of these counts: the "
                      "checkpoint is from another corpus or other settings")


# Merges learned between two progress updates / checkpoint checks with the compiled loop.
_BATCH = 64


def _compiled_steps(kernel, words: "FlatWords", num_merges: int, replay: Sequence[tuple[int, int]], skip: int = 0):
    """Batches of merges (lists of token id pairs) from the compiled merge loop; the first ``skip`` merges
    (replayed) are made but not yielded."""
    merger = compiled_merges.CompiledMerger(kernel, words.tok, words.nxt, words.prv, words.weight, 256 + num_merges)
    forced = np.array(replay, np.int32).reshape(-1, 2)[:num_merges]

    def merge_until(until: int) -> int:
        try:
            return merger.merge(until, forced)
        except LookupError as e:
            raise _replay_error(e.args[0], replay[e.args[0]]) from None

    done = merge_until(skip) if skip else 0
    if done < skip:  # no pair left
        return
    while done < num_merges:
        until = min(num_merges, done + _BATCH)
        now = merge_until(until)
        yield merger.merges[done:now].tolist()
        if now < until:  # no pair left
            return
        done = now


def _numpy_steps(words: "FlatWords", num_merges: int, replay: Sequence[tuple[int, int]]):
    """Merges one at a time (lists of one token id pair) from the NumPy merge loop."""
    table = PairTable(words, 256 + num_merges)
    tokens: list[bytes] = [bytes([i]) for i in range(256)]  # id -> bytes
    order = TokenOrder(256 + num_merges)  # for the tie-break

    def greatest(ties: np.ndarray) -> int:
        return int(ties[order.greatest(table.left[ties], table.right[ties])])

    for k in range(num_merges):
        if k < len(replay):
            best = table.find(*replay[k])
            if best < 0:
                raise _replay_error(k, replay[k])
        else:
            best = table.best(greatest)
            if best < 0:
                return
        a, b = int(table.left[best]), int(table.right[best])
        tokens.append(tokens[a] + tokens[b])
        order.add(tokens[-1])
        table.merge(best, len(tokens) - 1)
        yield [(a, b)]
