"""Compile the merge loop into numba's disk cache in a process of its own: ``python -m
tokenizer.training.compile_merge_loop``.

Compiling the merge loop (:mod:`tokenizer.training.train_kernel`) takes tens of seconds, once per machine
(per kernel, numba and Python version: :mod:`tokenizer.training.merge_loop_cache`). The trainer starts this
program with :func:`start` as soon as a large job begins and goes on with its own work: a thread of its own
would fight the pre-token counting for the GIL, and a process can outlive a job that finishes first, so that
the next one finds the loop compiled. The program compiles every function for both weight types and marks
the cache folder once numba has written it. It runs at the normal priority: a lower one starves it on a busy
machine, and the job beside it uses one core only while it merges. When two run at once, the second waits
for the first (a lock file, where the platform has ``fcntl``) and then finds the work done.

Its exit status says how it went (:data:`COMPILED`, :data:`NO_NUMBA`, :data:`NOT_CACHED`); what it writes to
stderr (numba's warnings, a traceback) goes to :func:`log_path`, for the trainer to show.

What this module does not do: load the loop into the trainer's process, or decide whether a job needs it
(:mod:`tokenizer.training.compiled_loop_loader` does both).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from .. import numba_cache
from . import merge_loop_cache

# Exit statuses: compiled and cached (or found so); numba is not installed; compiled, but numba found no
# folder it could write, so every process would compile it again.
COMPILED, NO_NUMBA, NOT_CACHED = 0, 3, 4


def log_path() -> Path:
    """Where the program's stderr goes: beside the machine code, in the cache folder."""
    return numba_cache.log_path(merge_loop_cache.folder())


def start() -> subprocess.Popen:
    """Start the program in a new process and return it (:func:`tokenizer.numba_cache.start_program`); its
    stderr goes to :func:`log_path`."""
    return numba_cache.start_program(__name__, merge_loop_cache.folder())


def main() -> int:
    with numba_cache.one_at_a_time(merge_loop_cache.folder()):
        if merge_loop_cache.is_marked():
            return COMPILED
        from .compiled_merges import load_kernel, warm_up

        kernel = load_kernel()
        if kernel is None:
            return NO_NUMBA
        warm_up(kernel, ("int32", "int64"))
        if not kernel.CACHED_ON_DISK:
            return NOT_CACHED
        with contextlib.suppress(OSError):  # written elsewhere by numba; only the next check costs more
            merge_loop_cache.mark()
    return COMPILED


if __name__ == "__main__":
    sys.exit(main())
