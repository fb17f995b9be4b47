"""A few rows times a weight matrix, compiled by numba and run on every core: the products of decoding.

Decoding one token multiplies one row (a few, for a batch or k drafted tokens) by every weight matrix, so its
speed is how fast the weights stream from memory. A product of one row does 2 flops per weight read, far
below what a core can do, so the whole game is to read each weight once, in the order it lies in memory, with
both cores reading at once. OpenBLAS's matrix-vector product gets most of the way; these two loops read the
matrices exactly as they are stored, with no copy:

- :func:`rows_times_matrix`: ``x @ w`` for a layer's weight ``w`` [n_in, n_out] (row-major, as loaded). Each
  thread takes a contiguous band of w's rows, so it streams one unbroken stretch of memory, and adds x[r, i] *
  w[i, :] into its own partial result; the partials are summed at the end (n_out numbers each, a few kB).
- :func:`rows_times_transposed`: ``x @ wt.T`` for the output head, wt = wte [n_vocab, n_embd], row-major as
  loaded: each output is the dot product of one row of wte with x, and the threads share out the rows.

Both read each weight once whatever the number of rows, so k rows cost about what one does until the
arithmetic catches up with the memory (tens of rows). Every sum is in float32, as NumPy's; only its order
differs (logits agree to float32 rounding, not bit for bit). The machine code is cached on disk
(:mod:`tokenizer.numba_cache`); :mod:`gpt2_numpy.compiled_matvec` brings it into a process without making it wait.

What it does not do: products of many rows (a prompt's prefill; NumPy's matrix product is faster there, and the
decoder uses it), 16-bit weights, or anything but C-contiguous float32.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from tokenizer import numba_cache

CACHE_FOLDER = numba_cache.folder("matvec")
_uncached: list[str] = []


def _compiled(function):
    # reassociating sums lets numba use vector registers for the dot products' sums; contracting uses fused
    # multiply-adds. Neither can create or hide a NaN or an infinity (nnan/ninf are left out).
    return numba_cache.compiled(function, CACHE_FOLDER, _uncached, parallel=True, fastmath={"reassoc", "contract"})


@_compiled
def rows_times_matrix(x, w, out, n_bands):  # x [n_rows, n_in] @ w [n_in, n_out] -> out [n_rows, n_out]
    # n_bands: the number of threads (numba.get_num_threads() in here would keep numba from caching the code)
    n_rows, n_in = x.shape
    n_out = w.shape[1]
    band = (n_in + n_bands - 1) // n_bands  # rows of w per thread: one contiguous stretch of memory each
    partial = np.zeros((n_bands, n_rows, n_out), np.float32)
    for t in prange(n_bands):
        for i in range(t * band, min(n_in, (t + 1) * band)):
            w_row = w[i]  # read from memory once, then from the cache for the other rows of x
            for r in range(n_rows):
                x_ri = x[r, i]
                acc = partial[t, r]
                for j in range(n_out):
                    acc[j] += x_ri * w_row[j]
    for r in range(n_rows):
        for j in range(n_out):
            total = partial[0, r, j]
            for t in range(1, n_bands):
                total += partial[t, r, j]
            out[r, j] = total
    return out


@_compiled
def rows_times_transposed(x, wt, out, n_chunks):  # x [n_rows, n_in] @ wt.T, wt [n_out, n_in] -> out [n_rows, n_out]
    # n_chunks: many per thread, so that a thread the machine delays does not leave the others idle at the end
    n_rows, n_in = x.shape
    n_out = wt.shape[0]
    chunk = (n_out + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        for j in range(c * chunk, min(n_out, (c + 1) * chunk)):
            wt_row = wt[j]
            for r in range(n_rows):
                total = np.float32(0)
                for i in range(n_in):
                    total += wt_row[i] * x[r, i]
                out[r, j] = total
    return out


def times(rows, w):  # [n_rows, n_in] @ [n_in, n_out] -> [n_rows, n_out]
    """``rows @ w`` by :func:`rows_times_matrix` on every thread of numba's pool."""
    out = np.empty((rows.shape[0], w.shape[1]), np.float32)
    return rows_times_matrix(np.ascontiguousarray(rows, np.float32), w, out, numba.get_num_threads())


def times_transposed(rows, wt):  # [n_rows, n_in] @ [n_out, n_in].T -> [n_rows, n_out]
    """``rows @ wt.T`` by :func:`rows_times_transposed` on every thread of numba's pool."""
    out = np.empty((rows.shape[0], wt.shape[0]), np.float32)
    return rows_times_transposed(np.ascontiguousarray(rows, np.float32), wt, out, 16 * numba.get_num_threads())


def _warm_up() -> None:
    """Run both kernels once on the types decoding passes (weights writable, or read-only as mapped from a
    checkpoint), so that numba loads (or compiles) them now."""
    x = np.ones((2, 3), np.float32)
    for w in (np.arange(12, dtype=np.float32).reshape(3, 4), read_only(np.arange(12, dtype=np.float32).reshape(3, 4))):
        assert (times(x, w) == x @ w).all()
        wt = np.ascontiguousarray(w.T) if w.flags.writeable else read_only(np.ascontiguousarray(w.T))
        assert (times_transposed(x, wt) == x @ w).all()


def read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


_warm_up()

# Whether every function's machine code is cached on disk (else each process compiles what it calls).
CACHED_ON_DISK = not _uncached
