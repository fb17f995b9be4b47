"""The decoder's compiled matrix-vector kernel (gpt2_numpy/matvec_kernel.py), against NumPy's products, and the
decoder on it against the full recompute (model.py) and HF transformers.

The suite keeps the kernel off (conftest: GPT2_COMPILED_MATVEC=0) so that every other test decodes on NumPy
whatever arrived in the background; these tests turn it on and wait for it. Compiling it (once per suite run, in
the suite's fresh cache folder) takes 10-40 s, so this file is in the exhaustive tier (conftest.EXHAUSTIVE_FILES)."""
import json
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FUZZ_SHARE, REPO
from gpt2_numpy import compiled_matvec, hfmodel, kvcache, model
from gpt2_numpy.checkpoints import load_encoder_hparams_and_params
from test_gpt2 import (N_EMBD, N_HEAD, PROMPT, assert_close_to_oracle, hf, hf_logits,  # noqa: F401 (fixtures)
                       params, random_params, run_main)

pytest.importorskip("numba")


@pytest.fixture(scope="module")
def kernel():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPT2_COMPILED_MATVEC", "1")
        loaded = compiled_matvec.wait_until_loaded()
        assert loaded is not None, compiled_matvec.status()
        yield loaded


@pytest.fixture
def kernel_on(kernel, monkeypatch):
    monkeypatch.setenv("GPT2_COMPILED_MATVEC", "1")
    return kernel


def read_only(array):
    view = array.view()
    view.flags.writeable = False
    return view


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(n_rows=st.integers(1, kvcache.KERNEL_MAX_ROWS), n_in=st.integers(1, 70), n_out=st.integers(1, 70),
       seed=st.integers(0, 2**32 - 1), writeable=st.booleans())
def test_the_products_equal_numpys(kernel, n_rows, n_in, n_out, seed, writeable):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_rows, n_in), dtype=np.float32)
    w = rng.standard_normal((n_in, n_out), dtype=np.float32)
    wt = np.ascontiguousarray(w.T)
    if not writeable:  # as mapped from a checkpoint
        w, wt = read_only(w), read_only(wt)
    expected = x.astype(np.float64) @ w.astype(np.float64)
    bound = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64)) + 1e-30
    # in_order: one row read in address order (matvec_kernel.row_in_order); more rows, in 8 streams as without it
    for ours in (kernel.times(x, w), kernel.times_transposed(x, wt), kernel.times_transposed(x, wt, in_order=True)):
        assert ours.dtype == np.float32 and ours.shape == (n_rows, n_out)
        assert (np.abs(ours - expected) <= bound).all()


@pytest.mark.parametrize("dtype", ["float32", "bf16"])
# rows of whole spans of 128, or ending in a shorter span: of 104 numbers, 64 (1558M's rows of 1,600) or 2
@pytest.mark.parametrize("n_in", [1024, 1000, 1600, 2050])
# pieces (16 a thread) of 1 row, of fewer rows than streams, and of 10, 11 or 32 rows: 8 streams of 1, 2 or 4 rows
@pytest.mark.parametrize("n_out", [1, 5, 203, 300, 1003])
def test_the_products_equal_numpys_on_rows_short_and_long(kernel, dtype, n_in, n_out):
    """The loop reads 8 rows at once, one from each eighth of a thread's piece: whatever the piece's length (the
    last streams running past the piece's end, pieces of fewer rows than streams) and whatever a row's last span,
    the product is NumPy's."""
    from gpt2_numpy import half
    rng = np.random.default_rng(n_in + n_out)
    wt = rng.standard_normal((n_out, n_in), dtype=np.float32)
    if dtype == "bf16":
        wt = half.to_bf16(wt)
    widened = half.from_bf16(wt) if dtype == "bf16" else wt
    x = rng.standard_normal((3, n_in), dtype=np.float32)
    expected = x.astype(np.float64) @ widened.T.astype(np.float64)
    bound = 1e-5 * (np.abs(x).astype(np.float64) @ np.abs(widened).T.astype(np.float64))
    assert (np.abs(kernel.times_transposed(x, wt) - expected) <= bound).all()
    # one row read in address order, the other order (matvec_kernel.row_in_order): float32 rows four side by side,
    # a piece's last 1-3 rows (of 7, 10, 32 or fewer rows) one at a time, as every bf16 row
    assert (np.abs(kernel.times_transposed(x[:1], wt, in_order=True) - expected[:1]) <= bound[:1]).all()


def test_a_kernel_matrix_is_what_model_linear_multiplies(kernel):
    """linear's `rows @ w` reaches the kernel for a few rows, NumPy's product for many; both give x @ w + b."""
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((40, 24), dtype=np.float32), rng.standard_normal(24, dtype=np.float32)
    wrapped = kvcache.KernelMatrix(w, kernel)
    for n_rows in (1, kvcache.KERNEL_MAX_ROWS, kvcache.KERNEL_MAX_ROWS + 1, 50):
        x = rng.standard_normal((2, n_rows, 40), dtype=np.float32)[0]  # rows 2-D, as linear passes them
        np.testing.assert_allclose(model.linear(x, wrapped, b), x @ w + b, rtol=1e-5, atol=1e-5)
    head = kvcache.KernelMatrix(w.T.copy(), kernel, transposed=True)  # stored [n_out, n_in], as wte
    assert head.shape == (40, 24)
    np.testing.assert_allclose(x[:1] @ head, x[:1] @ w, rtol=1e-5, atol=1e-5)


def test_decoding_weights_use_the_kernel_only_when_it_is_on(kernel, monkeypatch):
    params = random_params(n_vocab=500)
    monkeypatch.setenv("GPT2_COMPILED_MATVEC", "0")
    blocks, head = kvcache.DecodingWeights(params).for_run(1, 4)
    assert isinstance(head, np.ndarray) and isinstance(blocks[0]["mlp"]["c_fc"]["w"], np.ndarray)
    monkeypatch.setenv("GPT2_COMPILED_MATVEC", "1")
    weights = kvcache.DecodingWeights(params)
    assert isinstance(weights.for_run(1, 4)[1], np.ndarray)  # a short run: not worth the copies
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert isinstance(head, kvcache.KernelMatrix) and np.shares_memory(head.array, params["wte"])  # no copy
    assert all(isinstance(layer["w"], kvcache.KernelMatrix) and layer["w"].transposed
               and layer["w"].array.flags.c_contiguous and (layer["w"].array == original["w"].T).all()
               for block, block_params in zip(blocks, params["blocks"]) for part in ("attn", "mlp")
               for layer, original in zip(block[part].values(), block_params[part].values()))
    assert weights.for_run(3, 4)[1] is head  # built once, reused by later runs, short ones too
    assert isinstance(weights.for_run(kvcache.KERNEL_MAX_ROWS + 1, 4)[1], np.ndarray)  # big batches: NumPy


def kernel_weights(params):
    """DecodingWeights whose runs go through the kernel (a long run made its copies; later runs reuse them)."""
    weights = kvcache.DecodingWeights(params)
    assert isinstance(weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)[1], kvcache.KernelMatrix)
    return weights


def test_kernel_decoding_equals_the_full_recompute(kernel_on, params):
    weights = kernel_weights(params)
    assert kvcache.generate(PROMPT, weights, N_HEAD, 10) == model.generate_reference(PROMPT, params, N_HEAD, 10)
    decoder = kvcache.KVDecoder([PROMPT, PROMPT[3:]], weights, N_HEAD, 2)
    decoder.prefill()
    logits = decoder.decode([7, 9])
    for row, prompt in ((0, PROMPT), (1, PROMPT[3:])):
        full = model.gpt2(prompt + [[7, 9][row]], **params, n_head=N_HEAD)[-1]
        np.testing.assert_allclose(logits[row], full, atol=2e-5 * np.abs(full).max(), rtol=0)


def test_compiled_steps_stop_openblas_idle_threads_first_and_after_numpys_products(kernel_on, params, monkeypatch):
    """OpenBLAS's idle threads spin for a while after NumPy's products, on the cores the compiled steps need: a
    decoder's first compiled step stops them (blas_threads.stop_idle_threads: whatever ran before it, its own prompt
    or other work, may have used them), and so does the first step after a pass of more than KERNEL_MAX_ROWS
    positions (NumPy's products); no other step does."""
    from gpt2_numpy import blas_threads

    weights = kernel_weights(params)  # (its measuring, which ends them too, done first)
    stops = []
    monkeypatch.setattr(blas_threads, "stop_idle_threads", lambda: stops.append(1) or True)
    decoder = kvcache.KVDecoder([PROMPT], weights, N_HEAD, 2 * kvcache.KERNEL_MAX_ROWS + 6)
    assert decoder.compiled_step is not None
    decoder.prefill()
    assert stops == []
    decoder.decode([7])
    decoder.decode([9])
    assert stops == [1]
    decoder.extend([[5] * kvcache.KERNEL_MAX_ROWS])  # on the kernel
    decoder.decode([7])
    assert stops == [1]
    decoder.extend([[5] * (kvcache.KERNEL_MAX_ROWS + 1)])  # on NumPy's products
    assert stops == [1]
    decoder.decode([7])
    decoder.decode([9])
    assert stops == [1, 1]


def test_kernel_decoding_matches_hf(kernel_on, params, hf):
    decoder = kvcache.KVDecoder([PROMPT[:-1]], kernel_weights(params), N_HEAD, 1)
    decoder.prefill()
    assert_close_to_oracle(decoder.decode([PROMPT[-1]])[0], hf_logits(hf, PROMPT)[-1])


# which side was faster in each of the three pairs: the kernel is kept unless NumPy won two
@pytest.mark.parametrize("kernel_wins", [(True, True, True), (True, False, True), (False, True, False),
                                         (False, False, False)])
def test_unforced_the_kernel_is_taken_only_if_measured_faster(kernel, params, monkeypatch, kernel_wins):
    """Without GPT2_COMPILED_MATVEC=1 the first long run times a pass over the weights both ways, in three
    alternated pairs, and keeps the faster (by the pairs' majority) for every later run; the other side's copies
    go."""
    monkeypatch.delenv("GPT2_COMPILED_MATVEC")
    kernel_faster = sum(kernel_wins) >= 2
    timed = []

    def pass_seconds(blocks, head, in_order=False):
        through_kernel = isinstance(head, kvcache.KernelMatrix)
        timed.append(through_kernel)
        if through_kernel:
            return 1.5
        return 2.0 if kernel_wins[timed.count(False) - 1] else 1.0  # this pair's NumPy pass

    monkeypatch.setattr(kvcache, "weight_pass_seconds", pass_seconds)
    weights = kvcache.DecodingWeights(params)
    weights.reading_order_chosen = True  # (the kernel's reading order, timed after this choice: the next test)
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert timed == [True, False] * 3  # in pairs, both ways, three times
    assert isinstance(head, kvcache.KernelMatrix) == kernel_faster
    if kernel_faster:  # NumPy's copies dropped
        assert weights.blocks_in_order == {} and np.shares_memory(weights.head, params["wte"])
    else:
        assert not weights.head.flags.f_contiguous  # NumPy's own copy of the head, row-major wte.T
    assert weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)[1] is head and len(timed) == 6  # measured once
    assert kvcache.generate(PROMPT, weights, N_HEAD, 6) == model.generate_reference(PROMPT, params, N_HEAD, 6)


@pytest.mark.parametrize("numpy_wins, in_order_wins", [((False, True, False), (True, True, False)),
                                                      ((True, True, False), (False, True, False))])
def test_the_kernel_is_timed_against_numpy_in_its_faster_reading_order(kernel, params, monkeypatch, numpy_wins,
                                                                        in_order_wins):
    """Unforced, with the reading order not chosen yet, each of the three rounds times the kernel in both orders
    and NumPy once: NumPy must beat the kernel's faster order (here 1.0 s or 1.4 s) to be kept, in two rounds of
    three, and the kernel's rounds choose its reading order as they go (not timed again)."""
    monkeypatch.delenv("GPT2_COMPILED_MATVEC")
    timed = []

    def pass_seconds(blocks, head, in_order=False):
        if not isinstance(head, kvcache.KernelMatrix):
            timed.append("numpy")
            return 1.2 if numpy_wins[timed.count("numpy") - 1] else 3.0
        timed.append("in order" if in_order else "streams")
        return (1.0 if in_order_wins[timed.count("in order") - 1] else 2.0) if in_order else 1.4

    monkeypatch.setattr(kvcache, "weight_pass_seconds", pass_seconds)
    monkeypatch.setattr(kvcache.blas_threads, "let_compiled_threads_sleep", lambda: timed.append("settled"))
    weights = kvcache.DecodingWeights(params)
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    # numba's threads left to fall asleep before the run's prompt (blas_threads.let_compiled_threads_sleep)
    assert timed == ["streams", "in order", "numpy"] * 3 + ["settled"]
    assert weights.reading_order_chosen and weights.reads_in_order == (sum(in_order_wins) >= 2)
    numpy_kept = sum(numpy < min(1.4, 1.0 if in_order else 2.0) for numpy, in_order in
                     zip((1.2 if win else 3.0 for win in numpy_wins), in_order_wins)) >= 2
    assert isinstance(head, kvcache.KernelMatrix) != numpy_kept
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert len(timed) == 10  # measured once


@pytest.mark.parametrize("in_order_wins", [(True, True, False), (False, True, False)])
def test_the_first_long_run_times_both_reading_orders_and_keeps_the_faster(kernel_on, params, monkeypatch,
                                                                            in_order_wins):
    """A single sequence's compiled steps read the matrices in 8 streams or row by row: the first long run on weights
    the compiled step reads times a step both ways, in three alternated pairs, and keeps row by row only if it won
    two; later runs reuse the choice, and decoding through either equals the full recompute."""
    weights = kernel_weights(params)  # (its long run chose already, for real: choose again under the stub)
    weights.reading_order_chosen = False
    timed = []

    def pass_seconds(blocks, head, in_order=False):
        timed.append(in_order)
        return (1.0 if in_order_wins[timed.count(True) - 1] else 2.0) if in_order else 1.5

    monkeypatch.setattr(kvcache, "weight_pass_seconds", pass_seconds)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert timed == [False, True] * 3
    assert weights.reads_in_order == (sum(in_order_wins) >= 2)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert len(timed) == 6  # measured once
    assert kvcache.generate(PROMPT, weights, N_HEAD, 6) == model.generate_reference(PROMPT, params, N_HEAD, 6)


def test_numpys_weights_are_not_timed_for_a_reading_order(params, monkeypatch):
    monkeypatch.setenv("GPT2_COMPILED_MATVEC", "0")
    monkeypatch.setattr(kvcache, "weight_pass_seconds", lambda *args, **kwargs: pytest.fail("timed"))
    weights = kvcache.DecodingWeights(params)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert not weights.reads_in_order


def test_a_pass_over_the_weights_takes_both_kinds_of_weights(kernel):
    params = random_params(n_vocab=500)
    weights = kvcache.DecodingWeights(params)
    assert kvcache.weight_pass_seconds(*weights.numpy_weights(1, long_run=True)) > 0
    assert kvcache.weight_pass_seconds(*kvcache.with_kernel(params, kernel)) > 0


def test_a_timed_pass_goes_through_the_first_blocks_holding_the_timed_bytes(params, monkeypatch):
    """Timing the kernel against NumPy reads a sample of the blocks, all alike, not the whole model nine times:
    at GPT-2's sizes all of 124M's 12 blocks, 10 of 355M's, 6 of 774M's, 4 of 1558M's; at least one."""
    assert [kvcache.timed_blocks(n_layer, n_embd) for n_layer, n_embd in
            ((12, 768), (24, 1024), (36, 1280), (48, 1600))] == [12, 10, 6, 4]
    assert kvcache.timed_blocks(48, 10_000) == 1
    n_embd = params["wte"].shape[1]
    monkeypatch.setattr(kvcache, "TIMED_BLOCK_BYTES", 48 * n_embd * n_embd)  # one block's weights
    stepped = []
    monkeypatch.setattr(kvcache, "block_step", lambda x, **block: stepped.append(block["ln_1"]["g"]))
    weights = kvcache.DecodingWeights(params)
    assert len(params["blocks"]) > 1
    kvcache.weight_pass_seconds(*weights.numpy_weights(1, long_run=True))
    assert len(stepped) == 1 and stepped[0] is params["blocks"][0]["ln_1"]["g"]


# ------------------------------------------------------------------ a single sequence's step, compiled
@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(n_head=st.integers(1, 4), head_size=st.integers(1, 40), n_layer=st.integers(1, 3), start=st.integers(0, 20),
       seed=st.integers(0, 2**32 - 1), in_order=st.booleans())
def test_a_compiled_decoding_step_equals_block_steps(kernel, n_head, head_size, n_layer, start, seed, in_order):
    """step_kernel.decoding_step (one position, one sequence: every block, ln_f, the head) against its readable twin,
    kvcache.block_step for each block, then model.layer_norm and the head's product: the same logits and the same
    keys and values written at column `start`, to float32 rounding; no other column touched."""
    from gpt2_numpy import step_kernel

    rng = np.random.default_rng(seed)
    n_embd = n_head * head_size
    params = random_params(seed=seed, n_vocab=7, n_ctx=4, n_embd=n_embd, n_layer=n_layer)
    x = rng.standard_normal((1, 1, n_embd)).astype(np.float32)
    # each layer's keys, values [n_layer, 2, n_batch, n_head, n_max, d], as a decoder holds them
    cache = rng.standard_normal((n_layer, 2, 1, n_head, start + 2, head_size)).astype(np.float32)
    theirs_cache, ours_cache = cache.copy(), cache.copy()
    mask = np.zeros((1, 1, 1, start + 1), np.float32)  # one sequence: no padding
    state = x
    for block, layer_cache in zip(params["blocks"], theirs_cache):
        state = kvcache.block_step(state, **block, n_head=n_head, mask=mask, cache=tuple(layer_cache), start=start)
    theirs = model.layer_norm(state[0], **params["ln_f"]) @ params["wte"].T  # [1, n_vocab]
    arguments = step_kernel.decoding_arguments(params["blocks"], params["ln_f"], params["wte"],
                                               lambda w: np.ascontiguousarray(w.T))  # [n_out, n_in], as decoding
    ours = step_kernel.decoding_step(x[0, 0].copy(), arguments, ours_cache[:, :, 0], start, n_head, in_order)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5 * max(1.0, np.abs(theirs).max()))
    np.testing.assert_allclose(ours_cache, theirs_cache, rtol=0, atol=1e-5 * max(1.0, np.abs(theirs_cache).max()))
    untouched = np.arange(start + 2) != start
    assert np.array_equal(ours_cache[..., untouched, :], cache[..., untouched, :])


def test_the_compiled_exp_is_nps_exp_to_float32_rounding(kernel):
    """step_kernel.exp_float32 (gelu's and attention's exp, in vector instructions) against NumPy's exp in float64:
    within 2 parts in 10^7 over float32's range, 0 and infinity past its ends, NaN kept."""
    from numba import njit

    from gpt2_numpy import step_kernel

    @njit
    def exps(z):
        out = np.empty_like(z)
        for i in range(z.shape[0]):
            out[i] = step_kernel.exp_float32(z[i])
        return out

    z = np.concatenate([np.linspace(-86.5, 88.72, 200_001), [0.0, -0.0, 1e-30, -1e-30, 88.7, -86.4]]).astype(np.float32)
    theirs = np.exp(z.astype(np.float64))
    assert (np.abs(exps(z) - theirs) <= 2e-7 * theirs).all()
    assert exps(np.float32([0])).tolist() == [1.0]
    past = exps(np.float32([-87, -1e30, -np.inf, 89, 1e30, np.inf]))
    assert past.tolist() == [0, 0, 0, np.inf, np.inf, np.inf]
    assert np.isnan(exps(np.float32([np.nan]))).all()


def test_the_compiled_gelu_is_model_gelu(kernel):
    """step_kernel.gelu computes 0.5 * v * (1 + tanh(u)) as v / (1 + exp(-2u)): the same function, to float32
    rounding, across GPT-2's range of activations and past it (0, both tails, overflowing v**3, infinities)."""
    from gpt2_numpy import step_kernel

    v = np.concatenate([np.linspace(-12, 12, 4001), [0.0, -0.0, 1e-30, -1e-30, 40.0, -40.0, 1e13, -1e13],
                        [np.inf, -np.inf]]).astype(np.float32)
    ours = v.copy()
    step_kernel.gelu(ours)
    with np.errstate(over="ignore", invalid="ignore"):
        theirs = model.gelu(v.astype(np.float64))
    finite = np.isfinite(theirs)
    # float32 rounding: of the result, and of (1 + tanh(u)) beside 1 in model.gelu (|v| * 6e-8 where gelu is tiny)
    bound = 1e-6 * np.abs(theirs[finite]) + 6e-8 * np.abs(v[finite])
    assert (np.abs(ours[finite] - theirs[finite]) <= bound).all()
    assert ours[v == np.inf] == np.inf and np.isnan(ours[v == -np.inf]) == np.isnan(theirs[v == -np.inf])


@pytest.mark.parametrize("in_order", [False, True])
def test_a_single_sequence_decodes_each_token_in_one_compiled_call(kernel_on, params, monkeypatch, in_order):
    """One sequence on the kernel's weights decodes through step_kernel, one call per token (every block, ln_f and
    the head), and its logits equal the full recompute's, also around extend() and rollback() (speculative
    decoding's verifying), which run on kvcache's own layers and share the cache. A batch of two sequences does
    not take it."""
    from gpt2_numpy import step_kernel

    weights = kernel_weights(params)
    weights.reads_in_order = in_order  # either reading order of the matrices
    calls = []
    decoding_step = step_kernel.decoding_step
    monkeypatch.setattr(step_kernel, "decoding_step", lambda *args: calls.append(1) or decoding_step(*args))
    decoder = kvcache.KVDecoder([PROMPT], weights, N_HEAD, 6)
    assert decoder.compiled_step is not None
    decoder.prefill()
    seen = list(PROMPT)

    def check(logits):
        full = model.gpt2(seen, **params, n_head=N_HEAD)[-1]
        np.testing.assert_allclose(logits[0], full, atol=2e-5 * np.abs(full).max(), rtol=0)

    for token in (7, 9):
        seen.append(token)
        check(decoder.decode([token]))
    decoder.extend([[11, 13]])
    decoder.rollback(1)  # 13 is forgotten: the next decode writes over its column
    seen.append(11)
    for token in (5, 3):
        seen.append(token)
        check(decoder.decode([token]))
    assert len(calls) == 4  # four decoded tokens
    assert kvcache.KVDecoder([PROMPT, PROMPT[2:]], weights, N_HEAD, 2).compiled_step is None


def test_a_patched_layer_keeps_decoding_on_model_pys_layers(kernel_on, params, monkeypatch):
    """The compiled step mirrors model.py's layers as they were: with model.gelu (or kvcache's layer_norm) changed,
    a single sequence decodes on the layers themselves, and its logits follow the change as the full recompute's."""
    weights = kernel_weights(params)
    assert kvcache.KVDecoder([PROMPT], weights, N_HEAD, 1).compiled_step is not None

    def doubled_gelu(x):
        return 2 * x

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "gelu", doubled_gelu)
        decoder = kvcache.KVDecoder([PROMPT[:-1]], weights, N_HEAD, 1)
        assert decoder.compiled_step is None
        decoder.prefill()
        full = model.gpt2(PROMPT, **params, n_head=N_HEAD)[-1]
        np.testing.assert_allclose(decoder.decode([PROMPT[-1]])[0], full, atol=2e-5 * np.abs(full).max(), rtol=0)
    monkeypatch.setattr(kvcache, "layer_norm", lambda x, g, b: x)
    assert kvcache.KVDecoder([PROMPT], weights, N_HEAD, 1).compiled_step is None


# ------------------------------------------------------------------ the kernel's rows, kept beside the checkpoint
@pytest.fixture
def model_folder(tmp_path):
    """A 2-layer model in Hugging Face's layout, with room in its context for a long run."""
    n_ctx = kvcache.RELAYOUT_MIN_STEPS + 16
    params = random_params(seed=3, n_vocab=300, n_ctx=n_ctx)
    hparams = {"n_vocab": 300, "n_ctx": n_ctx, "n_embd": N_EMBD, "n_head": N_HEAD, "n_layer": 2}
    vocab = json.loads((REPO / "tokenizer" / "data" / "encoder.json").read_text(encoding="utf-8"))
    hfmodel.save_hf_folder(tmp_path / "model", hparams, params, vocab, [])
    return tmp_path / "model"


def test_a_long_run_keeps_the_kernels_rows_beside_the_checkpoint_and_later_ones_map_them(kernel_on, model_folder,
                                                                                          capsys):
    _, loaded = hfmodel.load_hf_folder(model_folder)
    rows_file = model_folder / "model.safetensors.f32rows"
    weights = kvcache.DecodingWeights(loaded, folder=model_folder)
    weights.for_run(1, 4)
    assert not rows_file.exists()  # a short run: not worth the kernel
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert "arranging the weights as the compiled kernel reads them once" in capsys.readouterr().err
    written = rows_file.stat().st_mtime_ns
    later = kvcache.DecodingWeights(loaded, folder=model_folder)
    later_blocks, _ = later.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert capsys.readouterr().err == "" and rows_file.stat().st_mtime_ns == written  # mapped, not made again
    for i, block in enumerate(later_blocks):
        for part in ("attn", "mlp"):
            for layer, wrapped in block[part].items():
                original = loaded["blocks"][i][part][layer]["w"]
                assert mapped_file(wrapped["w"].array) == rows_file
                assert np.array_equal(wrapped["w"].array, original.T)
    prompt = [5, 17, 250, 3]
    expected = model.generate_reference(prompt, loaded, N_HEAD, 12)
    assert kvcache.generate(prompt, weights, N_HEAD, 12) == kvcache.generate(prompt, later, N_HEAD, 12) == expected


def test_a_short_run_reads_the_rows_an_earlier_long_run_left_with_numpys_products(kernel, model_folder, capsys):
    """A run too short for the kernel reads its matrices through NumPy's products as they are: the checkpoint's
    before any long run, the rows beside it once one made them (one row's products read them faster, and
    nothing is copied); a short run never makes them. The tokens are the full recompute's either way."""
    _, loaded = hfmodel.load_hf_folder(model_folder)
    rows_file = model_folder / "model.safetensors.f32rows"
    prompt = [5, 17, 250, 3]
    expected = model.generate_reference(prompt, loaded, N_HEAD, 6)
    weights = kvcache.DecodingWeights(loaded, folder=model_folder)
    blocks, _ = weights.for_run(1, 6)
    assert mapped_file(blocks[0]["mlp"]["c_fc"]["w"]) == model_folder / "model.safetensors"
    assert not rows_file.exists()
    assert kvcache.generate(prompt, weights, N_HEAD, 6) == expected
    with pytest.MonkeyPatch.context() as patch:  # the long run that makes the rows (on the kernel, untimed)
        patch.setenv("GPT2_COMPILED_MATVEC", "1")
        kvcache.DecodingWeights(loaded, folder=model_folder).for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert rows_file.is_file() and "arranging" in capsys.readouterr().err
    later = kvcache.DecodingWeights(loaded, folder=model_folder)
    blocks, head = later.for_run(1, 6)
    assert not isinstance(head, kvcache.KernelMatrix)
    for i, block in enumerate(blocks):
        for part in ("attn", "mlp"):
            for layer in block[part].values():
                assert mapped_file(layer["w"]) == rows_file and not layer["w"].flags.c_contiguous
    assert kvcache.generate(prompt, later, N_HEAD, 6) == expected
    assert capsys.readouterr().err == ""


def test_a_folder_that_can_keep_no_rows_is_forgotten(kernel_on, model_folder, monkeypatch, capsys):
    """No current rows file and a folder that cannot take one: runs go as without a folder (the kernel's copies
    in memory), with nothing written or said, and no run tries again."""
    from gpt2_numpy import rows_cache

    asked = []

    def refused(folder, kind):
        asked.append(kind)
        return False

    monkeypatch.setattr(rows_cache, "can_keep", refused)
    _, loaded = hfmodel.load_hf_folder(model_folder)
    weights = kvcache.DecodingWeights(loaded, folder=model_folder)
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert weights.folder is None and asked == ["f32rows"] and weights.f32_kernel_rows() is None
    assert capsys.readouterr().err == "" and not (model_folder / "model.safetensors.f32rows").exists()
    assert all(mapped_file(layer["w"].array) is None for block in blocks for part in ("attn", "mlp")
               for layer in block[part].values())
    prompt = [5, 17, 250, 3]
    assert kvcache.generate(prompt, weights, N_HEAD, 8) == model.generate_reference(prompt, loaded, N_HEAD, 8)


def test_off_a_terminal_copying_large_weights_for_the_kernel_in_memory_says_so_at_its_start(kernel_on, model_folder,
                                                                                              monkeypatch, capsys):
    """The kernel's copies made in memory (no folder to keep them beside) take seconds from 355M up: a log is told,
    by their size (command_line.SLOW_BYTES, lowered here to the small model's block matrices), as they start."""
    from tokenizer import command_line

    _, loaded = hfmodel.load_hf_folder(model_folder)
    n_bytes = sum(layer["w"].nbytes for block in loaded["blocks"] for part in ("attn", "mlp")
                  for layer in block[part].values())
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes + 1)
    kvcache.DecodingWeights(loaded).for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    weights = kvcache.DecodingWeights(loaded)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)  # (copied once: the second run says nothing)
    assert capsys.readouterr().err == "arranging the weights as the compiled kernel reads them, in memory ...\n"


def test_a_fifo_by_the_rows_files_name_is_not_opened_and_the_folder_is_forgotten(kernel_on, model_folder, capsys):
    """A FIFO where the rows file would go (opening it to read would block): the run neither hangs nor replaces
    it, and goes as without a folder."""
    _, loaded = hfmodel.load_hf_folder(model_folder)
    fifo = model_folder / "model.safetensors.f32rows"
    os.mkfifo(fifo)
    weights = kvcache.DecodingWeights(loaded, folder=model_folder)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert weights.folder is None and capsys.readouterr().err == "" and stat.S_ISFIFO(fifo.stat().st_mode)
    prompt = [5, 17, 250, 3]
    assert kvcache.generate(prompt, weights, N_HEAD, 8) == model.generate_reference(prompt, loaded, N_HEAD, 8)


def mapped_file(array):  # the file an array's memory is mapped from, or None
    while array is not None and not isinstance(array, np.memmap):
        array = array.base
    return None if array is None else Path(array.filename)


def test_a_long_run_with_the_rows_there_starts_at_once_and_takes_the_kernel_when_it_comes(kernel_on, model_folder,
                                                                                            monkeypatch):
    """With the kernel's rows already beside the checkpoint, a long run of one sequence does not wait for the
    kernel's load: it decodes on NumPy's products over the rows, and from the step after the kernel arrives in
    compiled steps. The tokens are the full recompute's."""
    from gpt2_numpy import compiled_matvec, step_kernel  # (imports numba: inside the test, as the tests above)

    _, loaded = hfmodel.load_hf_folder(model_folder)
    kvcache.DecodingWeights(loaded, folder=model_folder).for_run(1, kvcache.RELAYOUT_MIN_STEPS)  # makes the rows
    assert (model_folder / "model.safetensors.f32rows").is_file()
    loaded_kernel, asked = compiled_matvec.kernel, []

    def arriving_late():  # still loading for the run's preparation and its first four steps
        asked.append(True)
        return loaded_kernel() if len(asked) > 5 else None

    monkeypatch.setattr(compiled_matvec, "kernel", arriving_late)
    monkeypatch.setattr(compiled_matvec, "wait_if_loading", lambda: pytest.fail("waited for the kernel"))
    steps, decoding_step = [], step_kernel.decoding_step

    def counted(x, arguments, caches, *rest, **options):  # caches [n_layer, 2, n_head, n_max, d]
        steps.append(caches.shape[3] > 1)  # a decoder's step (a timed pass choosing the reading order has 1)
        return decoding_step(x, arguments, caches, *rest, **options)

    monkeypatch.setattr(step_kernel, "decoding_step", counted)
    weights = kvcache.DecodingWeights(loaded, folder=model_folder)
    n_new, prompt = kvcache.RELAYOUT_MIN_STEPS, [5, 17, 250, 3]
    assert kvcache.generate(prompt, weights, N_HEAD, n_new) == model.generate_reference(prompt, loaded, N_HEAD, n_new)
    assert sum(steps) == n_new - 1 - 4  # the steps after the first four: one compiled call each


def test_picogpts_main_keeps_the_kernels_rows_beside_the_checkpoint_as_the_command_does(kernel_on, model_folder):
    """gpt2.main(prompt, n, model) gives its decoder the model's folder, as the gpt2 command does: a long run makes
    the rows file there, and the text is the full recompute's."""
    import gpt2

    n_new = kvcache.RELAYOUT_MIN_STEPS
    encoder, _, loaded = load_encoder_hparams_and_params(str(model_folder))
    expected = encoder.decode(model.generate_reference(encoder.encode("a b"), loaded, N_HEAD, n_new))
    assert gpt2.main("a b", n_new, str(model_folder)) == expected
    assert (model_folder / "model.safetensors.f32rows").is_file()


def test_a_long_generation_on_the_command_line_decodes_on_the_kernel_from_its_first_run(kernel_on, model_folder,
                                                                                       monkeypatch):
    """gpt2 PROMPT decodes a long run in compiled steps in its own process, the kernel's rows made beside the
    checkpoint by the first run and mapped by the next: the same text as the full recompute's."""
    from gpt2_numpy import step_kernel  # (imports numba: inside the test, as the tests above)

    steps = []
    decoding_step = step_kernel.decoding_step

    def counted(x, arguments, caches, *rest, **options):  # caches [n_layer, 2, n_head, n_max, d]
        steps.append(caches.shape[3] > 1)  # a decoder's step (a timed pass choosing the reading order has 1)
        return decoding_step(x, arguments, caches, *rest, **options)

    monkeypatch.setattr(step_kernel, "decoding_step", counted)
    n_new = kvcache.RELAYOUT_MIN_STEPS
    encoder, _, loaded = load_encoder_hparams_and_params(str(model_folder))
    ids = encoder.encode("a b")
    expected = encoder.decode(model.generate_reference(ids, loaded, N_HEAD, n_new)) + "\n"
    for run in ("first", "second"):
        steps.clear()
        status, out, err = run_main(["a b", "--model", str(model_folder), "--n_tokens_to_generate", str(n_new)])
        assert status == 0 and out == expected, err
        assert ("arranging the weights" in err) == (run == "first")
        assert sum(steps) == n_new - 1  # every token after the prompt's first: one compiled call each
    assert (model_folder / "model.safetensors.f32rows").is_file()
