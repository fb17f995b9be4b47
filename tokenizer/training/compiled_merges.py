"""The trainer's compiled merge loop in this process: loading it, and running it on one training run's arrays.

:func:`load_kernel` imports :mod:`tokenizer.training.train_kernel`, whose functions numba compiles on their
first call or loads from its disk cache (:mod:`tokenizer.training.merge_loop_cache`): about a second once the
cache holds them, tens of seconds when it does not. :func:`warm_up` makes those first calls on a tiny example,
so that the cost is paid where the caller chooses (the trainer: in a thread, while it merges with NumPy).
:class:`CompiledMerger` holds the arrays of one training run and calls the kernel in batches, growing the
arrays when it says so. Tests check its merges against the reference trainer's.

What this module does not do: choose between the compiled loop and the NumPy one
(:mod:`tokenizer.training.fast_merges` does), load it or compile it in another process
(:mod:`tokenizer.training.compiled_loop_loader` and :mod:`tokenizer.training.compile_merge_loop` do); it does not
merge (the kernel does) or count pre-tokens.
"""

from __future__ import annotations

import importlib.util
import threading
from types import ModuleType

import numpy as np

from .merge_state import (NEED_BYTES, NEED_PAIRS, NEED_ROOM, NEED_SLOTS, NOT_A_PAIR, NUM_PAIRS, NUM_TOKENS,
                          SLOTS_USED, STATUS)

_loaded: list = []  # [the kernel module], once load_kernel has imported it
_loading = threading.Lock()


def load_kernel() -> ModuleType | None:
    """The compiled merge loop (the module :mod:`tokenizer.training.train_kernel`), or None without numba.
    The first call in a process imports it; later calls return the same."""
    if importlib.util.find_spec("numba") is None:
        return None
    with _loading:
        if not _loaded:
            from . import train_kernel

            _loaded.append(train_kernel)
        return _loaded[0]


def loaded_kernel() -> ModuleType | None:
    """The compiled merge loop if :func:`load_kernel` has loaded it in this process, else None (loading nothing)."""
    return _loaded[0] if _loaded else None


def warm_up(kernel: ModuleType, weight_types: tuple[str, ...] = ("int32",)) -> None:
    """Run every function once on a tiny example with slot weights of each of ``weight_types`` (the merger
    keeps them in int32 when they fit, else int64): numba loads (or compiles) their machine code now."""
    for weight_type in weight_types:
        words = np.frombuffer(b"abcabdab", np.uint8).astype(np.int32)
        n = len(words)
        nxt = np.arange(1, n + 1, dtype=np.int32)
        nxt[-1] = -1
        prv = np.arange(-1, n - 1, dtype=np.int32)
        weight = np.ones(n, weight_type)
        merger = CompiledMerger(kernel, words, nxt, prv, weight, 256 + 3, headroom=0)  # grows, compacts
        merger.merge(1, np.array([[97, 98]], np.int32))
        merger.merge(3, np.zeros((0, 2), np.int32))


class CompiledMerger:
    """The merge state of one training run; ``merge`` learns merges until a given number is reached.

    ``kernel`` runs the merges (:func:`load_kernel`'s module). ``tok``, ``nxt``, ``prv``, ``weight`` are the slot arrays
    as ``fast_merges.learn_merges`` lays them out (single bytes in ``tok``; they are rewritten in place); ``num_ids``
    bounds the token ids (256 + the number of merges). ``headroom`` is how much the arrays hold beyond the
    start (tests make it 0 to exercise growing).
    """

    def __init__(self, kernel: ModuleType, tok: np.ndarray, nxt: np.ndarray, prv: np.ndarray, weight: np.ndarray,
                 num_ids: int, *, headroom: int | None = None):
        n = len(tok)
        # Room for the pairs and slots of the first merges; the arrays grow when a merge needs more (merge).
        headroom = n // 2 + 1024 if headroom is None else headroom
        self._start, self._merge_until, self._compact = kernel.start, kernel.merge_until, kernel.compact
        self.tok, self.nxt, self.prv, self.weight = tok, nxt, prv, weight
        self.pid = np.full(n, -1, np.int32)
        pairs = min(n, 65_536) + 1 + headroom  # the pairs of two bytes, and more
        self.count = np.zeros(pairs, np.int64)
        self.left = np.zeros(pairs, np.int32)
        self.right = np.zeros(pairs, np.int32)
        self.candidates = np.zeros(pairs, np.int32)
        self.pstart = np.zeros(pairs + 1, np.int64)
        self.pslots = np.zeros(n + headroom, np.int32)
        self.tbytes = np.zeros(256 + headroom, np.uint8)
        self.toff = np.zeros(num_ids, np.int64)
        self.tlen = np.zeros(num_ids, np.int64)
        self.born = np.zeros(num_ids + 1, np.int64)
        self.left_of_new = np.full(num_ids, -1, np.int32)
        self.right_of_new = np.full(num_ids, -1, np.int32)
        self.state = np.zeros(10, np.int64)
        self.merges = np.zeros((max(0, num_ids - 256), 2), np.int32)
        self._start(self.tok, self.nxt, self.weight, self.pid, self.count, self.left, self.right, self.pstart,
                    self.pslots, self.tbytes, self.toff, self.tlen, self.born, self.state)

    def merge(self, until: int, replay: np.ndarray) -> int:
        """Learn merges until there are ``until`` in all (the first ones redo ``replay``, an (r, 2) array of
        token ids). Returns how many there are now: fewer than ``until`` when no pair is left.
        Raises ``LookupError`` with the merge's index when a replayed pair does not occur."""
        while True:
            self._merge_until(
                until, replay, self.merges, self.tok, self.nxt, self.prv, self.weight, self.pid, self.count,
                self.left, self.right, self.candidates, self.pstart, self.pslots, self.tbytes, self.toff,
                self.tlen, self.born, self.left_of_new, self.right_of_new, self.state,
            )
            status = self.state[STATUS]
            if status == NEED_ROOM:
                self._grow()
                continue
            done = int(self.state[NUM_TOKENS]) - 256
            if status == NOT_A_PAIR:
                raise LookupError(done)
            return done

    def _grow(self) -> None:
        """Make room for one more merge (merge_until says how much it needs). The slot lists are first
        compacted (the slots that no longer hold their pair dropped); what is still short grows by half."""
        need_pairs, need_slots, need_bytes = self.state[NEED_PAIRS], self.state[NEED_SLOTS], self.state[NEED_BYTES]
        if need_pairs > len(self.count):
            cap = int(max(len(self.count) * 3 // 2, need_pairs))
            for name in ("count", "left", "right", "candidates"):
                setattr(self, name, _resized(getattr(self, name), cap))
            self.pstart = _resized(self.pstart, cap + 1)
        if need_slots > len(self.pslots):
            used = self._compact(self.pid, self.pstart, self.pslots, self.state[NUM_PAIRS])
            need_slots += used - self.state[SLOTS_USED]
            self.state[SLOTS_USED] = used
            if need_slots > len(self.pslots) * 3 // 4:  # keep a quarter free, or compacting would come too often
                self.pslots = _resized(self.pslots, int(max(len(self.pslots) * 3 // 2, need_slots * 4 // 3)))
        if need_bytes > len(self.tbytes):
            self.tbytes = _resized(self.tbytes, int(max(len(self.tbytes) * 3 // 2, need_bytes)))


def _resized(a: np.ndarray, size: int) -> np.ndarray:
    out = np.empty(size, a.dtype)  # what lies beyond the used part is written before it is read
    out[: len(a)] = a
    return out
