"""The compiled products behind 16-bit weights: bf16 weights times float32 activations, summed in float32.

Only :mod:`gpt2_numpy.half` imports this module, and only when numba is installed (the ``half`` extra). Numba
compiles each function on its first call (``parallel=True``: the loop over output rows runs on every core) and
keeps the machine code on disk in the folder :func:`tokenizer.numba_cache.folder_for_sources` names for this
file, so only the first process on a machine compiles (several seconds: :func:`gpt2_numpy.half.load_kernel`
says so while it happens) and later ones load it.

A weight matrix arrives as ``rows``: [n_out, n_in], the transpose of model.py's [n_in, n_out] ``w``, so that each
output reads one contiguous row of weights (a dot product with the input row, vectorised by the compiler,
``fastmath`` letting it keep several partial sums). bf16 is the top half of a float32, so widening a weight is a
16-bit shift; each row is widened once into a small buffer and then read for every input row.

What it does not do: choose between this and NumPy's products for a given shape, or round float32 to bf16
(:mod:`gpt2_numpy.half` does both).
"""
from __future__ import annotations

from pathlib import Path

import numba
import numpy as np

from tokenizer import numba_cache

CACHE_FOLDER = numba_cache.folder_for_sources("half_matmul", [Path(__file__)])
ROWS_PER_TILE = 16  # output rows a thread takes at a time (the parallel loop runs over tiles)
_uncached: list[str] = []  # the functions numba found no writable cache folder for


def _compiled(function):
    return numba_cache.compiled(function, CACHE_FOLDER, _uncached, parallel=True, fastmath=True)


@_compiled
def matmul_bf16(x, rows, out):  # [n_x, n_in] f32, [n_out, n_in] bf16 bits (uint16) -> out [n_x, n_out] f32
    n_x, n_in = x.shape
    n_out = rows.shape[0]
    for tile in numba.prange((n_out + ROWS_PER_TILE - 1) // ROWS_PER_TILE):
        widened = np.empty(n_in, np.uint32)  # one weight row as float32 bits
        row = widened.view(np.float32)
        for j in range(tile * ROWS_PER_TILE, min(n_out, (tile + 1) * ROWS_PER_TILE)):
            for k in range(n_in):
                widened[k] = np.uint32(rows[j, k]) << 16  # bf16 -> float32: the low 16 bits are zeros
            for i in range(n_x):
                total = np.float32(0.0)
                for k in range(n_in):
                    total += row[k] * x[i, k]
                out[i, j] = total


@_compiled
def matmul_f32(x, rows, out):  # [n_x, n_in] f32, [n_out, n_in] f32 -> out [n_x, n_out] f32
    # the same loop reading float32 weights: a yardstick for NumPy's (OpenBLAS's) matrix-vector product
    n_x, n_in = x.shape
    n_out = rows.shape[0]
    for tile in numba.prange((n_out + ROWS_PER_TILE - 1) // ROWS_PER_TILE):
        for j in range(tile * ROWS_PER_TILE, min(n_out, (tile + 1) * ROWS_PER_TILE)):
            for i in range(n_x):
                total = np.float32(0.0)
                for k in range(n_in):
                    total += rows[j, k] * x[i, k]
                out[i, j] = total


@_compiled
def widen_bf16(rows, out):  # [n, m] bf16 bits (uint16) -> out [n, m] f32
    out_bits = out.view(np.uint32)
    for j in numba.prange(rows.shape[0]):
        for k in range(rows.shape[1]):
            out_bits[j, k] = np.uint32(rows[j, k]) << 16


def warm_up() -> None:
    """Run every function once on tiny arrays: numba compiles them now, or loads them from its disk cache."""
    x = np.ones((1, 4), np.float32)
    out = np.empty((1, 3), np.float32)
    matmul_bf16(x, np.zeros((3, 4), np.uint16), out)
    matmul_f32(x, np.zeros((3, 4), np.float32), out)
    widen_bf16(np.zeros((3, 4), np.uint16), np.empty((3, 4), np.float32))


CACHED_ON_DISK = not _uncached
