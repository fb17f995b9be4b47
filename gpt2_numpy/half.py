"""16-bit weights for decoding: bf16, half the bytes of float32, so about twice the tokens per second.

A float32 is a sign bit, 8 bits of exponent and 23 of mantissa. bf16 ("brain float") keeps the sign and the 8
exponent bits and only the top 7 mantissa bits: the same range as float32 (no overflow where float32 has none),
about 3 significant decimal digits instead of 7. A bf16 number is the top half of a float32's bits, so widening
one back is a 16-bit shift; rounding a float32 to bf16 here is round-to-nearest, ties to even (as torch's
``.to(torch.bfloat16)``). (f16, IEEE half, trades exponent for mantissa, 5 bits and 10: not offered here, as
numba has no float16 on the CPU and widening one takes more than a shift.)

Why half the bytes is the speed: generating a token multiplies one activation row by every weight matrix, and
each weight is read from memory once and used for one multiply-add. The processor does that arithmetic much
faster than memory delivers the weights, so a token costs about (bytes of weights) / (memory bandwidth), and
halving the bytes nearly halves the time. NumPy has no fast product for 16-bit floats, so the products go
through a small compiled kernel (:mod:`gpt2_numpy.half_kernel`, numba, the ``half`` extra): the weights stay
16-bit in memory and are widened to float32 inside the processor, and the sums are float32.

- :func:`to_bf16` / :func:`from_bf16`: the rounding and the widening;
- :func:`rounded_params`: the float32 params tree with every matrix rounded to bf16, the model the bf16 path
  computes (the tests' oracle, and what ``gpt2 --score --dtype bf16`` scores);
- :func:`decoding_weights`: what :class:`gpt2_numpy.kvcache.DecodingWeights` decodes with for ``dtype="bf16"``:
  :class:`Bf16Matrix` objects, which ``x @ w`` hands to the kernel, so model.py's ``linear`` runs unchanged;
- the converted matrices are cached beside the checkpoint (``model.ckpt.bf16``, ``model.safetensors.bf16``),
  made once and remade when the checkpoint's files change (:func:`cached_bf16_matrices`).

What it does not do: make prefill or scoring faster (those multiply many rows at once, which is arithmetic,
not memory: each core widens its share of the weights, a block at a time, and leaves them to NumPy's float32
product, :func:`widened_product`), keep activations,
layer norms, biases or the key/value cache in 16 bits (all float32), or give the same logits as float32: they
differ by the rounding of the weights (tests/test_half.py holds the difference to a stated bound).
"""
from __future__ import annotations

import importlib.util
import sys
import threading
from pathlib import Path

import numpy as np

from tokenizer.extras import install_hint

from . import rows_cache
from .bands import in_bands

DTYPES = ("f32", "bf16")  # what --dtype and DecodingWeights(dtype=...) take; f32 is the plain NumPy path
EXTRA = "half"  # the optional dependencies' name in pyproject.toml (tokenizer.extras: how to install them)
# Products of more rows than this (prefill, a large batch) widen the weights block by block and use NumPy's
# float32 product: with many rows the arithmetic, not reading the weights, is the cost.
KERNEL_MAX_ROWS = 16
WIDEN_BLOCK_BYTES = 4 << 20  # float32 bytes of weights widened at a time on that path


# ------------------------------------------------------------------------ bf16 numbers
def to_bf16(a) -> np.ndarray:  # [...] float32 -> [...] uint16, the bf16 bits
    """float32 values rounded to bf16 (nearest, ties to even), as their 16 bits in a uint16 array."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    # adding 0x7fff, plus 1 when the kept part is odd, carries into the kept half exactly when the dropped
    # half is above one half (or equal, with an odd kept part): round to nearest, ties to even
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)  # NaN stays NaN (rounding could make inf)
    return np.where(is_nan, (bits >> 16) | np.uint32(0x40), rounded).astype(np.uint16)


def from_bf16(bits) -> np.ndarray:  # [...] uint16 -> [...] float32
    """bf16 bits widened to float32 (exact: bf16 is the top half of a float32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def rounded_params(params: dict) -> dict:
    """picoGPT's params tree with each matrix (wte and every block's four weights) rounded to bf16 and kept as
    float32: the model the bf16 decoder computes, run by the float32 code."""
    return tree_with_matrices(params, lambda name, w: from_bf16(to_bf16(w)))


def tree_with_matrices(params: dict, change) -> dict:
    """The params tree with each matrix w replaced by change(name, w); name as in :func:`matrix_names`."""
    blocks = []
    for i, block in enumerate(params["blocks"]):
        blocks.append({**block, **{
            part: {**block[part], **{layer: {**block[part][layer],
                                             "w": change(f"blocks/{i}/{part}/{layer}", block[part][layer]["w"])}
                                     for layer in layers}}
            for part, layers in (("attn", ("c_attn", "c_proj")), ("mlp", ("c_fc", "c_proj")))}})
    return {**params, "wte": change("wte", params["wte"]), "blocks": blocks}


def matrix_names(n_layer: int) -> list[str]:
    """The matrices that go to 16 bits, in the order the cache file stores them."""
    layers = ("attn/c_attn", "attn/c_proj", "mlp/c_fc", "mlp/c_proj")
    return ["wte"] + [f"blocks/{i}/{layer}" for i in range(n_layer) for layer in layers]


def kernel_rows(params: dict) -> dict[str, np.ndarray]:
    """Each matrix as bf16 bits in the order the kernel reads it (:func:`matrix_rows`)."""
    return {name: matrix_rows(name, w) for name, w in named_matrices(params).items()}


def matrix_rows(name: str, w) -> np.ndarray:
    """A matrix as bf16 bits in the order the kernel reads it: [n_out, n_in] (a block's w transposed; wte as it
    is, since the output head multiplies by wte.T)."""
    return to_bf16(w) if name == "wte" else np.ascontiguousarray(to_bf16(w).T)


def named_matrices(params: dict) -> dict[str, np.ndarray]:
    """Each matrix of the params tree by its name in :func:`matrix_names`, in that order."""
    found = {}
    tree_with_matrices(params, lambda name, w: found.setdefault(name, w))
    return {name: found[name] for name in matrix_names(len(params["blocks"]))}


# ------------------------------------------------------------------------ the kernel
_kernel = []
_loading = threading.Lock()


def missing_extra(dtype: str) -> str | None:
    """Why ``dtype`` cannot be used here (one line saying what to install or pass), or None if it can."""
    if dtype not in DTYPES:
        return f"dtype {dtype!r} is not one of {', '.join(DTYPES)}"
    if dtype != "f32" and importlib.util.find_spec("numba") is None:
        return (f"dtype {dtype} multiplies through a kernel compiled by numba, which is not installed: "
                f"{install_hint(EXTRA)} (or use the default, f32)")
    if dtype != "f32":
        try:  # installed is not enough: numba refuses to import beside a NumPy (or llvmlite) it does not know
            importlib.import_module("numba")  # (the kernel imports it anyway: this costs nothing more)
        except ImportError as error:
            reason = " ".join(str(error).split())
            return (f"dtype {dtype} multiplies through a kernel compiled by numba, which is installed but cannot be "
                    f"imported ({reason}): {install_hint(EXTRA, upgrade=True)} (or use the default, f32)")
    return None


def load_kernel():
    """The compiled kernel module, imported (and compiled, the first time on this machine) on first call."""
    from tokenizer import numba_cache

    with _loading:
        if not _kernel:
            from . import half_kernel  # imports numba: about half a second

            folder = half_kernel.CACHE_FOLDER
            with numba_cache.one_at_a_time(folder):  # a second process waits, then finds it compiled
                if not half_kernel.CACHED_ON_DISK:  # "once" would be untrue: nothing is kept for the next run
                    print(f"compiling the bf16 kernel (about 10-20 s; {folder} cannot be written, so every run "
                          "compiles it) ...", file=sys.stderr, flush=True)
                elif not numba_cache.is_marked(folder):
                    print("compiling the bf16 kernel for this machine (once; about 10-20 s) ...", file=sys.stderr,
                          flush=True)
                half_kernel.warm_up()
                if not numba_cache.is_marked(folder) and half_kernel.CACHED_ON_DISK:
                    try:
                        numba_cache.mark(folder)
                    except OSError:  # only the next process's message is lost
                        pass
            _kernel.append(half_kernel)
        return _kernel[0]


class Bf16Matrix:
    """A [n_in, n_out] weight matrix held as bf16 rows [n_out, n_in]; ``x @ m`` multiplies through the kernel.

    ``x`` is float32 [..., n_in] (any leading axes, as model.py's layers pass) and the product float32
    [..., n_out]. NumPy hands ``@`` to this class because it opts out of NumPy's operators
    (``__array_ufunc__ = None``), so model.py's ``linear(x, w, b)`` runs it unchanged."""

    __array_ufunc__ = None

    def __init__(self, rows: np.ndarray):
        self.rows = rows  # [n_out, n_in] uint16
        self.shape = (rows.shape[1], rows.shape[0])
        self.kernel = load_kernel()

    def __rmatmul__(self, x):  # [..., n_in] @ [n_in, n_out] -> [..., n_out]
        x = np.asarray(x, dtype=np.float32)
        flat = np.ascontiguousarray(x.reshape(-1, x.shape[-1]))  # [n_x, n_in]
        if x.shape[-1] != self.shape[0]:
            raise ValueError(f"matmul: {x.shape} @ {self.shape}: the inner sizes differ")
        out = np.empty((flat.shape[0], self.shape[1]), np.float32)  # [n_x, n_out]
        if flat.shape[0] <= KERNEL_MAX_ROWS:
            self.kernel.matmul_bf16(flat, self.rows, out)
        else:  # many rows: each core widens its share of the weights and multiplies them by every row of x
            # out.T, [n_out, n_x], is cut along the rows of weights, so each band writes its own outputs
            in_bands(widened_product, self.rows, axis=0, out=out.T, x=flat)
        return out.reshape(*x.shape[:-1], self.shape[1])


def widened_product(rows, x):  # [m, n_in] bf16 bits, [n_x, n_in] f32 -> [m, n_x] f32: (x @ widened rows.T).T
    """The product of many rows of x (a prompt) with bf16 weights: a block of weight rows at a time widened to
    float32 (NumPy, in this thread), then NumPy's float32 product, which is the fast one once the arithmetic,
    not the reading, is the cost. Bf16Matrix runs it in bands of weight rows, one per core (bands.in_bands):
    each core widens a different share, with its products held to its own thread. Widening on the compiled
    kernel's threads instead, between products on OpenBLAS's, would leave each pool waiting for the other's idle
    threads to give up the cores, block after block (docs/performance.md, 16-bit weights)."""
    out = np.empty((len(rows), len(x)), np.float32)  # [m, n_x]
    step = max(1, WIDEN_BLOCK_BYTES // (4 * rows.shape[1]))
    widened = np.empty((step, rows.shape[1]), np.float32)  # kept in the cache from block to block
    for j in range(0, len(rows), step):
        block = rows[j : j + step]
        as_float32 = widened[: len(block)]
        np.left_shift(block, 16, out=as_float32.view(np.uint32), dtype=np.uint32)  # from_bf16, without a temporary
        np.matmul(as_float32, x.T, out=out[j : j + len(block)])  # [len(block), n_x]
    return out


class Bf16Rows:
    """An embedding table [n_vocab, n_embd] held as bf16; ``table[ids]`` gives float32 rows."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows  # [n_vocab, n_embd] uint16
        self.shape = rows.shape

    def __getitem__(self, ids):  # [...] -> [..., n_embd]
        return from_bf16(self.rows[ids])


def decoding_weights(params: dict, *, folder=None) -> tuple[dict, Bf16Matrix, list]:
    """(params, head, blocks) for :class:`gpt2_numpy.kvcache.DecodingWeights` to decode in bf16: the params
    tree with wte a :class:`Bf16Rows` (its lookups), the output head wte.T as a :class:`Bf16Matrix`, and the
    blocks with each weight a :class:`Bf16Matrix`. ``folder``: the checkpoint's folder, to keep the converted
    matrices beside it (see :func:`cached_bf16_matrices`); None converts them in memory."""
    load_kernel()
    rows = cached_bf16_matrices(params, folder) if folder is not None else kernel_rows(params)
    head = Bf16Matrix(rows["wte"])
    blocks = tree_with_matrices(params, lambda name, w: Bf16Matrix(rows[name]) if name != "wte" else w)["blocks"]
    return {**params, "wte": Bf16Rows(rows["wte"])}, head, blocks


# ------------------------------------------------------------------------ the cache file
CACHE_KIND, CACHE_MAGIC = "bf16", b"GPT2BF16"  # <weights>.bf16 (gpt2_numpy/rows_cache.py)


def cache_path(folder) -> Path:
    """Where the bf16 copy of the checkpoint in ``folder`` is kept: beside its weights, ``<weights>.bf16``."""
    return rows_cache.cache_path(folder, CACHE_KIND)


def cached_bf16_matrices(params: dict, folder) -> dict[str, np.ndarray]:
    """:func:`kernel_rows` of ``params``, read (memory-mapped) from the cache beside the checkpoint in ``folder``
    when it was made from the checkpoint's files as they are now; else converted and written there, a matrix at a
    time (:mod:`gpt2_numpy.rows_cache`: never half-written). A folder that cannot be written costs only the
    conversion, each time (a line on stderr says so)."""
    matrices = named_matrices(params)
    shapes = {name: w.shape if name == "wte" else w.shape[::-1] for name, w in matrices.items()}
    return rows_cache.cached(folder, CACHE_KIND, CACHE_MAGIC, np.uint16, shapes,
                             lambda name: matrix_rows(name, matrices[name]),
                             making="converting the weights to bf16", again="converts the weights to bf16 again")
