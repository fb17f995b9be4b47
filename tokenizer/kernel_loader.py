"""A compiled kernel on its way into a process, never making it wait: compiled in a process of its own, loaded in a
thread, and never inherited half loaded by a forked child.

Two parts of the package have a kernel compiled by numba (the ``train`` extra): the fast core's BPE
(:mod:`tokenizer.fast.compiled_bpe` says when a process wants it) and the trainer's merge loop
(:mod:`tokenizer.training.compiled_loop_loader`). Getting either costs time: compiling it, the first time on a
machine (seconds to tens of seconds), or loading its machine code from numba's disk cache later (a few tenths of a
second to a second, most of it importing numba). A :class:`KernelLoader` does both out of its caller's way:

1. :meth:`~KernelLoader.start_compiling`, where the kernel's cache folder has no mark yet
   (:mod:`tokenizer.numba_cache`), runs the kernel's compile program in a process of its own: it takes nothing
   from this process's GIL, and it may outlive this process, so that the next one finds the kernel compiled;
2. :meth:`~KernelLoader.start_loading`, once the folder is marked (or when :meth:`~KernelLoader.kernel` sees the
   program end well), starts a thread that imports the kernel and runs it once, so that numba loads its machine
   code now;
3. :meth:`~KernelLoader.kernel` answers at once: the kernel if it is loaded, else None.

A process that forks while a loading thread runs waits for it first (:func:`os.register_at_fork`): a child must
not inherit an import half done. Without numba, or when the compile program fails (its log goes into a warning),
:attr:`~KernelLoader.unavailable` says why, and the caller goes on without the kernel.

What this module does not do: decide when a kernel is wanted (its caller does), say where machine code lives or
what a compile program does (:mod:`tokenizer.numba_cache`), or compile in the caller's process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import warnings
import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Callable

from . import numba_cache
from .extras import install_hint

if TYPE_CHECKING:
    import subprocess

# While a thread loads, the interpreter switches threads this often (seconds; Python's default is 0.005). Numba
# releases the GIL thousands of times while it loads machine code (each call into LLVM); at the default, each
# time the thread waited up to 5 ms for a busy caller to hand it back, and loading took 20 s instead of one.
LOADING_SWITCH_INTERVAL = 0.0005

_loaders: weakref.WeakSet[KernelLoader] = weakref.WeakSet()  # every loader of this process, for the fork guard


class KernelLoader:
    """Gets one compiled kernel into this process without blocking its caller (see the module's docstring).

    ``kernel``: its name in :data:`tokenizer.numba_cache.KERNELS` (its cache folder); ``title``: what it is, for
    messages ("the merge loop"); ``program``: the module whose ``main()`` is its compile program
    (:func:`tokenizer.numba_cache.compile_once`); ``load()``: imports the kernel module, runs it once and returns
    it (called in the loading thread); ``loaded()``: the kernel if this process has it already by other means,
    else None; ``without``: what the caller does without it, for the warning when compiling fails.

    Call :meth:`start_compiling` and :meth:`start_loading` when the kernel is wanted and :meth:`kernel` as often
    as wanted: all are cheap, safe to repeat, and never wait."""

    def __init__(self, kernel: str, *, title: str, program: str, load: Callable[[], ModuleType],
                 loaded: Callable[[], ModuleType | None] = lambda: None, without: str):
        self.name, self.title, self.program, self.without = kernel, title, program, without
        self._load_kernel, self._loaded = load, loaded
        self.unavailable: str | None = None  # why the kernel will not come, once known
        self._process: subprocess.Popen | None = None  # the compile program, while it runs
        self._thread: threading.Thread | None = None  # the thread loading the kernel, once started
        self._kernel: ModuleType | None = None
        self._starting = threading.Lock()  # (callers in several threads start one program, one thread)
        _loaders.add(self)

    def start_compiling(self) -> None:
        """Start the compile program, unless the kernel is loaded, on its way, compiled already or cannot come.
        (Before forking worker processes: they must not inherit a loading thread.)"""
        with self._starting:
            if not self._under_way() and not numba_cache.is_marked(numba_cache.folder(self.name)):
                self._process = numba_cache.start_program(self.program, numba_cache.folder(self.name))

    def start_loading(self) -> None:
        """Start the thread that loads the kernel, if its machine code is ready (else :meth:`kernel` starts it
        when the compile program ends)."""
        with self._starting:
            if not self._under_way() and numba_cache.is_marked(numba_cache.folder(self.name)):
                self._start_thread()

    def kernel(self) -> ModuleType | None:
        """The kernel if it is loaded by now, else None (at once, never waiting)."""
        process = self._process
        if self._kernel is None and process is not None and process.poll() is not None:
            with self._starting:
                if self._process is not None:
                    self._compile_program_ended()
        return self._kernel

    def wait(self) -> ModuleType | None:
        """Get the kernel now (compiling it if need be, and waiting for it); None if it cannot come. For
        benchmarks and tests, and for a program that knows it will need the kernel."""
        self.start_compiling()
        self.start_loading()
        if self._process is not None:
            self._process.wait()
            self.kernel()
        if self._thread is not None:
            self._thread.join()
        return self._kernel

    def wait_for_loading(self) -> ModuleType | None:
        """The kernel, waiting for the thread that loads it if one runs (a second or less: its machine code is on
        disk), but never for a compile program; None if it is not loaded by then."""
        self.kernel()  # (a compile program that has ended starts the loading thread)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        return self._kernel

    def status(self) -> str:
        """Where the kernel stands: "loaded", "loading", "compiling", "not asked for", or why it will not come."""
        if self._kernel is not None:
            return "loaded"
        if self.unavailable:
            return self.unavailable
        if self._thread is not None:
            return "loading"
        return "compiling" if self._process is not None else "not asked for"

    def activity(self) -> str | None:
        """What is under way, in a few words for a progress bar: compiling, loading, or None."""
        return {"compiling": f"compiling {self.title} for this machine in the background",
                "loading": f"loading {self.title}"}.get(self.status())

    def compiling_pid(self) -> int | None:
        """The process id of the compile program while it runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def _under_way(self) -> bool:
        """Whether the kernel is loaded, on its way, or known not to come (and if nothing else, finds out)."""
        if self.unavailable or self._kernel or self._thread or self._process:
            return True
        if importlib.util.find_spec("numba") is None:
            self.unavailable = f"numba is not installed ({install_hint('train')})"
            return True
        self._kernel = self._loaded()  # loaded already, by a caller that asked for it and waited
        return self._kernel is not None

    def _compile_program_ended(self) -> None:
        """The compile program ended: load what it compiled (whether or not it could mark the folder), or say
        why there is nothing to load."""
        exit_status, self._process = self._process.returncode, None
        if exit_status == numba_cache.COMPILED:
            self._start_thread()
            return
        if exit_status == numba_cache.NO_NUMBA:
            self.unavailable = "numba is not installed where the compile program ran"
            return
        why = "numba found no cache folder it can write" if exit_status == numba_cache.NOT_CACHED else \
            f"exit status {exit_status}"
        self.unavailable = f"compiling {self.title} failed ({why})"
        log_path = numba_cache.log_path(numba_cache.folder(self.name))
        try:
            log = log_path.read_text(errors="replace").strip()
        except OSError:
            log = ""
        warnings.warn(f"{self.unavailable}; {self.without}." + (f" Its log ({log_path}):\n{log}" if log else ""),
                      RuntimeWarning, stacklevel=4)

    def _start_thread(self) -> None:
        # named as this package's threads are: gpt2_numpy.blas_threads.stop_idle_threads knows them by "gpt2-"
        self._thread = threading.Thread(target=self._load, name=f"gpt2-load-{self.name}", daemon=True)
        self._thread.start()

    def _load(self) -> None:
        interval = sys.getswitchinterval()
        sys.setswitchinterval(LOADING_SWITCH_INTERVAL)
        try:
            self._kernel = self._load_kernel()
        except Exception as e:  # a damaged cache file numba cannot read, say: the caller goes on without it
            self.unavailable = f"loading {self.title} failed: {e!r}"
        finally:
            if sys.getswitchinterval() == LOADING_SWITCH_INTERVAL:  # (unless someone else set it meanwhile)
                sys.setswitchinterval(interval)


def _wait_for_loading_threads() -> None:
    for loader in list(_loaders):
        thread = loader._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()


os.register_at_fork(before=_wait_for_loading_threads)
