"""Compile the merge loop into numba's disk cache in a process of its own: ``python -m
tokenizer.training.compile_merge_loop``.

Compiling the merge loop (:mod:`tokenizer.training.train_kernel`) takes tens of seconds, once per machine (per
kernel, numba and Python version: :mod:`tokenizer.training.merge_loop_cache`). The trainer starts this program
(through its :class:`tokenizer.training.compiled_loop_loader.CompiledLoopLoader`) as soon as a large job begins and
goes on with its own work: a thread of its own would fight the pre-token counting for the GIL, and a process can
outlive a job that finishes first, so that the next one finds the loop compiled. The program compiles every function
for both weight types and marks the cache folder once numba has written it. It runs at the normal priority: a lower
one starves it on a busy machine, and the job beside it uses one core only while it merges. When two run at once,
the second waits for the first (a lock file, where the platform has ``fcntl``) and then finds the work done.

Its exit status says how it went (:data:`tokenizer.numba_cache.COMPILED`, ``NO_NUMBA``, ``NOT_CACHED``); what it
writes to stderr (numba's warnings, a traceback) goes to :func:`tokenizer.numba_cache.log_path`, for the trainer
to show.

What this module does not do: load the loop into the trainer's process
(:mod:`tokenizer.training.compiled_loop_loader` does), or decide whether a job needs it
(:mod:`tokenizer.training.fast_merges` does).
"""

from __future__ import annotations

import sys
from types import ModuleType

from .. import numba_cache


def _compile() -> ModuleType | None:
    from .compiled_merges import load_kernel, warm_up

    kernel = load_kernel()
    if kernel is not None:
        warm_up(kernel, ("int32", "int64"))
    return kernel


def main() -> int:
    """Compile the loop into its cache folder and mark the folder (:func:`tokenizer.numba_cache.compile_once`)."""
    return numba_cache.compile_once("merge_loop", _compile)


if __name__ == "__main__":
    sys.exit(main())
