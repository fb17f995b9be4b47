"""The compiled merge loop on its way into this process, while the trainer goes on without it.

A large training job wants the compiled merge loop (:mod:`tokenizer.training.train_kernel`), but getting it
costs time: tens of seconds of compiling the first time on a machine, about a second of loading from numba's
disk cache later. A :class:`CompiledLoopLoader` does both out of the trainer's way and never makes it wait:

1. :meth:`~CompiledLoopLoader.start_compiling`, where the cache folder has no mark yet
   (:mod:`tokenizer.training.merge_loop_cache`), starts the compile program in a process of its own
   (:mod:`tokenizer.training.compile_merge_loop`);
2. once the folder is marked (or that process ends well), a thread imports the loop and loads its machine
   code (:func:`tokenizer.training.compiled_merges.warm_up`);
3. :meth:`~CompiledLoopLoader.kernel` answers at once: the loop if it is loaded, else None; the trainer merges
   with NumPy meanwhile and switches when it gets one.

When numba is not installed, or the compile fails (its log is shown as a warning), :attr:`unavailable` says
why and the trainer keeps its NumPy loop. One loader serves a whole process (:data:`LOADER`): a loop loaded
for one job serves the next.

Where the mark is present but numba's cache does not fit this machine after all (a cache folder copied from
another CPU), the thread compiles the loop itself; the trainer still does not wait, but merges more slowly
while it does.

What this module does not do: decide whether a job is large enough to want the loop, or switch loops (the
trainer, :func:`tokenizer.training.fast_merges.learn_merges`, does both); compile in this process's main thread.
"""

from __future__ import annotations

import importlib.util
import threading
import warnings
from types import ModuleType

from . import compile_merge_loop, compiled_merges, merge_loop_cache


class CompiledLoopLoader:
    """Gets the compiled merge loop into this process without blocking its caller (see the module's docstring).

    Call :meth:`start_compiling` from the main thread before worker processes are forked, :meth:`start_loading`
    once they are (a forked worker must not inherit a thread in the middle of an import), and :meth:`kernel`
    as often as wanted; all are cheap and safe to repeat."""

    def __init__(self) -> None:
        self.unavailable: str | None = None  # why the loop will not come, once known
        self._process = None  # the compile program, while it runs
        self._thread: threading.Thread | None = None
        self._kernel: ModuleType | None = None

    def start_compiling(self) -> None:
        """Start the compile program, unless the loop is loaded, loading, compiled already or cannot come."""
        if self._under_way():
            return
        if not merge_loop_cache.is_marked():
            self._process = compile_merge_loop.start()

    def start_loading(self) -> None:
        """Start the thread that loads the loop, if its machine code is ready (else :meth:`kernel` starts it
        when the compile program ends)."""
        if self._under_way():
            return
        if merge_loop_cache.is_marked():
            self._start_thread()

    def _under_way(self) -> bool:
        """Whether the loop is loaded, on its way, or known not to come (and if nothing else, finds out)."""
        if self.unavailable or self._kernel or self._thread or self._process:
            return True
        if importlib.util.find_spec("numba") is None:
            self.unavailable = "numba is not installed (pip install 'gpt2-numpy[train]')"
            return True
        if compiled_merges.loaded_kernel() is not None:  # loaded already, by a caller that asked for it
            self._kernel = compiled_merges.loaded_kernel()
            return True
        return False

    def kernel(self) -> ModuleType | None:
        """The compiled merge loop if it is loaded by now, else None (at once, never waiting)."""
        if self._kernel is None and self._process is not None and self._process.poll() is not None:
            status, self._process = self._process.returncode, None
            if status == compile_merge_loop.COMPILED:
                self._start_thread()  # (whether or not it could mark the folder)
            else:
                self._give_up(status)
        return self._kernel

    def activity(self) -> str | None:
        """What is under way, in a few words for a progress bar: compiling, loading, or None."""
        if self._process is not None:
            return "compiling the fast merge loop for this machine in the background"
        if self._thread is not None and self._kernel is None and not self.unavailable:
            return "loading the fast merge loop"
        return None

    def compiling_pid(self) -> int | None:
        """The process id of the compile program while it runs."""
        return self._process.pid if self._process is not None and self._process.poll() is None else None

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._load, name="load-merge-loop", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        try:
            kernel = compiled_merges.load_kernel()
            compiled_merges.warm_up(kernel)
            self._kernel = kernel
        except Exception as e:  # a damaged cache file numba cannot read, say: the NumPy loop goes on
            self.unavailable = f"loading the compiled merge loop failed: {e!r}"

    def _give_up(self, status: int) -> None:
        if status == compile_merge_loop.NO_NUMBA:
            self.unavailable = "numba is not installed where the compile program ran"
            return
        try:
            log = compile_merge_loop.log_path().read_text(errors="replace").strip()
        except OSError:
            log = ""
        why = "numba found no cache folder it can write" if status == compile_merge_loop.NOT_CACHED else \
            f"exit status {status}"
        self.unavailable = f"compiling the merge loop failed ({why})"
        warnings.warn(f"{self.unavailable}; training goes on with the NumPy merge loop (same merges, slower)."
                      + (f" Its log ({compile_merge_loop.log_path()}):\n{log}" if log else ""), RuntimeWarning,
                      stacklevel=3)


# The loader of this process.
LOADER = CompiledLoopLoader()
