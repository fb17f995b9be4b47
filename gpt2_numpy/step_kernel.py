"""A decoding step of one sequence, compiled: kvcache's block_step for a single new position, every block, then
ln_f and the output head, in one call.

Decoding a token for one sequence runs each block on one position: two layer norms, four products, attention over
the cached positions and gelu. In NumPy that is about thirty small calls per block, each costing Python and NumPy a
few microseconds on arrays of a few thousand numbers, while the second core waits: at 355M, about a tenth of a
token's time (docs/performance.md). Here :func:`block_step_one` does a whole block, in the same order and with the
same formulas as model.py's layers, its products on matvec_kernel's loops (float32 or bf16 weights, read in 8
streams or in address order: ``in_order``) and attention one head per thread; :func:`decoding_step_one` runs it
for every block and ends with ln_f and the head, so that Python is entered once a token, not once a block (each
entry costs microseconds of Python and of checking twenty arguments: up to 3.5% of a 124M step,
docs/performance.md). It exists only for speed: kvcache's ``block_step`` is the readable one, and the tests hold
the two equal (to float32 rounding).

The arguments are built once per decoder (:func:`decoding_arguments`): every weight matrix [n_out, n_in] as the
kernel reads it (read-only views, so that float32 and bf16 weights each compile once whatever their source), the
biases and layer norms as float32 copies, each block's in a tuple (:func:`block_arguments`) and the tuples in a
numba list.

What it does not do: several rows (a batch) or several positions (a prompt, speculative verification), or padding
(a single sequence has none): those stay in :mod:`gpt2_numpy.kvcache`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import prange, typed

from tokenizer import numba_cache

from . import matvec_kernel
from .matvec_kernel import product, read_only

_uncached: list[str] = []
LAYER_NORM_EPS = np.float32(1e-5)  # model.layer_norm's
GELU_SCALE = np.float32(math.sqrt(2 / math.pi))  # model.gelu's tanh approximation


def _compiled(function, parallel=False):
    return numba_cache.compiled(function, matvec_kernel.CACHE_FOLDER, _uncached, parallel=parallel,
                                fastmath=matvec_kernel.FASTMATH)


def _compiled_on_every_core(function):  # its prange loop shared out among numba's threads
    return _compiled(function, parallel=True)


@_compiled
def block_step_one(x, ln_1_g, ln_1_b, c_attn_w, c_attn_b, attn_proj_w, attn_proj_b, ln_2_g, ln_2_b, c_fc_w, c_fc_b,
                   mlp_proj_w, mlp_proj_b, keys, values, start, n_head, n_chunks, in_order):  # x [n_embd], in place
    """One block on one new position: x += attention(ln_1(x)); x += mlp(ln_2(x)). The position's key and value go
    into keys, values [n_head, n_max, d] at column `start`; it attends to columns 0..start. Weights [n_out, n_in],
    read in matvec_kernel's order of 8 streams, or in address order where `in_order` (matvec_kernel.row_in_order)."""
    n_embd = x.shape[0]
    normed = np.empty((1, n_embd), np.float32)
    qkv = np.empty((1, 3 * n_embd), np.float32)
    attended = np.empty((1, n_embd), np.float32)
    projected = np.empty((1, n_embd), np.float32)
    hidden = np.empty((1, 4 * n_embd), np.float32)
    layer_norm(x, ln_1_g, ln_1_b, normed[0])
    product(normed, c_attn_w, qkv, n_chunks, in_order)  # [1, n_embd] -> [1, 3*n_embd]
    add(qkv[0], c_attn_b)
    cached_attention(qkv[0], keys, values, start, n_head, attended[0])
    product(attended, attn_proj_w, projected, n_chunks, in_order)  # [1, n_embd] -> [1, n_embd]
    add(projected[0], attn_proj_b)
    add(x, projected[0])
    layer_norm(x, ln_2_g, ln_2_b, normed[0])
    product(normed, c_fc_w, hidden, n_chunks, in_order)  # [1, n_embd] -> [1, 4*n_embd]
    add(hidden[0], c_fc_b)
    gelu(hidden[0])
    product(hidden, mlp_proj_w, projected, n_chunks, in_order)  # [1, 4*n_embd] -> [1, n_embd]
    add(projected[0], mlp_proj_b)
    add(x, projected[0])


@_compiled
def decoding_step_one(x, blocks, caches, ln_f_g, ln_f_b, head, start, n_head, n_chunks, in_order):
    """One new position through every block, then ln_f and the output head: x [n_embd] (changed in place) ->
    logits [1, n_vocab]. blocks: each block's block_arguments, a numba list; caches [n_layer, 2, n_head, n_max, d],
    each layer's keys and values; head: wte's rows [n_vocab, n_embd], read as the blocks' matrices are."""
    for i in range(len(blocks)):
        block_step_one(x, *blocks[i], caches[i, 0], caches[i, 1], start, n_head, n_chunks, in_order)
    normed = np.empty((1, x.shape[0]), np.float32)
    layer_norm(x, ln_f_g, ln_f_b, normed[0])
    logits = np.empty((1, head.shape[0]), np.float32)
    return product(normed, head, logits, n_chunks, in_order)  # [1, n_embd] -> [1, n_vocab]


@_compiled_on_every_core
def cached_attention(qkv, keys, values, start, n_head, out):  # qkv [3*n_embd] -> out [n_embd]
    """model.attention for one query per head: the new key and value into the cache, then each head's softmax of
    q.k / sqrt(d) over columns 0..start, times the values; a thread per head."""
    n_embd = out.shape[0]
    d = n_embd // n_head
    scale = np.float32(1 / math.sqrt(d))
    for h in prange(n_head):
        q = qkv[h * d : (h + 1) * d]
        keys[h, start] = qkv[n_embd + h * d : n_embd + (h + 1) * d]
        values[h, start] = qkv[2 * n_embd + h * d : 2 * n_embd + (h + 1) * d]
        scores = np.empty(start + 1, np.float32)
        for j in range(start + 1):
            total = np.float32(0)
            for i in range(d):
                total += q[i] * keys[h, j, i]
            scores[j] = total * scale
        top = scores.max()  # softmax, as model.softmax: shifted by the largest score (exp in vector instructions)
        for j in range(start + 1):
            scores[j] = exp_float32(scores[j] - top)
        weights = scores / scores.sum()
        o = out[h * d : (h + 1) * d]
        o[:] = 0
        for j in range(start + 1):
            for i in range(d):
                o[i] += weights[j] * values[h, j, i]


@_compiled
def layer_norm(x, g, b, out):  # [n] -> out [n], as model.layer_norm
    mean = x.mean()
    centred = x - mean
    variance = (centred * centred).mean()
    out[:] = g * centred / np.sqrt(variance + LAYER_NORM_EPS) + b


def _compiled_in_order(function):
    # without reassociation (exp_float32's reduction subtracts in its order), and dividing as NumPy does (by 0: an
    # infinity or NaN), not as Python (an exception, whose test in the loop kept it one number at a time)
    return numba_cache.compiled(function, matvec_kernel.CACHE_FOLDER, _uncached, fastmath={"contract"},
                                error_model="numpy")


# exp(z) = 2**n * exp(r), n the nearest whole number to z / ln 2 and r = z - n ln 2 (|r| <= ln 2 / 2), ln 2 in two
# parts so that n * LN2_HIGH is exact (LN2_HIGH has 9 significant bits); 2**n is made from its bits, exp(r) by its
# Taylor series to r**7 / 7! (the next term is under 6e-9 of it). Past the float32 range's ends: 0 below
# EXP_LOWEST (exp(z) < 2.8e-38, near the smallest normal float32), infinity above EXP_HIGHEST, as exp's.
LOG2_E = np.float32(1 / math.log(2))
LN2_HIGH = np.float32(0.693359375)
LN2_LOW = np.float32(math.log(2) - 0.693359375)
EXP_LOWEST, EXP_HIGHEST = np.float32(-86.5), np.float32(88.72)


@_compiled_in_order
def exp_float32(z):  # e**z for a float32 z, in operations that the compiler turns into vector instructions
    inside = min(max(z, EXP_LOWEST), EXP_HIGHEST)  # (NaN: kept as NaN below)
    n = np.floor(inside * LOG2_E + np.float32(0.5))
    r = (inside - n * LN2_HIGH) - n * LN2_LOW
    # Taylor's polynomial in Horner's order, times 2**n as 2 * 2**(n - 1) (n - 1 + 127: a normal's exponent bits)
    e = (np.float32(1) + r * (np.float32(1) + r * (np.float32(1 / 2) + r * (np.float32(1 / 6) + r * (
        np.float32(1 / 24) + r * (np.float32(1 / 120) + r * (np.float32(1 / 720) + r * np.float32(1 / 5040))))))))
    e = e * np.float32(2) * matvec_kernel.float32_from_bits(np.uint32(np.int32(n) + 126) << 23)
    e = np.float32(0) if z < EXP_LOWEST else e
    e = np.float32(np.inf) if z > EXP_HIGHEST else e
    return e if z == z else z


@_compiled_in_order
def gelu(a):  # [n], in place, as model.gelu
    # model.gelu's 0.5 * v * (1 + tanh(u)) written as v / (1 + exp(-2u)), the same number (1 + tanh(u) =
    # 2 / (1 + exp(-2u))), with exp_float32's exp, which the compiler runs in vector instructions where the C
    # library's exp, one number at a time, took 8 us of a block's step at 124M (docs/performance.md)
    for i in range(a.shape[0]):
        v = a[i]
        u = GELU_SCALE * (v + np.float32(0.044715) * v * v * v)
        a[i] = v / (np.float32(1) + exp_float32(np.float32(-2) * u))


@_compiled
def add(a, b):  # a += b, [n] each
    for i in range(a.shape[0]):
        a[i] += b[i]


def decoding_step(x, arguments, caches, start, n_head, in_order=False):  # x [n_embd] -> logits [1, n_vocab]
    """:func:`decoding_step_one` with the weights' :func:`decoding_arguments`; caches [n_layer, 2, n_head, n_max,
    d]. x is changed in place."""
    blocks, ln_f_g, ln_f_b, head = arguments
    return decoding_step_one(x, blocks, caches, ln_f_g, ln_f_b, head, start, n_head, matvec_kernel.n_chunks(),
                             in_order)


def decoding_arguments(blocks, ln_f, head_rows, rows_of):
    """The arguments of :func:`decoding_step` that hold the weights: the blocks' (each :func:`block_arguments`, in a
    numba list), ln_f's, and wte's rows for the head [n_vocab, n_embd]."""
    blocks = typed.List([block_arguments(block, rows_of) for block in blocks])
    return blocks, *layer_norm_arguments(ln_f), read_only(head_rows)


def block_arguments(block, rows_of):
    """The arguments of :func:`block_step_one` that hold a block's weights, in order; rows_of(w) gives a weight
    matrix's [n_out, n_in] array (float32, or bf16 bits)."""
    def vector(v):
        return np.array(v, dtype=np.float32)  # a copy: one compiled variant, whatever the params' source

    def matrix(w):
        return read_only(rows_of(w))

    attn, mlp = block["attn"], block["mlp"]
    return (vector(block["ln_1"]["g"]), vector(block["ln_1"]["b"]),
            matrix(attn["c_attn"]["w"]), vector(attn["c_attn"]["b"]),
            matrix(attn["c_proj"]["w"]), vector(attn["c_proj"]["b"]),
            vector(block["ln_2"]["g"]), vector(block["ln_2"]["b"]),
            matrix(mlp["c_fc"]["w"]), vector(mlp["c_fc"]["b"]),
            matrix(mlp["c_proj"]["w"]), vector(mlp["c_proj"]["b"]))


def layer_norm_arguments(ln):  # {"g", "b"} -> float32 copies (one compiled variant, whatever their source)
    return np.array(ln["g"], dtype=np.float32), np.array(ln["b"], dtype=np.float32)


def warm_up(weight_dtype) -> None:
    """Run a decoding step once through a tiny block with weights of weight_dtype (np.float32, or np.uint16 for bf16
    bits): numba compiles it now, or loads it from its disk cache."""
    n_embd, n_head = 4, 2
    norm = {"g": np.ones(n_embd), "b": np.zeros(n_embd)}
    block = {"ln_1": norm, "ln_2": norm,
             "attn": {"c_attn": {"w": np.zeros((3 * n_embd, n_embd), weight_dtype), "b": np.zeros(3 * n_embd)},
                      "c_proj": {"w": np.zeros((n_embd, n_embd), weight_dtype), "b": np.zeros(n_embd)}},
             "mlp": {"c_fc": {"w": np.zeros((4 * n_embd, n_embd), weight_dtype), "b": np.zeros(4 * n_embd)},
                     "c_proj": {"w": np.zeros((n_embd, 4 * n_embd), weight_dtype), "b": np.zeros(n_embd)}}}
    caches = np.zeros((1, 2, n_head, 1, n_embd // n_head), np.float32)  # [n_layer, 2, n_head, n_max, d]
    head = np.zeros((3, n_embd), weight_dtype)
    # (building the numba list compiles the list's own code for a tuple of these types, each process, here)
    arguments = decoding_arguments([block], norm, head, lambda w: w)
    decoding_step(np.ones(n_embd, np.float32), arguments, caches, 0, n_head)


def is_cached_on_disk() -> bool:
    return not _uncached
