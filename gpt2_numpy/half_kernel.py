"""The compiled products behind 16-bit weights: bf16 weights times float32 activations, summed in float32.

Only :mod:`gpt2_numpy.half` imports this module, and only when numba is installed (the ``half`` extra). The products
are the decoder's matrix-vector loop (:func:`gpt2_numpy.matvec_kernel.rows_times_transposed`), which reads bf16
weights as readily as float32 ones: bf16 is the top half of a float32, so widening a weight is a 16-bit shift and a
reinterpretation of the bits, done in registers as the weight is used (widening each row into a buffer first and
reading that back ran at half the speed). A single sequence's decoding step runs that loop (or its row-by-row twin,
where the decoder measured it faster) inside :mod:`gpt2_numpy.step_kernel`, whose bf16 variant :func:`warm_up`
readies too. Numba compiles each function on its first call (the loop over output rows runs on every core) and keeps
the machine code on disk, so only the first process on a machine compiles (several seconds:
:func:`gpt2_numpy.half.load_kernel` says so while it happens) and later ones load it.

A weight matrix arrives as ``rows``: [n_out, n_in], the transpose of model.py's [n_in, n_out] ``w``, so that each
output reads contiguous rows of weights.

What it does not do: choose between this and NumPy's products for a given shape, or round float32 to bf16
(:mod:`gpt2_numpy.half` does both).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tokenizer import numba_cache

from . import matvec_kernel, step_kernel
from .matvec_kernel import read_only

CACHE_FOLDER = numba_cache.folder_for_sources("half_matmul", [Path(__file__), Path(matvec_kernel.__file__),
                                                               Path(step_kernel.__file__)])
_uncached: list[str] = []  # the functions numba found no writable cache folder for


def matmul_bf16(x, rows, out, in_order=False):  # [n_x, n_in] f32, [n_out, n_in] bf16 bits -> out [n_x, n_out] f32
    # rows read-only, as step_kernel's and matvec_kernel's callers pass weights: one compiled variant of the loop;
    # in_order: one row of x read in address order (matvec_kernel.row_in_order), else in 8 streams
    return matvec_kernel.product(x, read_only(rows), out, matvec_kernel.n_chunks(), in_order)


def matmul_f32(x, rows, out, in_order=False):  # [n_x, n_in] f32, [n_out, n_in] f32 -> out [n_x, n_out] f32
    # the same loops reading float32 weights: a yardstick for NumPy's (OpenBLAS's) matrix-vector product
    return matvec_kernel.product(x, read_only(rows), out, matvec_kernel.n_chunks(), in_order)


def warm_up() -> None:
    """Run decoding's functions once on tiny arrays: numba compiles them now, or loads them from its disk cache.
    (matmul_f32, the benchmark's yardstick, is compiled on its first call.)"""
    matmul_bf16(np.ones((1, 4), np.float32), np.zeros((3, 4), np.uint16), np.empty((1, 3), np.float32))
    step_kernel.warm_up(np.uint16)  # a single sequence's decoding step


CACHED_ON_DISK = not _uncached and matvec_kernel.CACHED_ON_DISK and step_kernel.is_cached_on_disk()
