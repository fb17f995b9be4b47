"""Work cut into bands, one per core, each run by a thread of its own: how a long prompt's layers use every core.

A function that treats each index along an axis on its own (each position, for a layer norm, a matrix product
or gelu; each head, for attention; each output, for a product by weight rows) can take the array a band at a
time: cut it into one band per core, hand each band to a thread, and put the bands' results back together in
order. NumPy lets go of Python's lock inside each operation's loop and product, so the threads really run at
once. :func:`in_bands` does that for kvcache's prompts, scoring's windows and half's products of many rows;
while the bands run, NumPy's BLAS is held to one thread (:mod:`gpt2_numpy.blas_threads`), so a band's products
do not start threads of their own.

What it does not do: share work unevenly, or cut arrays too small to be worth a thread (BANDS_MIN_SIZE), or
cut again inside a band (see :func:`in_bands`). Tested equal, bit for bit, to one call on the whole array.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import blas_threads

# Work over at least this many numbers (the first array's) runs on every core; below it, handing the work to
# threads costs more than it saves.
BANDS_MIN_SIZE = 1 << 16
N_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def in_bands(function, *arrays, axis, out=None, **uncut):  # function(*arrays, **uncut), computed in bands
    """function(*arrays, **uncut) computed on every core, for a function that treats each index along `axis` on
    its own (each position, for a layer norm, a product or gelu; each head, for attention): the arrays are cut
    along that axis into one band per core, each band goes through the same function in a thread of its own,
    and the bands' results are put back together in order: into `out` if given (each band's thread writing its
    own slice, the copies running at once too), else into a new array. NumPy lets go of Python's lock inside
    each operation's loop and product, so the bands run at once; while they run, NumPy's BLAS is held to one
    thread (gpt2_numpy/blas_threads.py), so a band's products do not start threads of their own. `uncut` (the
    layer's weights, a mask) goes whole to every band. Small arrays (the first one's size decides) run here, in
    one piece: handing them to threads would cost more than it saves. So does a call from inside a band (a band's
    product that cuts itself into bands: half.Bf16Matrix's): every core is busy already, and a band waiting on
    the pool's other threads could wait for itself."""
    first = arrays[0]
    if not cuts_into_bands(first.size, first.shape[axis]):
        return function(*arrays, **uncut) if out is None else into(out, function, *arrays, **uncut)
    n_bands = min(N_CORES, first.shape[axis])
    edges = np.linspace(0, first.shape[axis], n_bands + 1).astype(int)
    where = [(slice(None),) * axis + (slice(lo, hi),) for lo, hi in zip(edges, edges[1:])]
    with blas_threads.one_thread():
        if out is None:
            running = [band_threads().submit(function, *(a[w] for a in arrays), **uncut) for w in where]
            return np.concatenate([band.result() for band in running], axis=axis)
        running = [band_threads().submit(into, out[w], function, *(a[w] for a in arrays), **uncut) for w in where]
        for band in running:
            band.result()  # (raises what the band raised)
        return out


def cuts_into_bands(size, length):
    """Whether in_bands cuts a first array of `size` numbers and `length` along its axis into bands (it runs the
    others in one piece): big enough to be worth the threads, at least two bands long, not inside a band."""
    return size >= BANDS_MIN_SIZE and min(N_CORES, length) >= 2 and not in_a_band()


def into(out, function, *arrays, **uncut):  # function's result written into out, which is returned
    out[...] = function(*arrays, **uncut)
    return out


def band_threads():
    """in_bands' threads: N_CORES of them, each marked as a band's (in_a_band), started on first use, and
    started anew in a process forked from one that had them (a child inherits the pool but not its threads:
    work handed to it would wait forever) or when N_CORES changed (the old pool's threads then end)."""
    global _band_threads
    if _band_threads is None or _band_threads[:2] != (os.getpid(), N_CORES):
        if _band_threads is not None:
            _band_threads[2].shutdown(wait=False)
        pool = ThreadPoolExecutor(N_CORES, thread_name_prefix="gpt2-bands", initializer=mark_band_thread)
        _band_threads = (os.getpid(), N_CORES, pool)
    return _band_threads[2]


_band_threads = None  # (the process id that made it, its number of threads, the pool)
_this_thread = threading.local()  # .is_band: True in band_threads' threads


def mark_band_thread():
    _this_thread.is_band = True


def in_a_band():
    """Whether the calling thread is one of band_threads'."""
    return getattr(_this_thread, "is_band", False)
