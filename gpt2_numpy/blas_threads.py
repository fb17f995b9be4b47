"""NumPy's BLAS held to one thread inside a thread that already has a core of its own.

A long prompt's layers run on every core by splitting the work themselves: a band of positions per core for the
layer norms and matrix products, a band of heads per core for attention (:func:`gpt2_numpy.kvcache.in_bands`).
Each band's products go to NumPy's BLAS, which by default starts threads of its own for every product: with one
band per core running already, that is twice as many threads as cores. OpenBLAS (the BLAS NumPy's wheels
bundle) also keeps its idle threads spinning for a while after each product, taking a core from whatever runs
next. Held to one thread, a band's product runs where the band runs, and BLAS's own threads stay asleep.

OpenBLAS has a setting for the calling thread alone (``openblas_set_num_threads_local``, from 0.3.27);
:func:`hold_to_one_thread` finds the OpenBLAS this process loaded and calls it. The bands' threads call it once,
when they start; the main thread's products are left as they were.

What it does not do: anything for another BLAS (MKL, Apple's Accelerate: there the bands share the cores with
that library's threads, slower but the same numbers), or on a system without ``/proc/self/maps`` (not Linux).
"""
from __future__ import annotations

import ctypes


def loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries loaded in this process (NumPy's, once NumPy is imported); [] when unknown."""
    try:
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line})
    except OSError:  # no /proc: not Linux
        return []


def hold_to_one_thread() -> bool:
    """Make the BLAS products this thread calls run on this thread alone. True if an OpenBLAS with the setting
    was found and told; False leaves BLAS as it is."""
    for path in loaded_openblas():
        try:
            set_local = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):  # not loadable again, or older than 0.3.27
            continue
        set_local.argtypes, set_local.restype = [ctypes.c_int], ctypes.c_int
        set_local(1)
        return True
    return False
