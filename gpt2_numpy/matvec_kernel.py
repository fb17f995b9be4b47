"""A few rows times a weight matrix, compiled by numba and run on every core: the products of decoding.

Decoding one token multiplies one row (a few, for a batch or k drafted tokens) by every weight matrix, so its
speed is how fast the weights stream from memory. A product of one row does 2 flops per weight read, far
below what a core can do, so the whole game is to read each weight once, in the order it lies in memory, with
both cores reading at once. OpenBLAS's matrix-vector product gets most of the way; these two loops read the
matrices exactly as they are stored, with no copy:

- :func:`rows_times_matrix`: ``x @ w`` for a layer's weight ``w`` [n_in, n_out] (row-major, as loaded). Each
  thread takes a contiguous band of w's rows, so it streams one unbroken stretch of memory, and adds x[r, i] *
  w[i, :] into its own partial result; the partials are summed at the end (n_out numbers each, a few kB).
- :func:`rows_times_transposed`: ``x @ wt.T`` for a matrix stored [n_out, n_in] (wte for the output head; the
  decoder's copy of every other matrix): each output is the dot product of one row of wt with x, and the threads
  share out the rows, a piece at a time. It reads 8 rows at once, SPAN (128) numbers of each at a time, and takes
  them from the 8 eighths of the piece: 8 streams from memory, pages apart. Why: one core keeps too few reads
  from memory in flight on a single stream, and the processor's own prefetcher follows each 4 kB page on its own,
  so 4 streams in 4 places read about 1.3x faster than one, and 8 faster again; 8 adjacent rows would be one
  stream (and short: a bf16 row of 768 numbers is 1.5 kB). So arranged, with no prefetch hints, it reads float32
  about as fast as OpenBLAS (docs/performance.md). wt may also hold bf16 numbers (their uint16 bits, as
  :mod:`gpt2_numpy.half` stores them), widened to float32 in registers (:func:`widened`): the same loop for both.
- :func:`row_in_order`: the same product for one row of x, each thread reading its pieces of wt in address
  order, float32 rows 4 side by side (as llamafile's tiles in ggml read them; bf16 rows one at a time): one
  stream a thread. Which of the two orders reads faster depends on the machine (the AMD EPYC of
  docs/performance.md reads float32 1.1-1.3x faster in order, and bf16 1.1-1.36x; the Xeon read bf16 faster in 8
  streams), so a decoder times a step both ways and keeps the faster (:func:`product` takes the choice).

Both read each weight once whatever the number of rows, but each row's multiply-adds are its own, and they
catch up with the memory after a row or two. rows_times_transposed takes the rows of x two at a time, so that a
weight is loaded (and widened) once for both: 2 rows cost about what one does, 8 rows 2.5-3.3x
(docs/performance.md). Every sum is in float32, as NumPy's; only its order differs (logits agree to float32
rounding, not bit for bit). The machine code is cached on disk
(:mod:`tokenizer.numba_cache`); :mod:`gpt2_numpy.compiled_matvec` brings it into a process without making it wait.

What it does not do: products of many rows (a prompt's prefill; NumPy's matrix product is faster there, and the
decoder uses it), or anything but C-contiguous arrays (float32, and bf16 bits for wt).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange
from numba.core import types
from numba.extending import intrinsic, overload

from tokenizer import numba_cache

CACHE_FOLDER = numba_cache.folder("matvec")
_uncached: list[str] = []
# rows of wt read at once, each from its own eighth of a thread's piece of wt: 8 streams from memory, pages apart.
# One core reads 4 streams about 1.3x faster than one (4 adjacent rows are one stream), and 8 a little faster
# again (docs/performance.md: the Xeon; on the AMD EPYC, one stream read in address order is as fast in some
# minutes and slower in others). The loop names each stream's row and sum (j0..j7, t0..t7): GROUP is not a knob
GROUP = 8
# numbers of each row per inner loop (a row's last span may be shorter): the compiler turns the loop into vector
# instructions. Each span's sums end in adding a vector register's lanes together, so longer spans do less of
# that: 64 read bf16 weights 10-30% faster than 32 (float32 alike), and 128 up to 1.2x faster than 64 for two
# rows, level for one (docs/performance.md). The loop's count is a variable, so a row of 1,600 (1558M's) ends in
# one span of 64, not 64 numbers one at a time
SPAN = 128
# pieces of a product's rows per thread. numba's prange gives each thread an equal run of the pieces (it does not
# hand them out as threads come free), so the count sets only where the streams of a group lie: 1 and 16 a thread
# measured level over whole decoding steps (docs/performance.md)
CHUNKS_PER_THREAD = 16
# reassociating sums lets numba use vector registers for the dot products' sums; contracting uses fused
# multiply-adds. Neither can create or hide a NaN or an infinity (nnan/ninf are left out).
FASTMATH = {"reassoc", "contract"}


def _compiled(function):
    return numba_cache.compiled(function, CACHE_FOLDER, _uncached, parallel=True, fastmath=FASTMATH)


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


@intrinsic
def float32_from_bits(typingctx, bits):  # uint32 -> the float32 with those bits (no instruction: a relabelling)
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return types.float32(types.uint32), codegen


def widened(weight):
    """A weight as float32: a float32 as it is; bf16 bits (uint16) shifted into a float32's top half."""


@overload(widened)
def _widened(weight):
    if weight == types.float32:
        return lambda weight: weight
    if weight == types.uint16:  # bf16 is the top half of a float32: the low 16 bits are zeros
        return lambda weight: float32_from_bits(np.uint32(weight) << 16)
    return None


def _serial(function):
    return numba_cache.compiled(function, CACHE_FOLDER, _uncached, fastmath=FASTMATH)


@_compiled
def rows_times_transposed(x, wt, out, n_chunks):  # x [n_rows, n_in] @ wt.T, wt [n_out, n_in] -> out [n_rows, n_out]
    # n_chunks: CHUNKS_PER_THREAD per thread
    n_rows, n_in = x.shape
    n_out = wt.shape[0]
    chunk = (n_out + n_chunks - 1) // n_chunks  # rows of wt per piece
    for c in prange((n_out + chunk - 1) // chunk):
        start, stop = c * chunk, min(n_out, (c + 1) * chunk)
        stride = (stop - start + GROUP - 1) // GROUP  # the piece's rows as GROUP streams, each `stride` rows long
        for j0 in range(start, start + stride):
            # a group: the next row of each stream; past `stop`, the last row again (computed, not stored)
            j1, j2, j3, j4, j5, j6, j7 = group_rows(j0, stride, stop)
            # rows of x two at a time: each weight is loaded and widened once for both (each row's multiply-adds
            # are its own, and soon cost more than reading the weights: docs/performance.md)
            for r in range(0, n_rows - 1, 2):
                xa, xb = x[r], x[r + 1]
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = np.float32(0)
                b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = np.float32(0)
                for k0 in range(0, n_in, SPAN):
                    span = min(SPAN, n_in - k0)  # a row's last span may be shorter
                    w0, w1 = wt[j0, k0:k0 + span], wt[j1, k0:k0 + span]  # the group's rows, this span of each
                    w2, w3 = wt[j2, k0:k0 + span], wt[j3, k0:k0 + span]
                    w4, w5 = wt[j4, k0:k0 + span], wt[j5, k0:k0 + span]
                    w6, w7 = wt[j6, k0:k0 + span], wt[j7, k0:k0 + span]
                    xsa, xsb = xa[k0:k0 + span], xb[k0:k0 + span]
                    for k in range(span):
                        v0, v1, v2, v3 = widened(w0[k]), widened(w1[k]), widened(w2[k]), widened(w3[k])
                        v4, v5, v6, v7 = widened(w4[k]), widened(w5[k]), widened(w6[k]), widened(w7[k])
                        a0, a1, a2, a3 = a0 + v0 * xsa[k], a1 + v1 * xsa[k], a2 + v2 * xsa[k], a3 + v3 * xsa[k]
                        a4, a5, a6, a7 = a4 + v4 * xsa[k], a5 + v5 * xsa[k], a6 + v6 * xsa[k], a7 + v7 * xsa[k]
                        b0, b1, b2, b3 = b0 + v0 * xsb[k], b1 + v1 * xsb[k], b2 + v2 * xsb[k], b3 + v3 * xsb[k]
                        b4, b5, b6, b7 = b4 + v4 * xsb[k], b5 + v5 * xsb[k], b6 + v6 * xsb[k], b7 + v7 * xsb[k]
                store_group(out[r], j0, stride, stop, (a0, a1, a2, a3, a4, a5, a6, a7))
                store_group(out[r + 1], j0, stride, stop, (b0, b1, b2, b3, b4, b5, b6, b7))
            if n_rows % 2:  # the last row of an odd count (decoding's single row), alone
                xr = x[n_rows - 1]
                t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = np.float32(0)
                for k0 in range(0, n_in, SPAN):
                    span = min(SPAN, n_in - k0)
                    w0, w1 = wt[j0, k0:k0 + span], wt[j1, k0:k0 + span]
                    w2, w3 = wt[j2, k0:k0 + span], wt[j3, k0:k0 + span]
                    w4, w5 = wt[j4, k0:k0 + span], wt[j5, k0:k0 + span]
                    w6, w7 = wt[j6, k0:k0 + span], wt[j7, k0:k0 + span]
                    xs = xr[k0:k0 + span]
                    for k in range(span):
                        t0, t1 = t0 + widened(w0[k]) * xs[k], t1 + widened(w1[k]) * xs[k]
                        t2, t3 = t2 + widened(w2[k]) * xs[k], t3 + widened(w3[k]) * xs[k]
                        t4, t5 = t4 + widened(w4[k]) * xs[k], t5 + widened(w5[k]) * xs[k]
                        t6, t7 = t6 + widened(w6[k]) * xs[k], t7 + widened(w7[k]) * xs[k]
                store_group(out[n_rows - 1], j0, stride, stop, (t0, t1, t2, t3, t4, t5, t6, t7))
    return out


@_compiled
def row_in_order(x, wt, out, n_chunks):  # x [1, n_in] @ wt.T, wt [n_out, n_in] -> out [1, n_out]
    # each thread reads its pieces of wt in address order, float32 rows 4 side by side (in_fours); the
    # decoder times this against the 8 streams (kvcache.DecodingWeights.choose_reading_order)
    n_in = x.shape[1]
    n_out = wt.shape[0]
    chunk = (n_out + n_chunks - 1) // n_chunks
    four_at_once = in_fours(wt)
    xr, o = x[0], out[0]
    for c in prange((n_out + chunk - 1) // chunk):
        start, stop = c * chunk, min(n_out, (c + 1) * chunk)
        fours_end = start + (stop - start) // 4 * 4 if four_at_once else start  # the rest one at a time
        for j in range(start, fours_end, 4):  # (written out here: 1-2% faster than through a helper's call)
            w0, w1, w2, w3 = wt[j], wt[j + 1], wt[j + 2], wt[j + 3]
            a0 = a1 = a2 = a3 = np.float32(0)
            for k in range(n_in):
                xk = xr[k]
                a0, a1 = a0 + widened(w0[k]) * xk, a1 + widened(w1[k]) * xk
                a2, a3 = a2 + widened(w2[k]) * xk, a3 + widened(w3[k]) * xk
            o[j], o[j + 1], o[j + 2], o[j + 3] = a0, a1, a2, a3
        for j in range(fours_end, stop):
            w = wt[j]
            total = np.float32(0)
            for k in range(n_in):
                total += widened(w[k]) * xr[k]
            o[j] = total
    return out


def in_fours(wt):
    """Whether row_in_order reads wt's rows four side by side: float32 rows yes, bf16 rows one at a time. Four
    float32 rows read side by side stream 1.04-1.36x as fast as one at a time on the AMD EPYC (and than the 8
    streams), as llamafile's tiles in ggml read them; bf16 rows, whose weights are widened as they are read, four
    at once ran at 0.7-0.8x of one at a time (docs/performance.md, "Four float32 rows side by side")."""


@overload(in_fours)
def _in_fours(wt):
    four_at_once = wt.dtype == types.float32  # known when the loop compiles: one variant per dtype
    return lambda wt: four_at_once


@_serial
def product(x, wt, out, n_chunks, in_order):  # x [n_rows, n_in] @ wt.T -> out; in_order: row_in_order for 1 row
    if in_order and x.shape[0] == 1:
        return row_in_order(x, wt, out, n_chunks)
    return rows_times_transposed(x, wt, out, n_chunks)


@_serial
def group_rows(j0, stride, stop):  # the group's other rows: j0 + stride, j0 + 2 * stride, .. (at most stop - 1)
    last = stop - 1
    return (min(j0 + stride, last), min(j0 + 2 * stride, last), min(j0 + 3 * stride, last), min(j0 + 4 * stride, last),
            min(j0 + 5 * stride, last), min(j0 + 6 * stride, last), min(j0 + 7 * stride, last))


@_serial
def store_group(out_row, j0, stride, stop, sums):  # a group's GROUP sums: rows j0, j0 + stride, .. before stop
    for g in range(GROUP):
        if j0 + g * stride < stop:
            out_row[j0 + g * stride] = sums[g]


def n_chunks() -> int:
    """The pieces :func:`rows_times_transposed` shares a product's rows out in: CHUNKS_PER_THREAD per thread of
    numba's pool (asked here, outside the compiled code, which numba could not cache otherwise)."""
    return CHUNKS_PER_THREAD * numba.get_num_threads()


def times(rows, w):  # [n_rows, n_in] @ [n_in, n_out] -> [n_rows, n_out]
    """``rows @ w`` by :func:`rows_times_matrix` on every thread of numba's pool."""
    out = np.empty((rows.shape[0], w.shape[1]), np.float32)
    return rows_times_matrix(np.ascontiguousarray(rows, np.float32), read_only(w), out, numba.get_num_threads())


def times_transposed(rows, wt, *, in_order=False):  # [n_rows, n_in] @ [n_out, n_in].T -> [n_rows, n_out]
    """``rows @ wt.T`` by :func:`rows_times_transposed` (or, for one row and ``in_order``, :func:`row_in_order`)
    on every thread of numba's pool; wt float32, or bf16 bits (uint16) whose products are summed in float32."""
    out = np.empty((rows.shape[0], wt.shape[0]), np.float32)
    return product(np.ascontiguousarray(rows, np.float32), read_only(wt), out, n_chunks(), in_order)


def _warm_up() -> None:
    """Run both kernels once, so that numba loads (or compiles) them now. Weights reach them read-only whatever
    their source (a checkpoint mapped from disk is; a copy is not): one compiled variant per weight dtype, where
    writable and read-only arrays would each have their own, and their own seconds of compiling."""
    x = np.ones((2, 3), np.float32)
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert (times(x, w) == x @ w).all()
    assert (times_transposed(x, np.ascontiguousarray(w.T)) == x @ w).all()
    assert (times_transposed(x[:1], np.ascontiguousarray(w.T), in_order=True) == x[:1] @ w).all()


def read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


_warm_up()

# Whether every function's machine code is cached on disk (else each process compiles what it calls).
CACHED_ON_DISK = not _uncached
