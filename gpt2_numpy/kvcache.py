"""Fast GPT-2 generation: a key/value cache, batches of prompts, and sampling.

`model.py`'s `generate_reference` runs the whole sequence through the model for every new token.
The attention of a past position never changes once computed (it only sees earlier positions), so
this module keeps each layer's keys and values in a cache and runs only the newest position per
step: same tokens, a small part of the work. `generate` and `generate_batch` are the entry points.

- `KVDecoder` runs a batch of prompts: one prefill over the prompts, then one position per step.
  Prompts of different lengths are left-padded; padding is masked out and each row keeps its own
  positions, so a row's tokens do not depend on the other rows. extend() runs several new positions
  in one pass and rollback() forgets the newest ones: what speculative.py verifies drafted tokens with.
- `DecodingWeights` holds the weights as decoding reads them: float32, behind the compiled
  matrix-vector kernel (gpt2_numpy/matvec_kernel.py, both cores) once numba has it loaded and it is
  measured faster than NumPy's products on these weights on this machine; else for NumPy, with two
  matrices copied into the memory order that is faster to read for long runs;
  or, asked for, in 16 bits (gpt2_numpy/half.py). Build it once and pass it to many generate calls. On either
  compiled kernel's weights, a single sequence's decoding step runs in one compiled call
  (gpt2_numpy/step_kernel.py, block_step's twin for one position, for every block), not as thirty NumPy calls
  a block.
- `sample` picks the next token: greedy, or drawn at a temperature after top-k and top-p (nucleus)
  filtering. `sampling_temperature` is the one rule for which of the two the options ask for.

It does not slide the window past the model's context (n_ctx), search beams or use a GPU.

The layers are model.py's own functions (`layer_norm`, `linear`, `ffn`, `split_qkv`, `split_heads`, `attention`,
`merge_heads`, `causal_mask`, and `attention_in_blocks`, attention's faster twin for many new positions at once);
what this module adds is the cache around them (`cached_attention`, `block_step`), the padding mask, the weights'
memory order, and for a long prompt three ways to keep both cores busy and the memory warm: the block's work
cut into bands run by threads, one per core (`bands.in_bands`: bands of positions for the layer norms, products
and gelu, bands of heads for attention; tested equal to one call, to float32 rounding), the MLP's gelu taken a
stretch of rows at a time so that its nine passes stay in a core's own cache (`ffn_in_stretches`, model.ffn's
twin for many positions, tested equal), and freed arrays' memory kept for the next layer's
(`keep_freed_memory`). `KVDecoder.prefill_states` gives every prompt position's final state, which scoring.py
turns into log-probabilities. The tests hold its tokens and logits to model.py's full
recompute, and both to HF transformers.
"""
from __future__ import annotations

import contextlib
import ctypes
import math
import sys
import time

import numpy as np

from tokenizer.command_line import said_if_large

from . import bands, blas_threads, compiled_matvec, model
from .bands import in_bands
from .model import (as_float32, attention, attention_in_blocks, causal_mask, check_fits_context, layer_norm, linear,
                    merge_heads, softmax, split_heads, split_qkv)

EOT_ID = 50256  # <|endoftext|>
MASKED = np.float32(-1e10)  # added to the scores of padding, as model.causal_mask to later positions
# Products of at most this many rows (a decoding step's batch, or a few drafted tokens) go to the compiled
# kernel when it is loaded: it reads each weight once for all of them. More rows (a prompt's prefill) go to
# NumPy's matrix product, which is faster once the arithmetic, not the memory, is the bound.
KERNEL_MAX_ROWS = 8
# Runs of at least this many positions (rows x new tokens) copy two weight matrices into a faster
# memory order first; below it the copying costs more than it saves (see DecodingWeights).
RELAYOUT_MIN_STEPS = 128
# The choice between the kernel and NumPy's products times passes over the first blocks holding this many bytes
# of float32 weights (at least one block), and the head: every block is alike, and timing all of 1558M's nine
# times over held its first token back by more than a second (weight_pass_seconds)
TIMED_BLOCK_BYTES = 512 << 20
# the kernel's float32 rows beside the checkpoint: <weights>.f32rows (gpt2_numpy/rows_cache.py)
F32_ROWS_KIND, F32_ROWS_MAGIC = "f32rows", b"GPT2F32R"
# Runs of at least this many positions at once (rows x new positions: a prompt) keep freed memory for the next
# layer's arrays (keep_freed_memory)
MANY_POSITIONS = 64


# model.py's layers as this module found them. step_kernel's compiled step computes exactly these, so a decoder takes
# it only while they are unchanged: a learner who patches model.gelu (or this module's layer_norm) sees decoding follow.
LAYERS_AT_IMPORT = {name: getattr(model, name) for name in (
    "layer_norm", "linear", "ffn", "gelu", "attention", "softmax", "split_qkv", "split_heads", "merge_heads")}


def layers_unchanged():
    """Whether model.py's layers, and this module's names for them, are still those LAYERS_AT_IMPORT holds."""
    here = globals()
    return all(getattr(model, name) is layer and here.get(name, layer) is layer
               for name, layer in LAYERS_AT_IMPORT.items())


# ------------------------------------------------------------ model.py's layers, with a cache
def cached_attention(qkv, n_head, mask, cache, start, n_out=None):  # [n_batch, n_seq, 3*n_embd] -> [.., n_out, n_embd]
    """model.mha's attention for the n_seq newest positions, whose queries also read every cached position;
    qkv is c_attn's output for them (block_step applies c_attn, and c_proj to the result).

    cache: (keys, values), each [n_batch, n_head, n_max, d]; the new positions' keys and values
    are written at columns start.. and the queries attend to columns 0..start + n_seq.
    mask: [n_batch, 1, n_seq, start + n_seq], 0 where a query may look and -1e10 (or twice that) where
    not: the causal mask plus each row's padding.
    n_out: only the newest n_out positions' queries attend (None: all n_seq); every position's key and value
    still goes into the cache.
    """
    q, k, v = (split_heads(a, n_head) for a in split_qkv(qkv))  # 3 x [n_batch, n_head, n_seq, d]
    if n_out is not None:
        q, mask = q[:, :, -n_out:], mask[:, :, -n_out:]  # [n_batch, n_head, n_out, d], [n_batch, 1, n_out, end]
    # each head attends on its own: a prompt's heads are shared out between the cores
    heads = in_bands(attend_cached, q, k, v, *cache, axis=1, out=np.empty(q.shape, np.float32), mask=mask,
                     start=start)  # [n_batch, n_head, n_out, d]
    return merge_heads(heads)  # [n_batch, n_out, n_embd]


def attend_cached(q, k, v, keys, values, mask, start):  # [n_batch, heads, n_q, d], ... -> [n_batch, heads, n_q, d]
    """cached_attention for some of the heads: their new keys and values k, v ([n_batch, heads, n_seq, d]) into
    their cache (keys, values: [n_batch, heads, n_max, d]) at columns start.., then their queries' attention
    over columns 0..start + n_seq."""
    end = start + k.shape[2]
    keys[:, :, start:end] = k  # into the preallocated buffer: no concatenation copy
    values[:, :, start:end] = v
    # many new positions (a prompt): attention_in_blocks, which skips the keys the causal mask hides
    attend = attention if q.shape[2] == 1 else attention_in_blocks
    return attend(q, keys[:, :, :end], values[:, :, :end], mask)


def block_step(x, mlp, attn, ln_1, ln_2, n_head, mask, cache, start, n_out=None):  # [n_batch, n_seq, n_embd] -> same
    """model.transformer_block with cached_attention in place of mha's attention. Many new positions at once (a
    prompt) run on every core in two kinds of bands (in_bands): bands of positions for everything that treats
    each position on its own (layer norms, products, gelu), bands of heads for attention. A decoding step's one
    position per row is too little to share and runs in one piece.

    n_out: compute only the newest n_out positions' outputs ([n_batch, n_out, n_embd]; None: all n_seq), while
    every position's key and value still goes into the cache. The others' outputs feed only the next block, so
    the last block needs only the positions its caller reads: the newest one, for a prompt's first token."""
    n_batch, n_seq, n_embd = x.shape
    qkv = in_bands(normed_linear, x, axis=1, out=np.empty((n_batch, n_seq, 3 * n_embd), np.float32), ln=ln_1,
                   layer=attn["c_attn"])  # [n_batch, n_seq, 3*n_embd]
    attended = cached_attention(qkv, n_head, mask, cache, start, n_out)  # [n_batch, n_out, n_embd]
    x = x if n_out is None else x[:, -n_out:]  # [n_batch, n_out, n_embd]
    return in_bands(after_attention, x, attended, axis=1, out=np.empty(x.shape, np.float32),
                    c_proj=attn["c_proj"], ln_2=ln_2, mlp=mlp)


def normed_linear(x, ln, layer):  # [..., n_embd] -> [..., n_out]: the attention's input, c_attn(ln_1(x))
    return linear(layer_norm(x, **ln), **layer)


def after_attention(x, attended, c_proj, ln_2, mlp):  # [..., n_embd] each -> [..., n_embd]
    """The rest of model.transformer_block once attention has run: c_proj and the residual, then the MLP
    (model.ffn, looked up in model.py so that a patched gelu reaches the decoder, or for many positions its
    twin ffn_in_stretches) and its residual."""
    x = x + linear(attended, **c_proj)
    normed = layer_norm(x, **ln_2)
    many = normed.size > STRETCH_BYTES // 4 and layers_unchanged()  # (a learner's patched layers: theirs run)
    return x + (ffn_in_stretches if many else model.ffn)(normed, **mlp)


# Bytes of c_fc's output that gelu takes at a time in ffn_in_stretches: with gelu's temporaries, well within a
# core's own cache (2 MB of L2 on the machines of docs/performance.md)
STRETCH_BYTES = 768 << 10


def ffn_in_stretches(x, c_fc, c_proj):  # [..., n_embd] -> [..., n_embd]
    """model.ffn for many positions at once (a band of a prompt's), with c_fc's bias and gelu taken a stretch of
    rows at a time. Why: for many positions c_fc's output ([n, 4*n_embd]) is megabytes, and gelu's formula is
    nine NumPy operations, each reading and writing all of it: out to the shared L3 and back nine times over.
    A stretch of rows stays in the core's own cache through all nine. The same numbers as model.ffn: the
    product is one, and the bias and gelu treat each number on its own. model.gelu is the one called, so a
    patched gelu is followed."""
    a = x.reshape(-1, x.shape[-1]) @ c_fc["w"]  # [n_rows, 4*n_embd], without the bias yet
    rows = max(1, STRETCH_BYTES // a[0].nbytes)
    for i in range(0, len(a), rows):
        stretch = a[i : i + rows]  # a view: the stretch is changed in place
        stretch += c_fc["b"]
        stretch[...] = model.gelu(stretch)
    return linear(a, **c_proj).reshape(x.shape)  # [n_rows, 4*n_embd] -> [..., n_embd]


M_TOP_PAD, M_MMAP_THRESHOLD = -2, -3  # glibc's malloc.h: mallopt's parameters
MALLOC_TOP_PAD = 128 << 20  # more than a 1,024-position prompt's largest layer makes at once at 1558M
_freed_memory_kept = False


def keep_freed_memory():
    """Ask the C library (glibc's malloc, on Linux; elsewhere nothing is done) to keep up to MALLOC_TOP_PAD bytes
    of freed memory for the process's next arrays instead of handing it back to the system at once.

    Why: a long prompt's layers make and drop arrays of megabytes each ([n_seq, 4*n_embd] and the like); by
    default glibc returns such memory when they are freed and the next array gets fresh pages, each costing the
    kernel a fault and zeroing (a noticeable part of a long prefill: docs/performance.md). Kept, the same pages
    serve the next layer. The setting is the whole process's (malloc's own), made once, and only by long runs."""
    global _freed_memory_kept
    if _freed_memory_kept or not sys.platform.startswith("linux"):
        return
    _freed_memory_kept = True
    try:
        libc = ctypes.CDLL(None)
        # arrays under 32 MB from the heap (glibc's largest threshold; its own moving one stops moving once set)
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(M_TOP_PAD, MALLOC_TOP_PAD)
    except (OSError, AttributeError):  # a C library without mallopt: it keeps or returns memory by its own rules
        pass


# ------------------------------------------------------------------------ weights
class DecodingWeights:
    """GPT-2's params as decoding reads them. Build once, pass to many generate calls.

    Decoding reads every weight once per token, so how fast the matrix-vector products read the
    weights is how fast the model runs. With OpenBLAS two of them read faster in the other memory
    order (bench/bench_generate.py measures the whole): the output head `x @ wte.T` with wte.T
    stored row-major, and the MLP's c_proj stored column-major for a single row (a batch of rows
    is faster row-major, as loaded). Copying a matrix takes a noticeable moment, so the copies are
    made by the first run of at least RELAYOUT_MIN_STEPS positions, kept here, and used by every
    later run, long or short. They go when this object goes. Changing `params` in place afterwards
    is not seen. When the compiled kernel is loaded (gpt2_numpy/compiled_matvec.py; asked for in the
    background by the first run of RELAYOUT_MIN_STEPS positions), such runs of up to KERNEL_MAX_ROWS rows may go
    through it instead, every matrix copied once into the order it reads fastest, [n_out, n_in] (wte is
    already): a few rows (a batch, or speculative decoding's drafted tokens) in one pass over the weights, where
    NumPy's product of a few rows reads them several times, and one row usually faster than OpenBLAS. Usually:
    on some machines OpenBLAS streams them faster, so the first long run after the kernel arrives times one
    decoding step both ways (weight_pass_seconds) and keeps the faster for every later run.

    folder, the checkpoint's: the kernel's float32 copies are kept beside it instead (``<weights>.f32rows``,
    gpt2_numpy/rows_cache.py), made by the first long run and mapped by every later one, in this process or
    the next: no copying, the weights in memory once. So that the `gpt2` command, one process a run, decodes on
    the kernel from its first run, the run that makes the rows waits for the kernel while it loads from disk
    (under a second); a later one of one sequence starts at once on NumPy's products over the rows, and its
    decoder takes the kernel from the step after it arrives (KVDecoder, kernel_is_coming), as does one that
    began, the rows there, while the kernel was being compiled.

    dtype="bf16" keeps the matrices in 16 bits instead (:mod:`gpt2_numpy.half`, with numba installed): about
    twice as fast, logits rounded; folder keeps the converted matrices beside the checkpoint.
    """

    def __init__(self, params, *, dtype="f32", folder=None):
        self.params = as_float32(params)  # no copy of arrays that are float32 already
        self.n_vocab, self.n_embd = self.params["wte"].shape
        self.n_ctx = self.params["wpe"].shape[0]
        self.head = self.params["wte"].T  # [n_embd, n_vocab], a view until a long run copies it
        self.blocks_in_order = {}  # "C"/"F" -> the blocks with mlp c_proj w stored in that order
        self.dtype = dtype
        self.folder = folder  # the checkpoint's: the kernel's float32 rows are kept beside it (f32_kernel_rows)
        self.rows_checked = False  # whether the folder was found able to keep them (keeps_rows_beside_checkpoint)
        self.f32_rows = None  # those rows, by name: None not looked for yet, False none current beside it
        if dtype != "f32":  # 16-bit matrices, multiplied by a compiled kernel (gpt2_numpy/half.py)
            from . import half

            if half.missing_extra(dtype):
                raise ValueError(half.missing_extra(dtype))
            self.params, self.head, blocks = half.decoding_weights(self.params, folder=folder)
            self.blocks_in_order = {"C": blocks, "F": blocks}  # stored as the kernel reads them, for any run
        self.kernel_blocks_and_head = None  # the weights wrapped for the compiled kernel, once it is here
        self.kernel_is_slower = False  # measured so on this machine: runs stay on NumPy's products
        # a single sequence's compiled steps read each matrix (and the head) in matvec_kernel's 8 streams, or in
        # address order (row_in_order): which is faster depends on the machine, so the first long run times both
        self.reads_in_order = False
        self.reading_order_chosen = False

    def for_run(self, n_batch, n_new):
        """(blocks, head) for a run of n_batch rows and n_new new tokens. A long run (RELAYOUT_MIN_STEPS
        positions) asks for the compiled kernel in the background (a short one would end before a first
        compile does, and only share the cores with it) and, once it is loaded, copies the matrices into the
        kernel's order; without it, copies two matrices into the order NumPy reads faster. The copies are kept
        for every later run, long or short."""
        long_run = n_batch * n_new >= RELAYOUT_MIN_STEPS and self.dtype == "f32"
        if long_run:
            compiled_matvec.start_loading()
            # mapped from disk, not copied: worth the kernel's load, unless one row's NumPy products can read the
            # rows already there meanwhile (the decoder takes the kernel when it arrives: kernel_is_coming)
            if self.keeps_rows_beside_checkpoint() and not (n_batch == 1 and self.current_f32_rows() is not None):
                compiled_matvec.wait_if_loading()
        if n_batch <= KERNEL_MAX_ROWS and self.takes_kernel(long_run):
            blocks_and_head = self.kernel_blocks_and_head
        else:
            blocks_and_head = self.numpy_weights(n_batch, long_run)
        if n_batch == 1 and n_new >= RELAYOUT_MIN_STEPS:
            self.choose_reading_order(*blocks_and_head)
        return blocks_and_head

    def kernel_is_coming(self, n_batch, n_new, head):
        """Whether a run that for_run gave NumPy's products (`head` not the kernel's) should ask for_run again once
        the compiled kernel has loaded: a long run of a few rows, the kernel wanted but not loaded yet and not
        measured slower here, and its rows already beside the checkpoint (taking it then copies nothing). Its
        first tokens come without waiting for the kernel's load."""
        return (n_batch <= KERNEL_MAX_ROWS and n_batch * n_new >= RELAYOUT_MIN_STEPS and self.dtype == "f32"
                and not isinstance(head, KernelMatrix) and not self.kernel_is_slower and compiled_matvec.is_wanted()
                and self.current_f32_rows() is not None)

    def choose_reading_order(self, blocks, head):
        """Whether compiled steps read the matrices and the head in address order (matvec_kernel.row_in_order)
        rather than in 8 streams: measured once, on the first long run whose blocks the compiled step reads (the
        kernel's float32 copies, or bf16), three pairs of steps, address order kept only if it was faster in two."""
        if self.reading_order_chosen or not kernel_reads_rows(blocks, head):
            return
        in_order_faster = 0
        for _ in range(3):  # in pairs, as takes_kernel: the memory's speed drifts from one second to the next
            blas_threads.stop_idle_threads()  # NumPy's products may have run just before
            streams_seconds, in_order_seconds = kernel_pass_seconds_each_order(blocks, head)
            in_order_faster += in_order_seconds < streams_seconds
        self.reads_in_order, self.reading_order_chosen = in_order_faster >= 2, True
        blas_threads.let_compiled_threads_sleep()  # a prompt's products may come next

    def takes_kernel(self, long_run):
        """Whether runs of a few rows go through the compiled kernel: once it is loaded and a long run comes,
        if a decoding step through these weights is faster through it than through NumPy's products (measured
        once: three pairs of steps, the kernel kept unless NumPy was faster in two; $GPT2_COMPILED_MATVEC=1
        skips the measuring). The kernel is timed in the reading order it will take: if that is not chosen yet,
        both orders each time, which chooses it too (the faster in two of three). The slower side's copies go."""
        if self.kernel_blocks_and_head is not None:
            return True
        kernel = compiled_matvec.kernel() if self.dtype == "f32" else None
        if kernel is None or not long_run or self.kernel_is_slower:
            return False
        rows = self.f32_kernel_rows()
        if rows is None:  # every block matrix copied, in memory (no folder to keep them beside): seconds from 355M
            said_if_large("arranging the weights as the compiled kernel reads them, in memory",
                          sum(w.nbytes for w in self.f32_matrices().values()))
        wrapped = with_kernel(self.params, kernel, rows)
        if not compiled_matvec.is_forced():
            # NumPy's side as its long runs read it: its copies, or with the kernel's rows at hand, those
            numpy_blocks, numpy_head = self.numpy_weights(1, long_run=True)
            # in pairs, a pass each way: on a shared machine the memory's speed drifts by tens of percent from
            # one second to the next, which would favour whichever side ran in the faster moment
            numpy_faster = in_order_faster = 0
            for _ in range(3):
                # after NumPy's products OpenBLAS's idle threads spin for a while on the cores the kernel's threads
                # need, which would time OpenBLAS's leftovers, not the kernel (decoding's compiled steps end them)
                blas_threads.stop_idle_threads()
                if self.reading_order_chosen:
                    kernel_seconds = weight_pass_seconds(*wrapped, in_order=self.reads_in_order)
                else:
                    streams_seconds, in_order_seconds = kernel_pass_seconds_each_order(*wrapped)
                    in_order_faster += in_order_seconds < streams_seconds
                    kernel_seconds = min(streams_seconds, in_order_seconds)
                numpy_faster += weight_pass_seconds(numpy_blocks, numpy_head) < kernel_seconds
            blas_threads.let_compiled_threads_sleep()  # a prompt's products may come next
            if not self.reading_order_chosen:
                self.reads_in_order, self.reading_order_chosen = in_order_faster >= 2, True
            if numpy_faster >= 2:
                self.kernel_is_slower = True
                return False
        self.kernel_blocks_and_head = wrapped
        self.head, self.blocks_in_order = self.params["wte"].T, {}  # NumPy's copies, unused from now on
        return True

    def keeps_rows_beside_checkpoint(self):
        """Whether the kernel's float32 rows come from beside the checkpoint (f32_kernel_rows): the file there is
        current, or the folder can take it. A folder where neither holds is forgotten, so that its runs go as
        without one (the kernel not awaited, its copies in memory), and no run tries to write there in vain."""
        if self.folder is None or self.rows_checked:
            return self.folder is not None
        from . import rows_cache

        self.rows_checked = True
        if self.current_f32_rows() is None and not rows_cache.can_keep(self.folder, F32_ROWS_KIND):
            self.folder = None
        return self.folder is not None

    def current_f32_rows(self):
        """The kernel's float32 rows, by name, if this object has them: mapped from beside the checkpoint where a
        long run (an earlier one, or this object's first) made them from the checkpoint as it is now; else None.
        Nothing is made or written here (f32_kernel_rows makes them)."""
        if self.f32_rows is None and self.folder is not None and self.dtype == "f32":
            from . import rows_cache

            try:
                path, stamp = rows_cache.cache_path(self.folder, F32_ROWS_KIND), rows_cache.source_stamp(self.folder)
            except OSError:  # a folder without the checkpoint's files (params made elsewhere): nothing beside them
                self.f32_rows = False
            else:
                self.f32_rows = rows_cache.read(path, F32_ROWS_MAGIC, np.float32, stamp, list(self.f32_matrices())) \
                    or False
        return self.f32_rows or None

    def f32_matrices(self):  # name -> each block's weight matrix [n_in, n_out], in half.matrix_names' order
        from . import half

        return {name: w for name, w in half.named_matrices(self.params).items() if name != "wte"}

    def f32_kernel_rows(self):
        """Every block's matrices as the kernel reads them, [n_out, n_in] float32, by name (half.matrix_names):
        mapped from the file beside the checkpoint (``<weights>.f32rows``, gpt2_numpy/rows_cache.py; made there
        the first time), if this object was given the checkpoint's folder; else None (with_kernel copies them in
        memory, for this object only)."""
        if not self.keeps_rows_beside_checkpoint():
            return None
        if self.current_f32_rows() is None:
            from . import rows_cache

            matrices = self.f32_matrices()
            self.f32_rows = rows_cache.cached(self.folder, F32_ROWS_KIND, F32_ROWS_MAGIC, np.float32,
                                              {name: w.shape[::-1] for name, w in matrices.items()},
                                              lambda name: copy_in_order(matrices[name], "F").T,
                                              making="arranging the weights as the compiled kernel reads them",
                                              again="arranges them again")
        return self.f32_rows

    def numpy_weights(self, n_batch, long_run):
        """(blocks, head) for NumPy's products; a long run first copies two matrices into the order NumPy
        reads faster for n_batch rows (kept for later runs). One row's products read the kernel's rows instead
        where an earlier long run left them beside the checkpoint (numpy_weights_from_rows: faster, and nothing
        copied), a short run's too."""
        if n_batch == 1 and self.current_f32_rows() is not None:
            return numpy_weights_from_rows(self.params, self.current_f32_rows())
        order = "F" if n_batch == 1 else "C"  # mlp c_proj: column-major for one row, else row-major
        if long_run:
            # (1558M: 2.3 GB copied, seconds: said off a terminal, as the kernel's copies are)
            to_copy = [] if self.head.flags.c_contiguous else [self.head]
            if order not in self.blocks_in_order:
                to_copy += [block["mlp"]["c_proj"]["w"] for block in self.params["blocks"]
                            if not block["mlp"]["c_proj"]["w"].flags[order + "_CONTIGUOUS"]]
            said_if_large("arranging two weight matrices as NumPy's products read them faster, in memory",
                          sum(w.nbytes for w in to_copy))
            if not self.head.flags.c_contiguous:
                self.head = copy_in_order(self.params["wte"], "F").T  # column-major wte = row-major wte.T
            if order not in self.blocks_in_order:
                self.blocks_in_order[order] = [with_mlp_proj_in_order(b, order) for b in self.params["blocks"]]
        return self.blocks_in_order.get(order, self.params["blocks"]), self.head


class KernelMatrix:
    """A weight matrix whose product with a few rows runs on the compiled kernel (gpt2_numpy.matvec_kernel),
    reading the matrix as it is stored, with both cores.

    model.linear's `rows @ w` reaches it as it is: NumPy hands `@` over to this object (__array_ufunc__ = None
    makes ndarray's operators return NotImplemented, so Python calls __rmatmul__). More than KERNEL_MAX_ROWS
    rows go to NumPy's product. `transposed`: the array is stored [n_out, n_in] (wte, for the output head).
    """

    __array_ufunc__ = None

    def __init__(self, array, kernel, *, transposed=False):
        self.array = np.ascontiguousarray(array)  # no copy: weights are C-contiguous as loaded
        self.kernel, self.transposed = kernel, transposed
        self.rows = self.array if transposed else None  # [n_out, n_in], as step_kernel reads a block's matrices
        self.shape = array.shape[::-1] if transposed else array.shape  # [n_in, n_out], as model.linear reads

    def __rmatmul__(self, rows):  # [n_rows, n_in] @ [n_in, n_out] -> [n_rows, n_out]
        if rows.ndim == 2 and rows.shape[0] <= KERNEL_MAX_ROWS:
            multiply = self.kernel.times_transposed if self.transposed else self.kernel.times
            return multiply(rows, self.array)
        return rows @ (self.array.T if self.transposed else self.array)


def with_kernel(params, kernel, rows=None):
    """(blocks, head): every block's matrices, and the output head x @ wte.T, behind KernelMatrix. rows: each
    block matrix stored [n_out, n_in] by name (DecodingWeights.f32_kernel_rows), else each is copied so here."""
    def wrapped(name, layer):  # {"w", "b"} -> the same with w wrapped
        # stored [n_out, n_in] (w's column-major copy, seen transposed): each output one dot product over a
        # contiguous row, which the kernel streams faster than w's rows as loaded (docs/performance.md)
        w_rows = rows[name] if rows is not None else copy_in_order(layer["w"], "F").T
        return {**layer, "w": KernelMatrix(w_rows, kernel, transposed=True)}

    blocks = [{**block, **{part: {layer: wrapped(f"blocks/{i}/{part}/{layer}", block[part][layer])
                                  for layer in block[part]} for part in ("attn", "mlp")}}
              for i, block in enumerate(params["blocks"])]
    return blocks, KernelMatrix(params["wte"], kernel, transposed=True)


def numpy_weights_from_rows(params, rows):
    """(blocks, head) for NumPy's products of one row, every block matrix read from the kernel's rows (by name,
    [n_out, n_in]) seen transposed, the head as loaded (wte.T): so timed, NumPy reads no weight the kernel's
    decoding does not (the checkpoint's own block matrices stay unread, out of memory), each in the order it
    reads fastest for one row: 0.66-0.87x the time of the matrices as loaded (774M's, docs/performance.md)."""
    blocks = [{**block, **{part: {layer: {**block[part][layer], "w": rows[f"blocks/{i}/{part}/{layer}"].T}
                                  for layer in block[part]} for part in ("attn", "mlp")}}
              for i, block in enumerate(params["blocks"])]
    return blocks, params["wte"].T


def kernel_pass_seconds_each_order(blocks, head):
    """weight_pass_seconds of the compiled step in 8 streams, then in address order: (streams, in order)."""
    return weight_pass_seconds(blocks, head), weight_pass_seconds(blocks, head, in_order=True)


def weight_pass_seconds(blocks, head, in_order=False):
    """The time of one decoding step for one row through these weights, at one cached position: the first blocks
    (timed_blocks), then the output head. Weights the compiled kernel reads run as a single sequence's decoding
    runs them, in one compiled call (step_kernel; `in_order`: their matrices and the head read in address order,
    else in 8 streams); blocks for NumPy's products through block_step, their layer norms, attention and gelu as
    NumPy calls. Each way with all its costs: the weights' streaming, which a step's time mostly is, and the work
    around it, which NumPy's many small calls make larger."""
    n_embd = head.shape[0]
    blocks = blocks[:timed_blocks(len(blocks), n_embd)]
    x = np.ones((1, 1, n_embd), np.float32)  # [n_batch, n_seq, n_embd]
    ln_f = {"g": np.ones(n_embd, np.float32), "b": np.zeros(n_embd, np.float32)}
    compiled = compiled_step_arguments(blocks, head, ln_f)
    if compiled is not None:
        from . import step_kernel

        caches = np.zeros((len(blocks), 2, 1, 1, n_embd), np.float32)  # [n_layer, 2, n_head, n_max, d]: 1 head
        start = time.perf_counter()
        step_kernel.decoding_step(x[0, 0], compiled, caches, 0, 1, in_order)  # -> [1, n_vocab]
        return time.perf_counter() - start
    cache = np.zeros((2, 1, 1, 1, n_embd), np.float32)  # keys, values [n_batch, n_head, n_max, d]: 1 head, 1 position
    mask = np.zeros((1, 1, 1, 1), np.float32)  # [n_batch, 1, n_seq, n_cached]: the one position sees itself
    start = time.perf_counter()
    for block in blocks:
        block_step(x, **block, n_head=1, mask=mask, cache=tuple(cache), start=0)
    x[0] @ head  # [1, n_vocab]
    return time.perf_counter() - start


def timed_blocks(n_layer, n_embd):
    """How many of the first blocks a timed pass goes through: those holding TIMED_BLOCK_BYTES of float32 weights
    (12 n_embd² each), at least one: all of 124M's 12, 10 of 355M's 24, 6 of 774M's 36, 4 of 1558M's 48."""
    return max(1, min(n_layer, TIMED_BLOCK_BYTES // (48 * n_embd * n_embd)))


def compiled_step_arguments(blocks, head, ln_f):
    """step_kernel's arguments for a single sequence's decoding step, if every weight matrix in `blocks` is one a
    compiled kernel reads (kernel_reads_rows); else None."""
    if not kernel_reads_rows(blocks, head):
        return None
    from . import step_kernel

    return step_kernel.decoding_arguments(blocks, ln_f, head.rows, lambda w: w.rows)


def kernel_reads_rows(blocks, head):
    """Whether every weight matrix in `blocks`, and the head, is one a compiled kernel reads: it has `rows`,
    [n_out, n_in] (a KernelMatrix, or half.Bf16Matrix)."""
    matrices = [layer["w"] for block in blocks for part in ("attn", "mlp") for layer in block[part].values()]
    return all(getattr(w, "rows", None) is not None for w in [*matrices, head])


def with_mlp_proj_in_order(block, order):
    """A block whose mlp c_proj weight is stored in `order` (the same array if it already is)."""
    w = block["mlp"]["c_proj"]["w"]  # [4*n_embd, n_embd]
    if not w.flags[order + "_CONTIGUOUS"]:
        w = copy_in_order(w, order)
    return {**block, "mlp": {**block["mlp"], "c_proj": {**block["mlp"]["c_proj"], "w": w}}}


def copy_in_order(array, order, block=256):  # [n, m] -> [n, m] float32, stored in `order`
    """A copy stored in `order`, made in slabs that fit in the CPU cache: a one-shot transposing
    copy writes to memory in an order that misses the cache on nearly every write."""
    out = np.empty(array.shape, dtype=np.float32, order=order)
    along_rows = order == "F"  # slabs of whole rows for a row-major source, else of columns
    for i in range(0, array.shape[0 if along_rows else 1], block):
        slab = np.s_[i : i + block] if along_rows else np.s_[:, i : i + block]
        out[slab] = array[slab]
    return out


# ------------------------------------------------------------------------ decoder
class KVDecoder:
    """A batch of prompts run through GPT-2 with a key/value cache.

    Prompts are left-padded to a common length; each row keeps its own positions
    (0, 1, ... from its first real token) and padding is masked out of attention, so a
    row's logits do not depend on the other rows. prefill() runs the prompts and fills
    the cache; each decode() then runs one new position per row. Both return the logits
    of the newest position, [n_batch, n_vocab].

    params: picoGPT's params tree, or a DecodingWeights built from one.
    """

    def __init__(self, prompts, params, n_head, n_tokens_to_generate):
        weights = params if isinstance(params, DecodingWeights) else DecodingWeights(params)
        lengths = [len(p) for p in prompts]
        if not prompts or min(lengths) == 0:
            raise ValueError("every prompt needs at least one token (e.g. [50256], <|endoftext|>)")
        n_new = model.count_of_new_tokens(n_tokens_to_generate)
        longest, n_batch = max(lengths), len(prompts)
        check_fits_context(longest, n_new, weights.n_ctx)
        n_max = longest + n_new  # the cache holds exactly what is needed
        self.tokens = np.zeros((n_batch, longest), dtype=np.int64)  # left-padded with token 0
        self.is_real = np.zeros((n_batch, n_max), dtype=bool)  # False at padding columns
        for row, prompt in enumerate(prompts):
            self.tokens[row, longest - len(prompt) :] = prompt  # copies: callers' lists untouched
            self.is_real[row, longest - len(prompt) :] = True
        if self.tokens.min() < 0 or self.tokens.max() >= weights.n_vocab:
            raise ValueError(f"token ids must be in [0, {weights.n_vocab})")
        self.is_real[:, longest:] = True  # generated tokens are real
        self.lengths = np.array(lengths)  # [n_batch]: position of each row's next token
        self.n_head = n_head
        self.weights = weights
        self.blocks, self.head = weights.for_run(n_batch, n_new)
        self.n_new = n_new
        self.kernel_is_coming = weights.kernel_is_coming(n_batch, n_new, self.head)  # (take_kernel_if_here)
        # every layer's keys and values in one array, [n_layer, 2, n_batch, n_head, n_max, d]
        self.cache = np.empty((len(self.blocks), 2, n_batch, n_head, n_max, weights.n_embd // n_head), np.float32)
        self.caches = [(keys, values) for keys, values in self.cache]  # each [n_batch, n_head, n_max, d]
        self.cache_bytes = kv_cache_bytes(len(self.blocks), weights.n_embd, n_max, n_batch)  # bounded by n_ctx
        self.start = 0  # number of cache columns filled
        self.compiled_step = self._compiled_step()
        # OpenBLAS's idle threads may be spinning: anything before this decoder's first compiled step may have run
        # NumPy's products (this decoder's prompt, or other work in the process), and so may a pass of it after one
        self.blas_threads_may_spin = True

    def _compiled_step(self):
        """A single sequence whose matrices the compiled kernel reads decodes each token in one compiled call:
        step_kernel's arguments for it, else None."""
        if self.tokens.shape[0] != 1 or not layers_unchanged():
            return None
        return compiled_step_arguments(self.blocks, self.head, self.weights.params["ln_f"])

    def _take_kernel_if_here(self):
        """A long run begun on NumPy's products, the kernel still loading, goes on through it from the step after
        it arrives (DecodingWeights.for_run decides again, timing it once): the same tokens, the cache as it is."""
        if self.kernel_is_coming and compiled_matvec.kernel() is not None:
            self.kernel_is_coming = False
            self.blocks, self.head = self.weights.for_run(self.tokens.shape[0], self.n_new)
            self.compiled_step = self._compiled_step()
            self.blas_threads_may_spin = True

    def _forward(self, tokens, positions, every_position=False):  # [n_batch, n_seq] each -> [n_batch, n_vocab]
        """The newest position's logits, or with every_position each new position's: [n_batch, n_seq, n_vocab]."""
        # a prompt that runs in bands: its few products outside them (the head's) on one BLAS thread too, as the
        # bands', so that no idle BLAS thread is left spinning on a core when the next prompt's bands start
        in_bands_only = bands.cuts_into_bands(tokens.size * self.weights.n_embd, tokens.shape[1])  # as block_step's
        with blas_threads.one_thread() if in_bands_only else contextlib.nullcontext():
            x = self._run_blocks(tokens, positions, None if every_position else 1)  # [n_batch, n_seq or 1, n_embd]
            x = layer_norm(x if every_position else x[:, -1], **self.weights.params["ln_f"])  # [.., (n_seq,) n_embd]
            # one 2-D product, as model.linear: a 3-D x @ head runs without BLAS (several times slower)
            logits = x.reshape(-1, x.shape[-1]) @ self.head  # [n_rows, n_embd] @ [n_embd, n_vocab] -> [n_rows, n_vocab]
        return logits.reshape(*x.shape[:-1], -1)  # [n_batch, (n_seq,) n_vocab]

    def _run_blocks(self, tokens, positions, n_out=None):  # [n_batch, n_seq] each -> [n_batch, n_out, n_embd]
        """The new positions through every block, their keys and values into the cache (before ln_f). n_out: the
        last block computes only the newest n_out positions' states, the ones the caller reads (None: all)."""
        n_seq, start, p = tokens.shape[1], self.start, self.weights.params
        if tokens.size >= MANY_POSITIONS:
            keep_freed_memory()
        padding = np.where(self.is_real[:, : start + n_seq], np.float32(0), MASKED)  # [n_batch, n_k]
        mask = causal_mask(n_seq, start) + padding[:, None, None, :]  # [n_batch, 1, n_seq, n_k]
        x = p["wte"][tokens] + p["wpe"][positions]  # [n_batch, n_seq] -> [n_batch, n_seq, n_embd]
        last = len(self.blocks) - 1
        for i, (block, cache) in enumerate(zip(self.blocks, self.caches)):  # n_layer x
            x = block_step(x, **block, n_head=self.n_head, mask=mask, cache=cache, start=start,
                           n_out=n_out if i == last else None)
        self.start += n_seq
        self.blas_threads_may_spin |= n_seq > KERNEL_MAX_ROWS  # (fewer rows went to the kernel, if it is here)
        return x

    def _prompt_positions(self):  # -> [n_batch, longest]: each row counts from its first real token
        return np.maximum(np.cumsum(self.is_real[:, : self.tokens.shape[1]], axis=1) - 1, 0)

    def prefill(self):
        return self._forward(self.tokens, self._prompt_positions())  # [n_batch, longest] -> [n_batch, n_vocab]

    def prefill_states(self, n_last=None):  # -> [n_batch, n_last or longest, n_embd]
        """prefill() for callers that want every prompt position, not only the newest: each position's
        final state (after ln_f), whose product with wte.T is that position's logits; with n_last, only the
        newest n_last positions' (the last block computes no others). Scoring reads them, and computes the
        logits only of the positions it scores (scoring.py). Padding columns hold states of padding. The
        cache is filled as by prefill(), so decode() may follow."""
        longest = self.tokens.shape[1]
        if n_last is not None and not 1 <= n_last <= longest:
            raise ValueError(f"n_last counts prompt positions: 1 to {longest} here, or None for all; got {n_last}")
        x = self._run_blocks(self.tokens, self._prompt_positions(), n_last)  # [n_batch, n_last or longest, n_embd]
        return layer_norm(x, **self.weights.params["ln_f"])

    def decode(self, new_tokens):  # one id per row -> [n_batch, n_vocab]
        if self.start >= self.is_real.shape[1]:
            raise ValueError("KV cache is full: create the decoder with more n_tokens_to_generate")
        new_tokens = np.asarray(new_tokens, np.int64).reshape(-1)
        if new_tokens.shape[0] != self.lengths.shape[0]:
            raise ValueError(f"decode takes one token id per row: {self.lengths.shape[0]} rows, "
                             f"got {new_tokens.shape[0]}")
        if new_tokens.min() < 0 or new_tokens.max() >= self.weights.n_vocab:
            raise ValueError(f"token ids must be in [0, {self.weights.n_vocab})")
        self._take_kernel_if_here()
        if self.compiled_step is not None:
            logits = self._decode_compiled(int(new_tokens[0]))
        else:
            logits = self._forward(new_tokens[:, None], self.lengths[:, None])
        self.lengths = self.lengths + 1
        return logits

    def _decode_compiled(self, token):  # -> [1, n_vocab]
        """decode() of one sequence in one compiled call (gpt2_numpy/step_kernel.py: the same layers as block_step
        for every block, then ln_f and the head, without Python between them); the same logits to float32
        rounding."""
        from . import step_kernel  # (numba is loaded: a compiled step exists only once a kernel is)

        if self.blas_threads_may_spin:  # OpenBLAS's idle threads would take the cores from numba's for a while
            blas_threads.stop_idle_threads()
            self.blas_threads_may_spin = False
        p = self.weights.params
        x = np.array(p["wte"][token] + p["wpe"][self.start], np.float32)  # [n_embd]: no padding in one sequence
        logits = step_kernel.decoding_step(x, self.compiled_step, self.cache[:, :, 0], self.start, self.n_head,
                                           self.weights.reads_in_order)  # [1, n_vocab]
        self.start += 1
        return logits

    def extend(self, new_tokens):  # [n_batch, n_seq] ids -> [n_batch, n_seq, n_vocab]
        """decode() for several new positions per row in one pass over the weights, returning every one's
        logits: what speculative decoding verifies its drafted tokens with (speculative.py)."""
        new_tokens = np.asarray(new_tokens, np.int64)  # [n_batch, n_seq]
        n_seq = new_tokens.shape[1]
        if self.start + n_seq > self.is_real.shape[1]:
            raise ValueError(f"KV cache holds {self.is_real.shape[1] - self.start} more positions, not {n_seq}: "
                             "create the decoder with more n_tokens_to_generate")
        positions = self.lengths[:, None] + np.arange(n_seq)  # [n_batch, n_seq]
        self._take_kernel_if_here()
        logits = self._forward(new_tokens, positions, every_position=True)
        self.lengths = self.lengths + n_seq
        return logits

    def rollback(self, n):
        """Forget the n newest positions, as if they had never been run: the next decode() or extend() writes
        over their cache columns. Only generated positions can go (the prompts stay)."""
        n_generated = self.start - self.tokens.shape[1]
        if not 0 <= n <= n_generated:
            raise ValueError(f"can roll back 0 to {n_generated} generated positions, not {n}")
        self.start -= n
        self.lengths = self.lengths - n


def kv_cache_bytes(n_layer, n_embd, n_positions, n_batch=1):
    """Bytes of the key/value cache a KVDecoder holds: per layer a float32 key and value for every position
    of every row. It is allocated once, for exactly the prompt's and the new tokens' positions, which
    check_fits_context bounds by n_ctx: at most n_layer x 2 x n_ctx x n_embd x 4 bytes a row (1558M: 629 MB).

    >>> kv_cache_bytes(n_layer=12, n_embd=768, n_positions=1024) / 2**20  # 124M at its full context, in MiB
    72.0
    """
    return n_layer * 2 * n_batch * n_positions * n_embd * 4


# ----------------------------------------------------------------------- sampling
def sampling_temperature(temperature=None, top_k=None, top_p=None, seed=None):
    """The temperature a run uses, after checking the sampling options.

    temperature=None (the default) means greedy unless top_k, top_p or seed is given: those ask
    for sampling, which then happens at temperature 1 (as HF's do_sample). temperature=0 is
    greedy, where top_k, top_p and seed would do nothing, so giving them is an error.
    """
    if top_k is not None and (int(top_k) != top_k or top_k < 1):
        raise ValueError(f"top_k must be a whole number >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    asks_to_sample = [name for name, value in (("top_k", top_k), ("top_p", top_p), ("seed", seed))
                      if value is not None]
    if temperature is None:
        return 1.0 if asks_to_sample else 0.0
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy), got {temperature}")
    if temperature == 0 and asks_to_sample:
        raise ValueError(f"temperature 0 means greedy decoding, which {' and '.join(asks_to_sample)} would "
                         f"not change; leave out the temperature (sampling at 1) or give one above 0")
    return float(temperature)


def sample(logits, temperature=0.0, top_k=None, top_p=None, rng=None):  # [n_vocab] -> token id
    """Greedy at temperature 0; otherwise sample among the top_k tokens, then among the
    smallest most-likely set whose probability reaches top_p. Excluded tokens are not
    candidates at all, so they can never be drawn."""
    if temperature == 0:
        return int(np.argmax(logits))
    rng = np.random.default_rng() if rng is None else rng
    return draw(*sampling_distribution(logits, temperature, top_k, top_p), rng)


def sampling_distribution(logits, temperature, top_k=None, top_p=None):  # [n_vocab] -> [n_cand], [n_cand]
    """(candidates, probs): the token ids sample() may draw at temperature > 0 and their probabilities,
    softmax(logits / temperature) over the top_k best, then over the top_p nucleus of those."""
    logits = logits.astype(np.float64)  # [n_vocab]
    # the best first subtracted (softmax's own step, taken before the division): a temperature near 0 (1e-310)
    # then sends the others to -inf, greedy's limit, where logits / temperature would overflow to inf - inf = NaN
    with np.errstate(over="ignore"):
        logits = (logits - logits.max()) / temperature
    candidates = np.arange(len(logits))  # token ids still allowed
    if top_k is not None and top_k < len(logits):
        candidates = np.argpartition(-logits, int(top_k) - 1)[: int(top_k)]  # the k best, unordered
    probs = softmax(logits[candidates])  # [n_cand]
    if top_p is not None and top_p < 1:
        candidates, probs = nucleus(candidates, probs, top_p)
    return candidates, probs


def draw(candidates, probs, rng):  # [n_cand] each -> token id
    """One of candidates, with probability probs (which may sum to a little more or less than 1)."""
    cdf = np.cumsum(probs)  # [n_cand]; inverse-CDF draw, as rng.choice(p=...) but cheaper
    pick = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return int(candidates[min(pick, len(candidates) - 1)])


def nucleus(candidates, probs, top_p):  # [n_cand] each -> [n_keep] each
    """The smallest set of most likely candidates whose probability reaches top_p, with its
    probabilities renormalised. Sorts only the best k (k = 256, 1024, ...) until they hold
    top_p, instead of all 50257: the nucleus is usually small, a full sort is not."""
    k = min(256, len(probs))
    while True:
        best = np.argpartition(-probs, k - 1)[:k] if k < len(probs) else np.arange(k)  # [k]
        best = best[np.argsort(-probs[best], kind="stable")]  # most likely first
        mass = np.cumsum(probs[best])  # [k]
        if mass[-1] >= top_p or k == len(probs):
            keep = best[: min(int(np.searchsorted(mass, top_p)) + 1, k)]  # first to reach top_p
            return candidates[keep], probs[keep] / probs[keep].sum()
        k = min(4 * k, len(probs))


# --------------------------------------------------------------------- generation
def iter_generate_batch(prompts, params, n_head, n_tokens_to_generate, *, temperature=None,
                        top_k=None, top_p=None, seed=None, stop_at_eot=False):
    """Yield, per step, a list with one new token id per prompt (None once a row stopped).

    A row stops after <|endoftext|> when stop_at_eot (that EOT is still yielded)."""
    temperature = sampling_temperature(temperature, top_k, top_p, seed)
    decoder = KVDecoder(prompts, params, n_head, n_tokens_to_generate)
    rng = np.random.default_rng(seed)
    stopped = np.zeros(len(prompts), dtype=bool)
    for step in range(int(n_tokens_to_generate)):
        logits = decoder.prefill() if step == 0 else decoder.decode(new)  # [n_batch, n_vocab]
        new = [sample(row_logits, temperature, top_k, top_p, rng) for row_logits in logits]
        yield [None if done else token for token, done in zip(new, stopped)]
        if stop_at_eot:
            stopped |= np.array(new) == EOT_ID
            if stopped.all():
                return


def generate_batch(prompts, params, n_head, n_tokens_to_generate, **options):
    """New token ids for each prompt (list of lists), all prompts computed together.

    Options as for generate(). Greedy results equal running each prompt on its own.
    Sampling draws rows in order from one generator, so a seeded batch is reproducible.
    """
    outputs = [[] for _ in prompts]
    for step_ids in iter_generate_batch(prompts, params, n_head, n_tokens_to_generate, **options):
        for out, token in zip(outputs, step_ids):
            if token is not None and not (options.get("stop_at_eot") and token == EOT_ID):
                out.append(token)
    return outputs


def generate(inputs, params, n_head, n_tokens_to_generate, *, temperature=None, top_k=None,
             top_p=None, seed=None, stop_at_eot=False):
    """The ids of up to n_tokens_to_generate new tokens after `inputs` (not modified).

    params: picoGPT's params tree, or a DecodingWeights to reuse its weight copies across calls.
    Greedy by default. Sampling (softmax(logits / temperature) after top_k/top_p filtering,
    reproducible for a given seed) happens at a temperature above 0, or at temperature 1 when
    top_k, top_p or seed is given without one (see sampling_temperature). With stop_at_eot,
    generation ends at <|endoftext|> (50256), which is not included in the result.
    """
    return generate_batch([inputs], params, n_head, n_tokens_to_generate, temperature=temperature,
                          top_k=top_k, top_p=top_p, seed=seed, stop_at_eot=stop_at_eot)[0]
