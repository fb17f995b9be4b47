"""Where numba keeps the compiled merge loop's machine code on disk, and the mark saying it is there.

The merge loop (:mod:`tokenizer.training.train_kernel`) is compiled by numba just in time with ``cache=True``:
the first process on a machine compiles it (tens of seconds) and writes the machine code to disk; later
processes load it from there (about a second, most of it importing numba). This module names that folder and
the mark put in it once the code is written, and imports neither numba nor the kernel, so the trainer can ask
whether the code is there without paying for either.

The folder is ``merge_loop/<key>`` in this package's cache folder (:func:`tokenizer.user_cache.cache_dir`, so
``$TOKENIZER_CACHE_DIR`` moves it and ``$NUMBA_CACHE_DIR`` does not). ``<key>`` is a hash of the kernel's
source, the layout module it reads constants from (numba itself watches only the kernel's own file) and the
numba and Python versions: a change to any of them starts an empty folder. Numba checks the rest itself (the
CPU it compiled for, the kernel file's time stamp) and compiles again where they differ.

What this module does not do: compile, load or run anything (:mod:`tokenizer.training.compile_merge_loop`
fills the folder; :mod:`tokenizer.training.compiled_merges` loads from it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import sys
from pathlib import Path

from ..user_cache import cache_dir

# The files the compiled code depends on.
_SOURCES = ("train_kernel.py", "merge_state.py")
_MARK = "compiled"


def folder() -> Path:
    """The folder numba caches the merge loop's machine code in, for this kernel and these versions."""
    key = hashlib.sha256()
    here = Path(__file__).parent
    for name in _SOURCES:
        key.update((here / name).read_bytes())
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:  # not installed as a distribution, or not at all
        numba_version = "unknown"
    key.update(f"{numba_version} {sys.version} {platform.machine()}".encode())
    return cache_dir() / "merge_loop" / key.hexdigest()[:16]


def is_marked() -> bool:
    """Whether a process has compiled the merge loop into :func:`folder` (so loading it will not compile)."""
    return (folder() / _MARK).exists()


def mark() -> None:
    """Say that :func:`folder` holds the merge loop's machine code (called once it is written)."""
    (folder() / _MARK).write_bytes(b"")
