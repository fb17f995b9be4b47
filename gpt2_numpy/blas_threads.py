"""NumPy's BLAS held to one thread while a long prompt's bands run, and given its threads back afterwards.

A long prompt's layers run on every core by splitting the work themselves: a band of positions per core for the
layer norms and matrix products, a band of heads per core for attention (:func:`gpt2_numpy.bands.in_bands`).
Each band's products go to NumPy's BLAS, which by default starts threads of its own for every product: with one
band per core running already, that is twice as many threads as cores. OpenBLAS (the BLAS NumPy's wheels
bundle) also keeps its idle threads spinning for a while after each product, taking a core from whatever runs
next. Held to one thread, a band's product runs where the band runs, and BLAS's own threads stay asleep.

OpenBLAS's number of threads is the whole process's: ``openblas_set_num_threads_local`` (from 0.3.27) sets it
for every thread, despite its name, and returns the number it replaces, so that a caller can put it back.
:func:`one_thread` does that around the bands: the products the main thread runs after them (a decoding step's,
which one row's product makes faster on every core) get every thread again. Callers in several threads at
once share one hold: the first sets one thread, the last one out puts the number back.

The same spinning slows whatever the cores do next: after a prompt's products on OpenBLAS's threads, a decoder
whose steps run in compiled code on numba's threads (:mod:`gpt2_numpy.step_kernel`) took 2-4 times as long over
its first steps, while both sets of threads shared the two cores. :func:`stop_idle_threads` ends OpenBLAS's
worker threads once the prompt has run; OpenBLAS starts them again when a product next asks for them.

The other way round too: numba's threads (GNU OpenMP's) spin for a few milliseconds after each of its parallel
regions before they sleep. A prompt whose products start on OpenBLAS's threads while they spin shares a core
with them, and the first compiled step after it then stalled for 5-25 ms in about half the runs (the worker
queued behind the main thread, it seems): :func:`let_compiled_threads_sleep` waits them out after a burst of
compiled passes that a prompt may follow at once (a decoder's timing of the kernel, a benchmark's).

What it does not do: anything for another BLAS (MKL, Apple's Accelerate: there the bands share the cores with
that library's threads, slower but the same numbers), or on a system without ``/proc/self/maps`` (not Linux).
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
import time


def loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries loaded in this process (NumPy's, once NumPy is imported); [] when unknown."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line})
    except OSError:  # no /proc: not Linux
        return []


def thread_setting():
    """OpenBLAS's ``openblas_set_num_threads_local`` (sets the process's number of threads, returns the number
    before), or None: no OpenBLAS loaded, or one older than 0.3.27."""
    library = openblas()
    if library is None:
        return None
    set_threads = library.openblas_set_num_threads_local
    set_threads.argtypes, set_threads.restype = [ctypes.c_int], ctypes.c_int
    return set_threads


def openblas():
    """The loaded OpenBLAS (NumPy's) as a ctypes library, if it has ``openblas_set_num_threads_local`` (0.3.27 on);
    else None. Looked up once it is found."""
    if _found:
        return _found[0]
    for path in loaded_openblas():
        try:
            library = ctypes.CDLL(path)
            library.openblas_set_num_threads_local
        except (OSError, AttributeError):  # not loadable again, or older than 0.3.27
            continue
        _found.append(library)
        return library
    return None


_found = []  # the library, once found
# Python threads this package starts, by their names' start: band threads (their products hold BLAS to one thread,
# which OpenBLAS runs without its worker threads) and kernel loaders (whose only products are a few numbers)
OWN_THREADS = "gpt2-"


def stop_idle_threads() -> bool:
    """End OpenBLAS's worker threads now, so that they stop spinning on the cores (OpenBLAS starts them again when
    a product next asks for them, as it does in a forked child); whether it did. Only while no other Python thread
    could be inside a product that uses them: every other live thread is one of this package's (OWN_THREADS).
    Ending the workers under another thread's running product would leave that product waiting forever."""
    library = openblas()
    shutdown = getattr(library, "blas_thread_shutdown_", None)  # what OpenBLAS's own fork handler calls
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if shutdown is None or any(not t.name.startswith(OWN_THREADS) for t in others):
        return False
    with _lock:
        shutdown()
    return True


# how long numba's threads spin after a parallel region before they sleep: GNU OpenMP's GOMP_SPINCOUNT (300,000
# checks) takes a few milliseconds; 10 ms after a burst of compiled passes, no first step stalled in 16 runs where
# 9 of 16 did without (docs/performance.md)
COMPILED_THREADS_SPIN_SECONDS = 0.01


def let_compiled_threads_sleep() -> None:
    """Wait until numba's threads, spinning after the last compiled parallel region, have gone to sleep: called
    after a burst of compiled passes that a prompt's products on OpenBLAS's threads may follow."""
    time.sleep(COMPILED_THREADS_SPIN_SECONDS)


def n_threads() -> int | None:
    """OpenBLAS's number of threads now (None: no OpenBLAS with the setting)."""
    set_threads = thread_setting()
    if set_threads is None:
        return None
    with _lock:
        n = set_threads(1)
        set_threads(n)
    return n


@contextlib.contextmanager
def one_thread():
    """BLAS's products on one thread each (the calling thread's) inside the ``with``; its number of threads
    before, after it. Without an OpenBLAS that has the setting, BLAS is left as it is."""
    global _holders, _threads_before
    set_threads = thread_setting()
    if set_threads is None:
        yield
        return
    with _lock:
        if _holders == 0:
            _threads_before = set_threads(1)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                set_threads(_threads_before)


_lock = threading.Lock()
_holders = 0  # callers inside one_thread now
_threads_before = 1  # OpenBLAS's number of threads when the first of them came in
