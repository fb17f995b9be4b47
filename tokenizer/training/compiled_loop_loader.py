"""The compiled merge loop on its way into this process, while the trainer goes on without it.

A large training job wants the compiled merge loop (:mod:`tokenizer.training.train_kernel`), but getting it
costs time: tens of seconds of compiling the first time on a machine, about a second of loading from numba's
disk cache later. A :class:`CompiledLoopLoader` (a :class:`tokenizer.kernel_loader.KernelLoader`, as the fast
core's BPE kernel has) does both out of the trainer's way and never makes it wait:

1. :meth:`~CompiledLoopLoader.start_compiling`, where the cache folder has no mark yet
   (:mod:`tokenizer.training.merge_loop_cache`), starts the compile program in a process of its own
   (:mod:`tokenizer.training.compile_merge_loop`);
2. once the folder is marked (or that process ends well), a thread imports the loop and loads its machine
   code (:func:`tokenizer.training.compiled_merges.warm_up`);
3. :meth:`~CompiledLoopLoader.kernel` answers at once: the loop if it is loaded, else None; the trainer merges
   with NumPy meanwhile and switches when it gets one.

When numba is not installed, or the compile fails (its log is shown as a warning), ``unavailable`` says why and
the trainer keeps its NumPy loop. One loader serves a whole process (:data:`LOADER`): a loop loaded for one job
serves the next.

Where the mark is present but numba's cache does not fit this machine after all (a cache folder copied from
another CPU), the thread compiles the loop itself; the trainer still does not wait, but merges more slowly
while it does.

What this module does not do: decide whether a job is large enough to want the loop, or switch loops (the
trainer, :func:`tokenizer.training.fast_merges.learn_merges`, does both); compile in this process's main thread.
"""

from __future__ import annotations

from types import ModuleType

from ..kernel_loader import KernelLoader
from . import compile_merge_loop, compiled_merges


def _load() -> ModuleType:
    kernel = compiled_merges.load_kernel()
    compiled_merges.warm_up(kernel)
    return kernel


class CompiledLoopLoader(KernelLoader):
    """Gets the compiled merge loop into this process without blocking its caller (see the module's docstring).

    Call :meth:`start_compiling` from the main thread before worker processes are forked, :meth:`start_loading`
    once they are, and :meth:`kernel` as often as wanted; all are cheap and safe to repeat."""

    def __init__(self) -> None:
        super().__init__("merge_loop", title="the merge loop", program=compile_merge_loop.__name__, load=_load,
                         loaded=lambda: compiled_merges.loaded_kernel(),
                         without="training goes on with the NumPy merge loop (same merges, slower)")


# The loader of this process.
LOADER = CompiledLoopLoader()
