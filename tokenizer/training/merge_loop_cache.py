"""Where numba keeps the compiled merge loop's machine code on disk, and the mark saying it is there.

The merge loop (:mod:`tokenizer.training.train_kernel`) is compiled by numba just in time with ``cache=True``:
the first process on a machine compiles it (tens of seconds) and writes the machine code to disk; later
processes load it from there (about a second, most of it importing numba). This module names that folder and
the mark put in it once the code is written, and imports neither numba nor the kernel, so the trainer can ask
whether the code is there without paying for either.

The folder is ``merge_loop/<key>`` in this package's cache folder (:func:`tokenizer.numba_cache.folder`):
``<key>`` hashes the kernel's source, the layout module it reads constants from, and the numba and Python
versions.

What this module does not do: compile, load or run anything (:mod:`tokenizer.training.compile_merge_loop`
fills the folder; :mod:`tokenizer.training.compiled_merges` loads from it).
"""

from __future__ import annotations

from pathlib import Path

from .. import numba_cache


def folder() -> Path:
    """The folder numba caches the merge loop's machine code in, for this kernel and these versions."""
    return numba_cache.folder("merge_loop")


def is_marked() -> bool:
    """Whether a process has compiled the merge loop into :func:`folder` (so loading it will not compile)."""
    return numba_cache.is_marked(folder())


def mark() -> None:
    """Say that :func:`folder` holds the merge loop's machine code (called once it is written)."""
    numba_cache.mark(folder())
