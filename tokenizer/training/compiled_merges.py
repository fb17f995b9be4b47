"""The trainer's compiled merge loop, loaded without numba: its machine code built once ahead of time.

The merge loop (:mod:`tokenizer.training.train_kernel`) is written for numba. Compiled just in time, every run would
first pay for numba itself: importing it, setting up its typing and lowering registries and loading the machine
code from its disk cache take about 1 s of CPU, more than the whole of training on a 4 MB corpus takes
otherwise. So the loop is compiled once, ahead of time, into an ordinary extension module (numba's ``pycc``,
:func:`tokenizer.training.train_kernel.build_extension`), kept in this package's cache folder
(:func:`tokenizer.user_cache.cache_dir`); later runs import that module in about a millisecond, and numba is not
imported at all. The module's name carries a hash of what it was built from (the kernel's source and this
module's, the numba, NumPy and Python versions), so a change to any of them builds a new one. It is compiled for
the architecture's generic CPU, so a cache folder shared between machines stays valid.

:func:`load_kernel` picks the functions the merger runs, once per process:

1. the extension module, if one was built for this kernel and these versions;
2. else one built now (several seconds: the first training run on a machine pays for it, as it paid for
   numba's just-in-time compiling before);
3. where that cannot be built (no C compiler, no setuptools, no writable cache folder), the same functions run
   by numba just in time;
4. without numba, none: the trainer runs its NumPy merge loop.

All give the same merges; tests check each against the reference trainer. :class:`CompiledMerger` holds the
arrays of one training run and calls those functions in batches, growing the arrays when they say so.

What this module does not do: merge (the kernel does), count pre-tokens, or import numba unless it has to build
or fall back.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

import numpy as np

from .merge_state import (NEED_BYTES, NEED_PAIRS, NEED_ROOM, NEED_SLOTS, NOT_A_PAIR, NUM_PAIRS, NUM_TOKENS,
                          SLOTS_USED, STATUS)
from ..user_cache import cache_dir

# The source files the extension module is built from: a change to any builds a new one.
_SOURCES = ("train_kernel.py", "compiled_merges.py", "merge_state.py")


class Kernel:
    """The compiled merge loop's functions: from the extension module (``how == "extension"``) or from
    :mod:`tokenizer.training.train_kernel` run by numba just in time (``how == "jit"``)."""

    def __init__(self, how: str, module: ModuleType):
        self.how, self.module = how, module

    def functions(self, weight_type: np.dtype) -> tuple:
        """``(start, merge_until, compact)`` for slot weights of ``weight_type`` (int32 or int64). Numba's
        dispatch compiles one version per type itself; the extension module has one function per type."""
        m = self.module
        if self.how == "jit":
            return m.start, m.merge_until, m.compact
        name = np.dtype(weight_type).name
        return getattr(m, f"start_{name}"), getattr(m, f"merge_until_{name}"), m.compact

    def __repr__(self) -> str:
        return f"Kernel({self.how!r}, {self.module.__name__!r})"


_loaded: list = []  # [the Kernel or None], once load_kernel has run
_loading = threading.Lock()


def load_kernel() -> Kernel | None:
    """The compiled merge loop (see the module's docstring for which), or None without numba. The first call
    in a process does the work (a thread may make it while the workers count); later calls return the same."""
    with _loading:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> Kernel | None:
    if importlib.util.find_spec("numba") is None:
        return None
    path = extension_path()
    module = _import_extension(path) if path.exists() else None
    if module is None:
        try:
            _build(path)
            module = _import_extension(path)
        # Whatever stops the build (no C compiler or setuptools, a read-only cache folder, a numba without
        # pycc) leaves the just-in-time loop, which gives the same merges, only loads slower.
        except Exception:
            module = None
    if module is not None:
        return Kernel("extension", module)
    try:
        from . import train_kernel
    except ImportError:
        return None
    return Kernel("jit", train_kernel)


def extension_path() -> Path:
    """Where the extension module for this kernel and these versions is (or would be) kept."""
    key = hashlib.sha256()
    here = Path(__file__).parent
    for name in _SOURCES:
        key.update((here / name).read_bytes())
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:  # importable but not installed as a distribution
        numba_version = "unknown"
    key.update(f"{numba_version} {np.__version__} {sys.version} {platform.machine()}".encode())
    name = f"train_kernel_{key.hexdigest()[:16]}"
    return cache_dir() / "train_kernel" / (name + importlib.machinery.EXTENSION_SUFFIXES[0])


def _module_name(path: Path) -> str:
    return path.name.split(".")[0]


def _import_extension(path: Path) -> ModuleType | None:
    """The extension module at ``path``, or None if it does not load (a file left damaged: it is rebuilt)."""
    spec = importlib.util.spec_from_file_location(_module_name(path), path)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError:
        return None
    return module


def _build(path: Path) -> None:
    """Build the extension module into a folder of its own beside ``path``, then move it there in one step, so
    that a process loading it meanwhile (or building it too) never sees half a file."""
    from .train_kernel import build_extension

    path.parent.mkdir(parents=True, exist_ok=True)
    folder = tempfile.mkdtemp(prefix="build-", dir=path.parent)
    try:
        built = build_extension(folder, _module_name(path))
        os.replace(built, path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def warm_up(kernel: Kernel) -> None:
    """Run every function once on a tiny example: numba's just-in-time functions load (or compile) their machine
    code now, and an extension module shows that it works."""
    words = np.frombuffer(b"abcabdab", np.uint8).astype(np.int32)
    n = len(words)
    nxt = np.arange(1, n + 1, dtype=np.int32)
    nxt[-1] = -1
    prv = np.arange(-1, n - 1, dtype=np.int32)
    merger = CompiledMerger(kernel, words, nxt, prv, np.ones(n, np.int32), 256 + 3, headroom=0)  # grows, compacts
    merger.merge(1, np.array([[97, 98]], np.int32))
    merger.merge(3, np.zeros((0, 2), np.int32))


class CompiledMerger:
    """The merge state of one training run; ``merge`` learns merges until a given number is reached.

    ``kernel`` runs the merges (:func:`load_kernel`). ``tok``, ``nxt``, ``prv``, ``weight`` are the slot arrays
    as ``train.learn_merges`` lays them out (single bytes in ``tok``; they are rewritten in place); ``num_ids``
    bounds the token ids (256 + the number of merges). ``headroom`` is how much the arrays hold beyond the
    start (tests make it 0 to exercise growing).
    """

    def __init__(self, kernel: Kernel, tok: np.ndarray, nxt: np.ndarray, prv: np.ndarray, weight: np.ndarray,
                 num_ids: int, *, headroom: int | None = None):
        n = len(tok)
        # Room for the pairs and slots of the first merges; the arrays grow when a merge needs more (merge).
        headroom = n // 2 + 1024 if headroom is None else headroom
        self._start, self._merge_until, self._compact = kernel.functions(weight.dtype)
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
