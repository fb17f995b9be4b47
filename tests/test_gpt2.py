"""Tests for the model (gpt2_numpy/model.py, through the checkout's picoGPT face gpt2.py) and gpt2_numpy/kvcache.py:
logits against HF transformers, the KV-cached decoder against picoGPT's full-recompute loop (generate_reference),
batching, sampling, and the gpt2 command (gpt2_numpy/cli.py)."""
import errno
import io
import json
import os
import platform
import subprocess
import sys
import types
import warnings
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import gpt2
from gpt2_numpy import cli, kvcache, model
from tiny_checkpoint import write_tiny_checkpoint
from tokenizer.version import VERSION

ROOT = Path(__file__).resolve().parents[1]
N_VOCAB, N_CTX, N_EMBD, N_HEAD, N_LAYER = 50257, 64, 64, 4, 2


def random_params(seed=0, n_vocab=N_VOCAB, n_ctx=N_CTX, n_embd=N_EMBD, n_layer=N_LAYER, scale=0.3):
    """Random float32 weights in picoGPT's tree, large enough that logits spread (std ~ 3)."""
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm():
        return {"g": (1 + normal(n_embd)).astype(np.float32), "b": normal(n_embd)}

    def dense(nx, nf):
        return {"w": normal(nx, nf), "b": normal(nf)}

    return {
        "wte": normal(n_vocab, n_embd),
        "wpe": normal(n_ctx, n_embd),
        "blocks": [{"ln_1": norm(), "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
                    "ln_2": norm(), "mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)}}
                   for _ in range(n_layer)],
        "ln_f": norm(),
    }


def params_bytes(tree):
    """The bytes of every array in a params tree (nested dicts and lists), counted here on their own."""
    if isinstance(tree, dict):
        tree = list(tree.values())
    return sum(params_bytes(branch) for branch in tree) if isinstance(tree, list) else tree.nbytes


def hf_model(params, n_head=N_HEAD):
    """transformers' GPT2LMHeadModel with the same weights (its Conv1D stores w as [nx, nf] too)."""
    n_vocab, n_embd = params["wte"].shape
    config = GPT2Config(vocab_size=n_vocab, n_positions=params["wpe"].shape[0], n_embd=n_embd,
                        n_layer=len(params["blocks"]), n_head=n_head, activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                        attn_implementation="eager")  # HF's own attention code, not a fused kernel
    model = GPT2LMHeadModel(config).eval()
    assert model.config._attn_implementation == "eager"
    t = model.transformer

    def put(param, array):
        assert tuple(param.shape) == array.shape
        param.data.copy_(torch.from_numpy(np.array(array)))

    put(t.wte.weight, params["wte"])
    put(t.wpe.weight, params["wpe"])
    for block, theirs in zip(params["blocks"], t.h):
        for ours, norm in ((block["ln_1"], theirs.ln_1), (block["ln_2"], theirs.ln_2)):
            put(norm.weight, ours["g"])
            put(norm.bias, ours["b"])
        for ours, conv in ((block["attn"]["c_attn"], theirs.attn.c_attn), (block["attn"]["c_proj"], theirs.attn.c_proj),
                           (block["mlp"]["c_fc"], theirs.mlp.c_fc), (block["mlp"]["c_proj"], theirs.mlp.c_proj)):
            put(conv.weight, ours["w"])
            put(conv.bias, ours["b"])
    put(t.ln_f.weight, params["ln_f"]["g"])
    put(t.ln_f.bias, params["ln_f"]["b"])
    assert torch.equal(model.lm_head.weight, t.wte.weight)  # tied output embedding
    # The oracle computes in float64, so its own rounding (which can depend on torch's thread count
    # and kernels) is ~1e-15 and the comparison measures only our float32 rounding, the same every run.
    return model.double()


@pytest.fixture(scope="module")
def params():
    return random_params()


@pytest.fixture(scope="module")
def hf(params):
    return hf_model(params)


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def assert_close_to_oracle(ours, theirs):
    """float32 carries about 7 significant digits, and each logit is a long sum of products, so
    we allow an error of 1e-5 of the largest logit: ~1e-4 here, where the measured error is ~2e-5.
    A wrong formula (erf GELU for tanh GELU, a different eps, a missing bias) is off by far more."""
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= 1e-5 * np.abs(theirs).max()


PROMPT = [464, 3290, 318, 257, 1332, 286, 50256, 0, 1234, 40000, 17]


# ------------------------------------------------------------------ against HF transformers
def test_logits_match_hf(params, hf):
    ours = gpt2.gpt2(PROMPT, **params, n_head=N_HEAD)
    assert ours.shape == (len(PROMPT), N_VOCAB)
    assert ours.std() > 1.0  # the comparison means something only if logits are not ~0
    assert_close_to_oracle(ours, hf_logits(hf, PROMPT))


def test_logits_match_hf_full_context(params, hf):
    ids = list(np.random.default_rng(1).integers(0, N_VOCAB, N_CTX))
    assert_close_to_oracle(gpt2.gpt2(ids, **params, n_head=N_HEAD), hf_logits(hf, ids))


def test_the_oracle_tolerance_catches_a_wrong_formula(params, hf):
    """The bound above is tight enough to fail a plausible mistake: GELU's erf form for its tanh form."""
    def erf_gelu(x):
        return 0.5 * x * (1 + torch.erf(torch.from_numpy(x) / np.sqrt(2)).numpy())

    ids = PROMPT
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "gelu", erf_gelu)  # where the forward pass looks it up
        wrong = gpt2.gpt2(ids, **params, n_head=N_HEAD).astype(np.float32)
    with pytest.raises(AssertionError):
        assert_close_to_oracle(wrong, hf_logits(hf, ids))


def test_greedy_tokens_match_hf(params, hf):
    ids = list(PROMPT)
    for _ in range(12):  # HF, full recompute each step: independent of our cache
        ids.append(int(np.argmax(hf_logits(hf, ids)[-1])))
    assert gpt2.generate(PROMPT, params, N_HEAD, 12) == ids[len(PROMPT):]
    assert gpt2.generate_reference(PROMPT, params, N_HEAD, 12) == ids[len(PROMPT):]


def test_float64_params_are_computed_in_float32(params):
    def to64(tree):
        if isinstance(tree, dict):
            return {key: to64(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [to64(value) for value in tree]
        return tree.astype(np.float64)

    p64 = to64(params)
    logits = gpt2.gpt2(PROMPT, **p64, n_head=N_HEAD)
    assert logits.dtype == np.float32
    assert np.array_equal(logits, gpt2.gpt2(PROMPT, **params, n_head=N_HEAD))
    assert gpt2.generate(PROMPT, p64, N_HEAD, 5) == gpt2.generate(PROMPT, params, N_HEAD, 5)


def test_gelu_and_layer_norm_match_torch():
    x = np.linspace(-6, 6, 1001, dtype=np.float32)
    expected = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    assert gpt2.gelu(x).dtype == np.float32
    assert np.abs(gpt2.gelu(x) - expected).max() < 1e-6
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32) * 5 + 2
    g, b = np.full(8, 1.5, np.float32), np.full(8, -0.5, np.float32)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(g), torch.from_numpy(b), 1e-5)
    assert gpt2.layer_norm(x, g, b).dtype == np.float32
    assert np.abs(gpt2.layer_norm(x, g, b) - expected.numpy()).max() < 1e-5


def test_the_layers_take_a_batch_and_give_each_row_what_it_gives_alone(params):
    """model.py's functions take any leading axes (the decoder passes [n_batch, n_seq, n_embd]); each
    sequence of a batch comes out as it does alone, and the heads as an axis as picoGPT's list of heads."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, N_EMBD)).astype(np.float32)  # [n_batch, n_seq, n_embd]
    block = params["blocks"][0]
    for row in range(3):
        np.testing.assert_allclose(gpt2.softmax(x)[row], gpt2.softmax(x[row]), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(gpt2.layer_norm(x, **block["ln_1"])[row], gpt2.layer_norm(x[row], **block["ln_1"]),
                                   rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gpt2.linear(x, **block["attn"]["c_attn"])[row],
                                   gpt2.linear(x[row], **block["attn"]["c_attn"]), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gpt2.ffn(x, **block["mlp"])[row], gpt2.ffn(x[row], **block["mlp"]),
                                   rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(gpt2.transformer_block(x, **block, n_head=N_HEAD)[row],
                                   gpt2.transformer_block(x[row], **block, n_head=N_HEAD), rtol=1e-5, atol=1e-4)
    q, k, v = (x[0] for _ in range(3))  # [n_seq, n_embd]
    heads = model.split_heads(q, N_HEAD)  # [n_head, n_seq, d]: picoGPT's np.split, as an axis
    assert heads.shape == (N_HEAD, 5, N_EMBD // N_HEAD)
    assert all(np.array_equal(a, b) for a, b in zip(heads, np.split(q, N_HEAD, axis=-1)))
    assert np.array_equal(model.merge_heads(heads), q)  # picoGPT's np.hstack
    qkv = np.concatenate([x[0], 2 * x[0], 3 * x[0]], axis=-1)  # [n_seq, 3*n_embd]
    assert all(np.array_equal(a, b) for a, b in zip(model.split_qkv(qkv), np.split(qkv, 3, axis=-1)))
    batch = np.stack([qkv, 2 * qkv])  # [n_batch, n_seq, 3*n_embd]
    assert all(np.array_equal(a, b) for a, b in zip(model.split_qkv(batch), np.split(batch, 3, axis=-1)))
    mask = model.causal_mask(5)
    assert np.array_equal(mask, (1 - np.tri(5, dtype=np.float32)) * -1e10)  # picoGPT's mask
    together = gpt2.attention(heads, heads, heads, mask)  # [n_head, n_seq, d]
    for head in range(N_HEAD):
        np.testing.assert_allclose(together[head], gpt2.attention(heads[head], heads[head], heads[head], mask),
                                   rtol=1e-6, atol=1e-6)
    # after 3 cached positions, the 2 new ones see all 3 and those before them: the last rows of the full mask
    assert np.array_equal(model.causal_mask(2, 3), model.causal_mask(5)[3:])


def test_the_decoder_runs_model_py_functions(params):
    """kvcache.py adds the cache around model.py's layers and defines none of its own (no twins):
    the names it uses are model.py's objects, and a change to model.gelu changes the decoder's logits
    exactly as it changes the full recompute's."""
    import ast

    layers = {"gelu", "softmax", "layer_norm", "linear", "ffn", "causal_mask", "attention", "split_qkv", "split_heads",
              "merge_heads", "mha", "transformer_block", "gpt2"}
    source = Path(kvcache.__file__).read_text(encoding="utf-8")
    defined = {node.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)}
    assert defined & layers == set()
    used = [name for name in layers if hasattr(kvcache, name)]
    assert len(used) >= 7 and all(getattr(kvcache, name) is getattr(model, name) for name in used)

    def erf_gelu(x):  # a different GELU: the decoder must pick it up through model.ffn
        return (0.5 * x * (1 + torch.erf(torch.from_numpy(x) / np.sqrt(2)).numpy())).astype(np.float32)

    def decoder_logits():
        decoder = kvcache.KVDecoder([PROMPT], params, N_HEAD, 1)
        return np.stack([decoder.prefill()[0], decoder.decode([7])[0]])

    before = decoder_logits()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(model, "gelu", erf_gelu)
        patched = decoder_logits()
        full = gpt2.gpt2(PROMPT + [7], **params, n_head=N_HEAD)[-2:]
    assert np.abs(patched - before).max() > 1e-3
    np.testing.assert_allclose(patched, full, atol=2e-5, rtol=0)


# ---------------------------------------------------------- KV cache against the reference
def test_kv_cache_greedy_equals_reference(params):
    expected = gpt2.generate_reference(PROMPT, params, N_HEAD, 20)
    assert len(expected) == 20 and len(set(expected)) > 1
    assert gpt2.generate(PROMPT, params, N_HEAD, 20) == expected


def test_generate_reference_is_the_full_recompute_loop(params):
    ids = list(PROMPT)
    for _ in range(3):
        ids.append(int(np.argmax(gpt2.gpt2(ids, **params, n_head=N_HEAD)[-1])))
    assert gpt2.generate_reference(PROMPT, params, N_HEAD, 3) == ids[len(PROMPT):]
    assert gpt2.generate_reference(PROMPT, params, N_HEAD, 0) == []


def test_generate_reference_refuses_what_generate_refuses_in_the_same_words(params):
    """picoGPT's loop (README's Python block, walkthroughs 06 and 07) past the context was numpy's "index 32 is out
    of bounds for axis 0 with size 32" from deep in gpt2(), and an empty prompt "zero-size array to reduction
    operation"; now each is generate's own ValueError."""
    from gpt2_numpy.model import generate_reference

    for prompt, n_new in [(list(range(N_CTX - 3)), 4), (list(range(N_CTX + 5)), 1), ([1], N_CTX), ([], 3), ([1], -1)]:
        with pytest.raises(ValueError) as fast:
            gpt2.generate(prompt, params, N_HEAD, n_new)
        with pytest.raises(ValueError) as reference:
            generate_reference(prompt, params, N_HEAD, n_new)
        assert str(reference.value) == str(fast.value)
    assert len(generate_reference(list(range(N_CTX - 3)), params, N_HEAD, 3)) == 3  # up to the context: fine


def test_a_count_of_new_tokens_that_is_no_integer_is_refused_everywhere(params, monkeypatch):
    """n_tokens_to_generate=2.5 used to generate 2 tokens (int(2.5)) in silence, and True one; each way in now says
    the count must be an int. A NumPy integer (a count taken from an array) still counts."""
    from gpt2_numpy import speculative
    from gpt2_numpy.model import generate_reference

    calls = {
        "generate": lambda n: gpt2.generate(PROMPT, params, N_HEAD, n),
        "generate_batch": lambda n: gpt2.generate_batch([PROMPT, PROMPT[:2]], params, N_HEAD, n),
        "iter_generate_batch": lambda n: list(kvcache.iter_generate_batch([PROMPT], params, N_HEAD, n)),
        "KVDecoder": lambda n: kvcache.KVDecoder([PROMPT], params, N_HEAD, n),
        "generate_reference": lambda n: generate_reference(PROMPT, params, N_HEAD, n),
        "speculative": lambda n: speculative.generate(PROMPT, params, N_HEAD, n, speculative.PromptLookup(2)),
    }
    for name, call in calls.items():
        for bad in (2.5, 2.0, np.float32(3), "3", True, np.bool_(True), None):
            with pytest.raises(TypeError, match=r"n_tokens_to_generate must be a whole number of tokens \(an int\), "
                                                r"got "):
                call(bad)
        assert call(np.int64(2)) is not None, name
    assert gpt2.generate(PROMPT, params, N_HEAD, np.int32(3)) == gpt2.generate(PROMPT, params, N_HEAD, 3)
    assert generate_reference(PROMPT, params, N_HEAD, np.int64(3)) == gpt2.generate(PROMPT, params, N_HEAD, 3)
    monkeypatch.setattr(gpt2, "load_encoder_hparams_and_params", lambda *a: pytest.fail("loaded a model"))
    with pytest.raises(TypeError, match="got 2.5 \\(float\\)"):
        gpt2.main("hello", n_tokens_to_generate=2.5)  # before any download


def test_kv_cache_logits_equal_full_logits(params):
    n_new = 15
    new = gpt2.generate_reference(PROMPT, params, N_HEAD, n_new)
    full = gpt2.gpt2(PROMPT + new, **params, n_head=N_HEAD)  # [n_seq, n_vocab]
    decoder = kvcache.KVDecoder([PROMPT], params, N_HEAD, n_new)
    cached = [decoder.prefill()[0]] + [decoder.decode([token])[0] for token in new[:-1]]
    assert cached[0].dtype == np.float32
    np.testing.assert_allclose(np.stack(cached), full[len(PROMPT) - 1 : -1], atol=2e-5, rtol=0)


def test_generation_reaching_n_ctx_exactly_works(params):
    prompt = list(range(1, N_CTX - 5))
    assert gpt2.generate(prompt, params, N_HEAD, 5) == gpt2.generate_reference(prompt, params, N_HEAD, 5)


# -------------------------------------------------------------------------------- batching
BATCH = [[11, 22, 33], PROMPT, [7], list(range(100, 125)), [50256, 50256, 9]]


def test_batch_equals_one_by_one(params):
    batch = gpt2.generate_batch(BATCH, params, N_HEAD, 10)
    assert batch == [gpt2.generate_reference(p, params, N_HEAD, 10) for p in BATCH]
    assert len({tuple(row) for row in batch}) == len(BATCH)  # rows really differ


def test_batch_logits_equal_single_logits(params):
    batch = kvcache.KVDecoder(BATCH, params, N_HEAD, 2)
    first = batch.prefill()
    second = batch.decode([5] * len(BATCH))
    for row, prompt in enumerate(BATCH):
        single = kvcache.KVDecoder([prompt], params, N_HEAD, 2)
        np.testing.assert_allclose(first[row], single.prefill()[0], atol=2e-5, rtol=0)
        np.testing.assert_allclose(second[row], single.decode([5])[0], atol=2e-5, rtol=0)


def test_batch_of_identical_prompts_samples_independently(params):
    rows = gpt2.generate_batch([PROMPT] * 4, params, N_HEAD, 8, temperature=2.0, seed=3)
    assert len({tuple(row) for row in rows}) > 1


# -------------------------------------------------------------------------------- sampling
def test_seeded_sampling_is_reproducible_and_seeds_differ(params):
    def run(seed):
        return gpt2.generate(PROMPT, params, N_HEAD, 20, temperature=1.5, seed=seed)

    assert run(1) == run(1)
    assert run(1) != run(2)
    assert gpt2.generate_batch(BATCH, params, N_HEAD, 6, temperature=1.5, top_k=50, seed=4) == \
        gpt2.generate_batch(BATCH, params, N_HEAD, 6, temperature=1.5, top_k=50, seed=4)


def test_greedy_is_the_default(params):
    greedy = gpt2.generate_reference(PROMPT, params, N_HEAD, 10)
    assert gpt2.generate(PROMPT, params, N_HEAD, 10) == greedy
    assert gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=0) == greedy


@pytest.mark.parametrize("options", [{"top_k": 50}, {"top_p": 0.9}, {"seed": 0}, {"top_k": 50, "top_p": 0.9}])
def test_top_k_top_p_or_seed_without_temperature_sample_at_temperature_1(params, options):
    runs = {seed: gpt2.generate(PROMPT, params, N_HEAD, 10, **{"seed": seed, **options}) for seed in range(3)}
    for seed, tokens in runs.items():
        assert tokens == gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=1.0, **{"seed": seed, **options})
    assert gpt2.generate_reference(PROMPT, params, N_HEAD, 10) not in runs.values()  # really sampled
    assert kvcache.sampling_temperature(**options) == 1.0 and kvcache.sampling_temperature() == 0.0


@pytest.mark.parametrize("options", [{"top_k": 5}, {"top_p": 0.5}, {"seed": 3}])
def test_temperature_0_with_sampling_options_is_an_error(params, options):
    name = next(iter(options))
    with pytest.raises(ValueError, match=f"temperature 0 means greedy.*{name}"):
        gpt2.generate(PROMPT, params, N_HEAD, 2, temperature=0, **options)


def test_top_k_1_and_tiny_top_p_are_greedy(params):
    greedy = gpt2.generate(PROMPT, params, N_HEAD, 10)
    assert gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=1.0, top_k=1, seed=0) == greedy
    assert gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=1.0, top_p=1e-9, seed=0) == greedy


def sample_many(logits, n=3000, **options):
    rng = np.random.default_rng(0)
    return np.array([kvcache.sample(logits, rng=rng, **options) for _ in range(n)])


def test_top_k_never_samples_outside_the_k_best():
    logits = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    allowed = set(np.argsort(-logits)[:10].tolist())
    drawn = sample_many(logits, temperature=5.0, top_k=10)  # hot: outsiders would show up
    assert set(drawn.tolist()) == allowed  # only the 10 best, and every one of them


@pytest.mark.parametrize("temperature", [1e-310, 5e-324, 1e-200])
def test_a_temperature_near_0_samples_the_best_token_as_greedy_does(temperature):
    """softmax(logits / T) tends to the best token alone as T goes to 0: so it must stay at the smallest T a float
    holds, not overflow to inf - inf = NaN probabilities (which drew the last token, <|endoftext|>, every time)."""
    logits = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (nor a RuntimeWarning on stderr)
        candidates, probs = kvcache.sampling_distribution(logits, temperature, top_k=50, top_p=0.9)
        assert set(sample_many(logits, n=50, temperature=temperature).tolist()) == {int(np.argmax(logits))}
    assert candidates.tolist() == [int(np.argmax(logits))] and probs.tolist() == [1.0]


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs = np.array([0.05, 0.4, 0.02, 0.3, 0.13, 0.1])
    logits = np.log(probs).astype(np.float32)
    # sorted: 0.4, 0.3 (0.7), 0.13 (0.83), 0.1 (0.93) ... -> p=0.8 keeps {1, 3, 4}
    drawn = sample_many(logits, temperature=1.0, top_p=0.8)
    assert set(drawn.tolist()) == {1, 3, 4}
    counts = np.bincount(drawn, minlength=6) / len(drawn)
    np.testing.assert_allclose(counts[[1, 3, 4]], np.array([0.4, 0.3, 0.13]) / 0.83, atol=0.03)
    assert set(sample_many(logits, temperature=1.0, top_p=0.69).tolist()) == {1, 3}  # reaching, not passing
    assert set(sample_many(logits, temperature=1.0, top_p=0.01).tolist()) == {1}


def test_nucleus_equals_a_full_sort():
    """The partial-sort nucleus gives the same set as sorting everything, peaked or flat."""
    rng = np.random.default_rng(7)
    for spread in (0.1, 1.0, 3.0, 10.0):  # flat (nucleus of thousands) ... peaked (a few)
        logits = rng.standard_normal(50257) * spread
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        for top_p in (0.05, 0.5, 0.9, 0.999):
            order = np.argsort(-probs, kind="stable")
            n_keep = int(np.searchsorted(np.cumsum(probs[order]), top_p)) + 1
            ids, kept = kvcache.nucleus(np.arange(50257) + 1000, probs, top_p)
            assert set(ids.tolist()) == set((order[:n_keep] + 1000).tolist())
            assert abs(kept.sum() - 1) < 1e-9 and probs[order[:n_keep]].sum() >= top_p - 1e-12


def test_top_k_and_top_p_together():
    logits = np.log(np.array([0.35, 0.3, 0.2, 0.1, 0.05])).astype(np.float32)
    # top_k=3 renormalises to .41, .35, .24; top_p=0.7 then keeps the first two
    assert set(sample_many(logits, temperature=1.0, top_k=3, top_p=0.7).tolist()) == {0, 1}


def test_generated_tokens_respect_top_k_and_top_p(params):
    """End to end: every sampled token is inside the filter applied to the full logits."""
    for options in ({"top_k": 3}, {"top_p": 0.5}, {"top_k": 5, "top_p": 0.8}):
        for seed in range(2):
            new = gpt2.generate(PROMPT, params, N_HEAD, 8, temperature=3.0, seed=seed, **options)
            ids = list(PROMPT)
            for token in new:
                logits = gpt2.gpt2(ids, **params, n_head=N_HEAD)[-1].astype(np.float64) / 3.0
                order = np.argsort(-logits)
                rank = int(np.nonzero(order == token)[0][0])
                assert rank < options.get("top_k", N_VOCAB)
                if "top_p" in options:
                    kept = order[: options.get("top_k", N_VOCAB)]
                    probs = np.exp(logits[kept] - logits[kept].max())
                    probs /= probs.sum()
                    assert probs[:rank].sum() < options["top_p"] + 1e-6  # needed to reach top_p
                ids.append(token)


@pytest.mark.parametrize("options, named", [
    ({"temperature": -1}, "temperature"), ({"temperature": float("nan")}, "temperature"),
    ({"top_k": 0}, "top_k"), ({"top_k": 2.5}, "top_k"), ({"top_p": 0.0}, "top_p"), ({"top_p": 1.5}, "top_p")])
def test_bad_sampling_options_are_rejected(params, options, named):
    with pytest.raises(ValueError, match=named):
        gpt2.generate(PROMPT, params, N_HEAD, 2, **options)


# ----------------------------------------------------------------------- inputs and limits
def test_inputs_and_params_are_not_mutated(params):
    prompt, prompts = list(PROMPT), [list(p) for p in BATCH]
    arrays = (params["wte"], params["blocks"][0]["attn"]["c_attn"]["w"], params["blocks"][0]["mlp"]["c_proj"]["w"])
    before = [a.copy() for a in arrays]
    out = gpt2.generate(prompt, params, N_HEAD, 5)
    gpt2.generate_batch(prompts, params, N_HEAD, 5)
    gpt2.generate_batch([prompt] * 8, params, N_HEAD, 20)  # long enough to make the layout copies
    assert prompt == PROMPT and prompts == BATCH and len(out) == 5
    for array, copy in zip(arrays, before):
        assert np.array_equal(array, copy)


def test_numpy_and_tuple_prompts_work(params):
    expected = gpt2.generate(PROMPT, params, N_HEAD, 3)
    assert gpt2.generate(np.array(PROMPT), params, N_HEAD, 3) == expected
    assert gpt2.generate(tuple(PROMPT), params, N_HEAD, 3) == expected


def test_context_overflow_is_a_clear_value_error(params):
    prompt = list(range(N_CTX - 3))
    with pytest.raises(ValueError, match=rf"{N_CTX - 3} tokens.*=4 .*n_ctx={N_CTX}.*at most 3 new tokens"):
        gpt2.generate(prompt, params, N_HEAD, 4)
    with pytest.raises(ValueError, match="n_ctx"):
        gpt2.generate_batch([[1], prompt + [1, 2, 3, 4]], params, N_HEAD, 1)
    with pytest.raises(ValueError, match=rf"^prompt of 1 token \+ n_tokens_to_generate={N_CTX} = {N_CTX + 1} "):
        gpt2.generate([1], params, N_HEAD, N_CTX)  # one token, not "1 tokens"


@pytest.mark.parametrize("n_prompt", [N_CTX, N_CTX + 10])
def test_a_prompt_too_long_by_itself_says_so(params, n_prompt):
    with pytest.raises(ValueError) as info:
        gpt2.generate(list(range(n_prompt)), params, N_HEAD, 40)
    message = str(info.value)
    assert message.startswith("the prompt is too long") and f"{n_prompt} tokens" in message
    assert f"n_ctx={N_CTX}" in message and f"shorten the prompt to at most {N_CTX - 40} tokens" in message
    assert "at most 0 new tokens" not in message


def test_empty_prompt_and_bad_ids_are_value_errors(params):
    with pytest.raises(ValueError, match="at least one token"):
        gpt2.generate([], params, N_HEAD, 2)
    with pytest.raises(ValueError, match="token ids"):
        gpt2.generate([N_VOCAB], params, N_HEAD, 2)


def test_decode_takes_one_valid_id_per_row(params):
    decoder = kvcache.KVDecoder([PROMPT, PROMPT[2:]], params, N_HEAD, 3)
    decoder.prefill()
    with pytest.raises(ValueError, match="one token id per row: 2 rows, got 1"):
        decoder.decode([5])
    with pytest.raises(ValueError, match="token ids"):
        decoder.decode([5, N_VOCAB])
    assert decoder.decode([5, 6]).shape == (2, N_VOCAB)  # nothing was run by the refused calls


def test_zero_new_tokens(params):
    assert gpt2.generate(PROMPT, params, N_HEAD, 0) == []


def eot_params(params):
    """A copy whose every next token is <|endoftext|>: ln_f outputs a vector aligned with it."""
    p = {**params, "wte": params["wte"].copy(), "ln_f": {}}
    p["wte"][kvcache.EOT_ID] *= 4
    p["ln_f"] = {"g": np.zeros(N_EMBD, np.float32), "b": p["wte"][kvcache.EOT_ID].copy()}
    return p


def with_ids_swapped(params, a, b):
    """A copy whose ids ``a`` and ``b`` trade embeddings (tied: in and out), so it is the same model with the two
    ids renamed: whatever it gave as ``a`` it gives as ``b``, and the reverse."""
    p = {**params, "wte": params["wte"].copy()}
    p["wte"][[a, b]] = p["wte"][[b, a]]
    return p


def test_stop_at_eot(params):
    p = eot_params(params)
    assert gpt2.generate(PROMPT, p, N_HEAD, 4) == [kvcache.EOT_ID] * 4
    assert gpt2.generate(PROMPT, p, N_HEAD, 4, stop_at_eot=True) == []
    mixed = gpt2.generate_batch([PROMPT, PROMPT], p, N_HEAD, 3, stop_at_eot=True)
    assert mixed == [[], []]
    normal = gpt2.generate_batch([PROMPT, [5, 6]], params, N_HEAD, 3, stop_at_eot=True)
    assert normal == [gpt2.generate(PROMPT, params, N_HEAD, 3), gpt2.generate([5, 6], params, N_HEAD, 3)]


def test_a_row_that_stops_at_eot_does_not_stop_the_others(params):
    """One row says <|endoftext|> at its second step, the other never does: the first ends there, the other
    still gets every token it was asked for, in either order."""
    stops, goes_on = [5, 6], [464, 3290, 318, 257, 1332]
    second = gpt2.generate(stops, params, N_HEAD, 2)[1]
    p = with_ids_swapped(params, second, kvcache.EOT_ID)  # the stopping row's second token is now EOT
    first = gpt2.generate(stops, p, N_HEAD, 2)[0]
    assert gpt2.generate(stops, p, N_HEAD, 2) == [first, kvcache.EOT_ID] and first != kvcache.EOT_ID
    full = gpt2.generate(goes_on, p, N_HEAD, 5)
    assert kvcache.EOT_ID not in full  # the other row never stops by itself
    assert gpt2.generate_batch([stops, goes_on], p, N_HEAD, 5, stop_at_eot=True) == [[first], full]
    assert gpt2.generate_batch([goes_on, stops], p, N_HEAD, 5, stop_at_eot=True) == [full, [first]]


# ----------------------------------------------------------------------- decoding weights
def long_run_params(seed=2):
    """A model small enough that runs past RELAYOUT_MIN_STEPS positions are quick."""
    return random_params(seed=seed, n_vocab=1000, n_ctx=kvcache.RELAYOUT_MIN_STEPS + 8, n_embd=32)


def test_decoding_weights_give_the_same_tokens_short_and_long():
    small = long_run_params()
    n_long = kvcache.RELAYOUT_MIN_STEPS + 2
    expected = gpt2.generate_reference([5, 6, 7], small, N_HEAD, n_long)
    weights = kvcache.DecodingWeights(small)
    assert gpt2.generate([5, 6, 7], weights, N_HEAD, 4) == expected[:4]  # short: the loaded layouts
    assert gpt2.generate([5, 6, 7], weights, N_HEAD, n_long) == expected  # long: makes the copies
    assert gpt2.generate([5, 6, 7], weights, N_HEAD, 4) == expected[:4]  # short again: uses them
    assert gpt2.generate([5, 6, 7], small, N_HEAD, n_long) == expected  # a plain params tree works too
    rows = [[5, 6, 7], [9], [1, 2, 3, 4]]
    expected_rows = [gpt2.generate_reference(p, small, N_HEAD, 50) for p in rows]
    assert gpt2.generate_batch(rows, weights, N_HEAD, 50) == expected_rows  # 150 positions: long


def test_decoding_weights_copy_once_and_are_reused_across_runs():
    small = long_run_params()
    weights = kvcache.DecodingWeights(small)
    long = kvcache.RELAYOUT_MIN_STEPS
    short_blocks, short_head = weights.for_run(1, 1)
    assert np.shares_memory(short_head, small["wte"])  # a short run copies nothing
    assert all(np.shares_memory(b["mlp"]["c_proj"]["w"], a["mlp"]["c_proj"]["w"])
               for b, a in zip(short_blocks, small["blocks"]))
    blocks, head = weights.for_run(1, long)  # a long run makes the faster layouts
    assert not np.shares_memory(head, small["wte"]) and np.array_equal(head, small["wte"].T)
    assert head.flags.c_contiguous
    for block, original in zip(blocks, small["blocks"]):
        assert block["mlp"]["c_proj"]["w"].flags.f_contiguous
        assert np.array_equal(block["mlp"]["c_proj"]["w"], original["mlp"]["c_proj"]["w"])
    again_blocks, again_head = weights.for_run(1, 1)  # later runs, even short ones, reuse them
    assert again_head is head
    assert all(a["mlp"]["c_proj"]["w"] is b["mlp"]["c_proj"]["w"] for a, b in zip(again_blocks, blocks))
    batch_blocks, batch_head = weights.for_run(8, long)  # batches read c_proj row-major, as loaded
    assert batch_head is head
    assert all(np.shares_memory(b["mlp"]["c_proj"]["w"], a["mlp"]["c_proj"]["w"])
               for b, a in zip(batch_blocks, small["blocks"]))
    assert small["blocks"][0]["mlp"]["c_proj"]["w"].flags.c_contiguous  # the caller's tree is unchanged
    assert np.shares_memory(kvcache.DecodingWeights(small).for_run(1, 1)[1], small["wte"])  # per object


def test_off_a_terminal_large_copies_for_numpys_products_say_so_once_at_their_start(monkeypatch, capsys):
    """The copies a long run makes for NumPy's products (wte.T and every mlp c_proj: 2.3 GB at 1558M, seconds)
    are told in a log by their size (command_line.SLOW_BYTES, lowered here to the small model's copies), once, as
    they start; smaller ones, and runs that reuse them, say nothing."""
    from tokenizer import command_line

    small = long_run_params()
    n_copied = small["wte"].nbytes + sum(block["mlp"]["c_proj"]["w"].nbytes for block in small["blocks"])
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_copied + 1)
    kvcache.DecodingWeights(small).for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_copied)
    weights = kvcache.DecodingWeights(small)
    for n_batch in (1, 1, 8):  # (the second reuses the copies; a batch reads c_proj as loaded: nothing copied)
        weights.for_run(n_batch, kvcache.RELAYOUT_MIN_STEPS)
    assert capsys.readouterr().err == "arranging two weight matrices as NumPy's products read them faster, in " \
        "memory ...\n"


def test_copy_in_order_keeps_values_and_shape():
    a = np.arange(600 * 7, dtype=np.float32).reshape(600, 7)
    f = kvcache.copy_in_order(a, "F", block=64)
    assert f.flags.f_contiguous and np.array_equal(f, a)
    c = kvcache.copy_in_order(np.asfortranarray(a.T), "C", block=64)
    assert c.flags.c_contiguous and np.array_equal(c, a.T)


def test_column_major_params_give_the_same_results(params):
    def fortran(tree):
        if isinstance(tree, dict):
            return {key: fortran(value) for key, value in tree.items()}
        if isinstance(tree, list):
            return [fortran(value) for value in tree]
        return np.asfortranarray(tree)

    f_params = fortran(params)
    assert f_params["wte"].flags.f_contiguous and not f_params["wte"].flags.c_contiguous
    np.testing.assert_allclose(gpt2.gpt2(PROMPT, **f_params, n_head=N_HEAD),
                               gpt2.gpt2(PROMPT, **params, n_head=N_HEAD), atol=1e-5, rtol=0)
    assert gpt2.generate_batch(BATCH, f_params, N_HEAD, 5) == gpt2.generate_batch(BATCH, params, N_HEAD, 5)
    assert gpt2.generate_batch(BATCH, f_params, N_HEAD, 30) == gpt2.generate_batch(BATCH, params, N_HEAD, 30)


# ------------------------------------------------------------------------------------- CLI
class ByteEncoder:
    """A stand-in encoder: ids 0..255 are single bytes, in OpenAI's decoder/byte_decoder shape.
    It records every text it encodes, so tests can see exactly what reached it."""

    def __init__(self):
        self.byte_decoder = {chr(0x100 + b): b for b in range(256)}
        self.decoder = {i: chr(0x100 + (i % 256)) for i in range(N_VOCAB)}
        self.encoded = []

    def encode(self, text):
        self.encoded.append(text)
        return list(text.encode("utf-8"))

    @property
    def encoding(self):
        """The tiktoken face, as gpt2_numpy.encoder.Encoder's (Encoder.encoding): the same ids."""
        return self

    def encode_ordinary(self, text):  # what the command encodes a --score file with
        return self.encode(text)

    def decode_single_token_bytes(self, token):
        return bytes([self.byte_decoder[self.decoder[token]]])

    def decode(self, ids):
        return b"".join(map(self.decode_single_token_bytes, ids)).decode("utf-8", errors="replace")


def test_decode_stream_holds_back_split_characters():
    encoder = ByteEncoder()
    text = "a é 🙂 z"
    pieces = list(cli.decode_stream(encoder, list(text.encode("utf-8"))))
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)  # no half characters printed
    assert "🙂" in pieces  # emitted whole, once its 4th byte arrived


@pytest.fixture
def fake_model(params, monkeypatch):
    """main() with the random model and the byte encoder in place of a checkpoint; records each load."""
    encoder = ByteEncoder()
    hparams = {"n_vocab": N_VOCAB, "n_ctx": N_CTX, "n_embd": N_EMBD, "n_head": N_HEAD, "n_layer": N_LAYER}
    loads = []

    def load(model_size, models_dir):
        loads.append((model_size, models_dir))
        return encoder, hparams, params

    monkeypatch.setattr(cli, "load_encoder_hparams_and_params", load)
    return types.SimpleNamespace(encoder=encoder, loads=loads, params=params)


def run_main(argv):
    """(exit status, stdout, stderr) of cli.main(argv); argparse's exits count as statuses."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:
            status = exit_.code
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("option", ["--n_tokens_to_generate", "--top_k", "--lookup", "--draft_tokens", "--stride",
                                    "--port", "--seed"])
@pytest.mark.parametrize("typed", ["1_0", "+4", "\u0664", "\uff14", "4\u00b2"])
def test_numbers_are_written_in_ascii_digits(option, typed):
    # int() reads "1_0" as 10, "+4" and other scripts' digits as 4: none is how a number is typed (--port
    # "\u0668\u0660\u0660\u0660" served on port 8000)
    status, out, err = run_main(["hi", option, typed])
    assert (status, out) == (2, "") and err.count("\n") == 1, err
    assert f"{option}: expected a whole number" in err and f"got {typed!r}" in err, err


@pytest.mark.parametrize("typed", ["1" * 5000, "-" + "1" * 5000, "4294967296", "-1"])
def test_a_seed_out_of_range_or_of_thousands_of_digits_is_one_short_line(typed):
    # 5,000 digits reached int(), whose limit of 4,300 digits printed a traceback's advice
    # (sys.set_int_max_str_digits), and the message quoted all the digits
    status, out, err = run_main(["hi", "--seed", typed])
    assert (status, out) == (2, "") and err.count("\n") == 1 and len(err) < 300, err
    assert "--seed: expected a whole number from 0 to 2**32 - 1" in err, err


@pytest.mark.parametrize("option", ["--temperature", "--top_p", "--top-p"])
@pytest.mark.parametrize("typed", ["1_0", "0.\u0665", "\uff11", " 0.5", "+0.5", "nan", "inf", "Infinity", "1e999", ".",
                                   ""])
def test_decimal_numbers_are_written_in_ascii_digits_and_finite(option, typed):
    # float() reads "1_0" as 10, other scripts' digits, spaces around a number and "+0.5": none is how a number is
    # typed; nan, inf and 1e999 (inf) are no temperature or probability, told as a number's mistake here too
    status, out, err = run_main(["hi", option, typed])
    assert (status, out) == (2, "") and err.count("\n") == 1, err
    assert f"{option}: expected a decimal number (digits 0-9 and a point" in err and f"got {typed!r}" in err, err


def test_decimal_numbers_as_typed_are_read(fake_model):
    ids = fake_model.encoder.encode("hi")
    for typed, value in [("0.5", 0.5), (".5", 0.5), ("2.", 2.0), ("5e-1", 0.5), ("1", 1.0)]:
        expected = gpt2.generate(ids, fake_model.params, N_HEAD, 3, temperature=value, seed=4)
        assert run_main(["hi", "--temperature", typed, "--seed", "4", "--n_tokens_to_generate", "3"]) == \
            (0, fake_model.encoder.decode(expected) + "\n", ""), typed
    status, _, err = run_main(["hi", "--temperature", "-0.5"])  # a minus is read, and refused by the option's rule
    assert status == 2 and "--temperature must be a number >= 0" in err


def test_main_prints_the_continuation_streamed_or_not(fake_model):
    ids = fake_model.encoder.encode("hi é")
    expected = fake_model.encoder.decode(gpt2.generate(ids, fake_model.params, N_HEAD, 12))
    assert run_main(["hi é", "--n_tokens_to_generate", "12"]) == (0, expected + "\n", "")
    assert run_main(["hi é", "--n-tokens-to-generate", "12", "--stream"]) == (0, expected + "\n", "")


def steps_then(text, error):
    """A stand-in for kvcache.iter_generate_batch: the bytes of `text` as one row's steps (the byte encoder's
    ids), then `error` raised, as from a later step (None: the run ends there)."""
    def steps(*args, **kwargs):
        for byte in text.encode("utf-8"):
            yield [byte]
        if error is not None:
            raise error
    return steps


def test_ctrl_c_in_a_stream_ends_the_text_so_far_before_saying_interrupted(fake_model, monkeypatch):
    """gpt2 --stream stopped by Ctrl-C printed "Hello, wor" and no line's end: on a terminal, where stdout and
    stderr meet, "interrupted" was glued to the text. The text so far gets its line's end (stdout) and the notice
    a line of its own (stderr), status 130; text that ended its line gets no blank one, nor a run that printed
    nothing yet (Ctrl-C while the model loads)."""
    for text, printed in [("Hello, wor", "Hello, wor\n"), ("a line\n", "a line\n"), ("", "")]:
        monkeypatch.setattr(cli, "iter_generate_batch", steps_then(text, KeyboardInterrupt()))
        status, out, err = run_main(["hi", "--stream", "--n_tokens_to_generate", "30"])
        assert (status, out) == (130, printed), text
        assert err.count("\n") == 1 and err.endswith(": interrupted\n"), err


def test_an_id_with_no_text_mid_stream_is_told_below_the_text_not_inside_it(fake_model, monkeypatch):
    """An id the tokenizer has no text for (a padded vocabulary's) is said once on stderr; mid-stream it was said
    as it came, inside the streamed text where stdout and stderr share a terminal ("Hetoken id ... nothing\nllo").
    --stream says it below the text's line; a run printed at its end says it before the text, as it did."""
    no_text = N_VOCAB + 3  # (the byte encoder has a token for ids below N_VOCAB)

    def steps(*args, **kwargs):
        yield from ([byte] for byte in b"He")
        yield [no_text]
        yield from ([byte] for byte in b"llo")

    monkeypatch.setattr(cli, "iter_generate_batch", steps)
    notice = (f"token id {no_text} stands for no text: the model has {N_VOCAB} token ids, its tokenizer {N_VOCAB} "
              "tokens (a padded vocabulary); such ids print as nothing\n")
    for stream, seen in ([], notice + "Hello\n"), (["--stream"], "Hello\n" + notice):
        terminal = io.StringIO()  # both streams on one terminal, in the order written
        with redirect_stdout(terminal), redirect_stderr(terminal):
            assert cli.main(["hi", "--n_tokens_to_generate", "6", *stream]) == 0
        assert terminal.getvalue() == seen, stream


def test_a_character_stdout_cannot_print_mid_stream_is_told_on_a_line_of_its_own(fake_model, monkeypatch):
    """The first character stdout's encoding cannot print (here ASCII) comes mid-stream, once the text before
    it is out (it cannot be known before the tokens are): that text ends its line, then the error says how to get
    the rest (PYTHONIOENCODING=utf-8), exit 2, as a run printed at its end says (with nothing printed)."""
    monkeypatch.setattr(cli, "iter_generate_batch", steps_then("caf\u00e9 au lait", None))
    for stream, printed in ([], b""), (["--stream"], b"caf\n"):
        out, err = io.BytesIO(), io.StringIO()
        ascii_stdout = io.TextIOWrapper(out, encoding="ascii", newline="\n")
        with redirect_stdout(ascii_stdout), redirect_stderr(err):
            status = cli.main(["hi", "--n_tokens_to_generate", "30", *stream])
            ascii_stdout.flush()
        assert (status, out.getvalue()) == (2, printed), stream
        assert err.getvalue().count("\n") == 1 and ": error: the output holds '\u00e9' (U+00E9), which stdout's " \
            "encoding, ascii, cannot print: set PYTHONIOENCODING=utf-8" in err.getvalue(), err.getvalue()


def test_a_slow_run_says_what_it_waits_for_and_counts_its_tokens_on_a_terminal(fake_model, monkeypatch):
    """Nothing waits more than 2 s in silence: on a terminal, a first token slow to come is announced (a large
    model's weights read from disk, a long prompt), and a run printed at its end draws a bar counting the
    tokens; both after command_line.SLOW_AFTER_SECONDS, so a quick run says nothing. Off a terminal, nothing."""
    import time

    from tokenizer import command_line

    ids = fake_model.encoder.encode("hi")
    expected = fake_model.encoder.decode(gpt2.generate(ids, fake_model.params, N_HEAD, 12)) + "\n"
    steps = cli.iter_generate_batch

    def slow_steps(*args, **kwargs):  # a slow first token, then 0.02 s a token
        time.sleep(1.0)
        for step in steps(*args, **kwargs):
            yield step
            time.sleep(0.02)

    monkeypatch.setattr(cli, "iter_generate_batch", slow_steps)
    assert run_main(["hi", "--n_tokens_to_generate", "12"]) == (0, expected, "")  # stderr is no terminal here
    monkeypatch.setattr(command_line, "show_progress", lambda: True)
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0.5)  # (a busy machine's quick run stays under it)
    status, out, err = run_main(["hi", "--n_tokens_to_generate", "12", "--stream"])
    assert (status, out, err) == (0, expected, "loading the weights and reading the prompt ...\n")
    status, out, err = run_main(["hi", "--n_tokens_to_generate", "12"])
    assert (status, out) == (0, expected)
    # (the notice written above the bar to come: tqdm.write, which returns the carriage first)
    assert err.lstrip("\r").startswith("loading the weights and reading the prompt ...\n") and "generating" in err
    assert "/12" in err and "tok" in err
    monkeypatch.setattr(cli, "iter_generate_batch", steps)  # quick: not a word
    assert run_main(["hi", "--n_tokens_to_generate", "12"]) == (0, expected, "")


def test_off_a_terminal_a_long_generation_says_what_it_does_and_how_much_as_it_starts(fake_model, monkeypatch):
    """A log got nothing from a long run until its end (1558M's 500 tokens: minutes of silence), the wait for the
    first token and the token bar being a terminal's. Off a terminal a run says one line as it starts, told by its
    size, never a timer: the weights' bytes read, once a new token and once every cli.PREFILL_POSITIONS_PER_PASS
    positions of the prompt, against cli.SLOW_WEIGHT_READS (lowered here to this run's). A shorter run, or any on
    a terminal (its bars as they were), says nothing here."""
    from tokenizer import command_line

    default = cli.SLOW_WEIGHT_READS
    ids = fake_model.encoder.encode("hi")
    expected = fake_model.encoder.decode(gpt2.generate(ids, fake_model.params, N_HEAD, 12)) + "\n"
    n_bytes_read = (12 + len(ids) / cli.PREFILL_POSITIONS_PER_PASS) * cli.weight_bytes(fake_model.params)
    said = f"generating 12 tokens with 124M after a {len(ids)}-token prompt ...\n"
    for stream in ([], ["--stream"]):
        argv = ["hi", "--n_tokens_to_generate", "12", *stream]
        monkeypatch.setattr(cli, "SLOW_WEIGHT_READS", n_bytes_read + 1)
        assert run_main(argv) == (0, expected, ""), stream
        monkeypatch.setattr(cli, "SLOW_WEIGHT_READS", n_bytes_read)
        assert run_main(argv) == (0, expected, said), stream
        assert run_main(["hi", "--n_tokens_to_generate", "0", *stream]) == (0, "\n", "")  # nothing is run
        with monkeypatch.context() as terminal:
            for module in (command_line, cli):  # (cli holds the function under its own name too)
                terminal.setattr(module, "show_progress", lambda: True)
            assert run_main(argv) == (0, expected, ""), stream  # a quick run: no bar, no notice
    monkeypatch.setattr(cli, "SLOW_WEIGHT_READS", default)
    assert run_main(["hi", "--n_tokens_to_generate", "12"]) == (0, expected, "")  # the tiny model: quiet
    assert 40 * 124e6 * 4 < default <= 40 * 774e6 * 4  # 40 tokens of 124M's float32 weights quiet, of 774M's said


def test_off_a_terminal_a_long_score_says_what_it_scores_and_how_much_as_it_starts(fake_model, monkeypatch, tmp_path):
    """--score's bar is a terminal's: a log waited for the figures in silence. Off a terminal a long score says
    one line as it starts, told by its size: every window's positions, PREFILL_POSITIONS_PER_PASS a pass over the
    weights, against SLOW_WEIGHT_READS (lowered here to this file's)."""
    from gpt2_numpy.scoring import windows

    essay = tmp_path / "essay.txt"
    essay.write_text("The quick brown fox jumps over the lazy dog. " * 4, encoding="utf-8")  # 180 ids: 4 windows
    spans = windows(180, N_CTX)
    n_bytes_read = (sum(end - start for start, end, _ in spans) / cli.PREFILL_POSITIONS_PER_PASS
                    * cli.weight_bytes(fake_model.params))
    argv = ["--score", str(essay)]
    monkeypatch.setattr(cli, "SLOW_WEIGHT_READS", n_bytes_read + 1)
    status, figures, err = run_main(argv)
    assert (status, err) == (0, "") and figures.startswith("tokens: 180 (179 predicted)\n"), figures
    monkeypatch.setattr(cli, "SLOW_WEIGHT_READS", n_bytes_read)
    assert run_main(argv) == (0, figures, f"scoring {essay} with 124M: 179 tokens in {len(spans)} windows of up to "
                                          f"{N_CTX} ...\n")


@pytest.mark.parametrize("prompt", [
    "Hello, world", "'quoted'", '"double quoted"', "[1, 2, 3]", "{'a': 1}", "(1, 2)", "1e3", "42", "-7",
    "True", "None", "a,b,c", "  spaced  ", "naïve café 🙂 日本語", "line one\nline two", "--not-a-flag"])
def test_the_prompt_reaches_the_model_verbatim(fake_model, prompt):
    # a leading dash would read as an option: `--` ends the options (as for any Unix command)
    argv = ["--n_tokens_to_generate", "2"] + (["--", prompt] if prompt.startswith("-") else [prompt])
    status, out, err = run_main(argv)
    assert (status, err) == (0, "")
    assert fake_model.encoder.encoded == [prompt]


def test_prompt_after_options_and_leading_dash(fake_model):
    assert run_main(["--n_tokens_to_generate", "2", "--", "-5 degrees, and"])[0] == 0
    assert fake_model.encoder.encoded == ["-5 degrees, and"]


@pytest.mark.parametrize("argv, named", [
    ([], "give a PROMPT to continue"),
    (["hi", "--score", "file.txt"], "give it no PROMPT"),
    (["--score", "file.txt", "--stride", "0"], "--stride must be > 0"),
    ([""], "prompt is empty"),
    # a misspelt flag is named with the nearest one, as gpt2-tokenizer names it (command_line.unknown_arguments)
    (["hi", "--top_kk", "5"], "error: --top_kk is not an option of gpt2; did you mean --top_k? (see gpt2 --help)"),
    (["--top_kk", "5", "hi"], "error: --top_kk is not an option of gpt2; did you mean --top_k?"),
    (["hi", "--seeds=3"], "error: --seeds is not an option of gpt2; did you mean --seed?"),
    (["hi", "--xyzzy"], "error: --xyzzy is not an option of gpt2 (see gpt2 --help)"),
    # no guessing from abbreviations: an error, naming the flag it cuts short (not --stream, more like it by difflib)
    (["hi", "--temp", "1"], "error: --temp is not an option of gpt2; did you mean --temperature?"),
    # another tool's name for one of ours: named with ours (difflib's likeness alone said --draft_tokens)
    (["hi", "--max_new_tokens", "5"], "error: --max_new_tokens is not an option of gpt2; did you mean "
                                      "--n_tokens_to_generate?"),
    (["hi", "--max-new-tokens", "5"], "did you mean --n_tokens_to_generate?"),
    (["hi", "--length", "5"], "error: --length is not an option of gpt2; did you mean --n_tokens_to_generate?"),
    (["hi", "--model_name", "355M"], "error: --model_name is not an option of gpt2; did you mean --model?"),
    (["hi", "--n_tokens_to_generate", "1e3"], "expected a whole number (digits 0-9), got '1e3'"),
    (["hi", "--n_tokens_to_generate", "-1"], "--n_tokens_to_generate must be >= 0, got -1"),
    (["hi", "--model_size", "125M"], "--model '125M' is neither a GPT-2 size (124M, 355M, 774M, 1558M) nor a folder"),
    (["hi", "--model", "no/such/folder"], "nor a folder"),
    (["hi", "--model", ""], "--model is empty; give a GPT-2 size (124M, 355M, 774M, 1558M) or a model's folder"),
    (["hi", "--draft", ""], "--draft is empty; give a GPT-2 size"),
    (["hi", "--models_dir", ""], "--models_dir is empty; give the folder that holds the models"),  # not "."
    (["hi", "--temperature", "-1"], "--temperature must be a number >= 0 (0 means greedy), got -1.0"),
    (["hi", "--temperature", "nan"], "--temperature: expected a decimal number (digits 0-9 and a point, e.g. 0.8), "
                                     "got 'nan'"),
    (["hi", "--temperature", "hot"], "--temperature: expected a decimal number (digits 0-9 and a point, e.g. 0.8), "
                                     "got 'hot'"),
    (["hi", "--top_k", "0"], "--top_k must be a whole number >= 1, got 0"),  # the flag typed, not the parameter
    (["hi", "--top_p", "0"], "--top_p must be in (0, 1], got 0.0"),
    (["hi", "--top_p", "1.5"], "--top_p must be in (0, 1], got 1.5"),
    (["hi", "--temperature", "0", "--top_k", "5"], "--temperature 0 means greedy decoding, which --top_k would not "
                                                   "change; leave out --temperature (sampling at 1) or give one"),
    (["hi", "--temperature", "0", "--seed", "3", "--top_p", "0.5"], "which --top_p and --seed would not change"),
    (["hi", "--seed", "x"], "--seed: expected a whole number from 0 to 2**32 - 1, got 'x'"),
    (["hi", "--seed", "-1"], "--seed: expected a whole number from 0 to 2**32 - 1, got '-1'"),
    # an option that needs another is a mistake without it, never silently ignored: one rule
    (["--score", "f.txt", "--temperature", "1"], "--temperature goes with a PROMPT, which is not given"),
    (["--save_hf", "out", "--stream"], "--stream goes with a PROMPT"),
    (["--serve", "--n_tokens_to_generate", "5"], "--n_tokens_to_generate goes with a PROMPT"),
    (["hi", "--stride", "5"], "--stride goes with --score, which is not given: add --score, or drop --stride"),
    (["hi", "--host", "::1", "--port", "80"], "--host and --port go with --serve"),
    (["--score", "f.txt", "--port", "0"], "--port goes with --serve"),  # 0 is a value, though 0 == False
    (["--score", "f.txt", "--seed", "0"], "--seed goes with a PROMPT"),
    # as gpt2-tokenizer serve's: an empty host was taken for 127.0.0.1 here, for every network there
    (["--serve", "--host", "", "--port", "0"], "error: argument --host: expected an address, got ''; pass 127.0.0.1"),
    # one model, file or folder named twice: argparse used the last one silently (command_line.OneValue says why)
    (["hi", "--model", "124M", "--model", "355M"],
     "error: --model 124M and --model 355M name two models, where one is used: pass one of them (see gpt2 --help)"),
    (["hi", "--model_size", "124M", "--model", "355M"], "--model_size 124M and --model 355M name two models"),
    (["hi", "--model", "774M", "--draft", "124M", "--draft", "355M"], "--draft 124M and --draft 355M name two drafts"),
    (["--score", "a.txt", "--score", "b.txt"], "--score a.txt and --score b.txt name two files to score"),
    (["--save_hf", "a", "--save-hf", "b"], "--save_hf a and --save-hf b name two outputs"),
    (["hi", "--models_dir", "a", "--models_dir", "b"], "--models_dir a and --models_dir b name two models folders"),
])
def test_bad_command_lines_are_one_line_and_exit_2_before_loading(fake_model, argv, named, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["gpt2"])  # the command as installed (argparse names it from argv[0])
    status, out, err = run_main(argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "error: " in err and named in err, err
    assert fake_model.loads == []  # nothing downloaded or loaded


def test_a_number_typed_twice_is_the_last_and_a_model_typed_twice_is_taken():
    """The Unix rule an alias relies on (alias gpt2='gpt2 --temperature 0.8', then gpt2 --temperature 0 hi) holds
    for numbers and switches; the same model named twice is no mistake."""
    args = cli.command_line_parser().parse_args(["hi", "--temperature", "0.8", "--top_k", "5", "--temperature", "0",
                                                 "--top-k", "7", "--model", "355M", "--model_size", "355M"])
    assert (args.temperature, args.top_k, args.model) == (0, 7, "355M")


def test_version_is_one_line_and_loads_nothing(fake_model):
    status, out, err = run_main(["--version"])
    assert status == 0 and err == "" and fake_model.loads == []
    assert out == (f"{cli.command_line_parser().prog} {VERSION} (gpt2-numpy, from {ROOT}; "
                   f"Python {platform.python_version()})\n")


def test_help_says_where_models_go(fake_model, monkeypatch, tmp_path):
    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "my models"))
    status, out, _ = run_main(["--help"])
    assert status == 0 and fake_model.loads == []
    text = " ".join(out.split())  # argparse wraps lines
    assert f"default: {tmp_path / 'my models'}" in text and "$GPT2_MODELS_DIR" in text
    assert "~/.cache/gpt2-numpy/models" in text and "temperature 1" in text


def test_help_and_readme_say_an_installed_copy_and_its_checkout_download_into_two_folders():
    """After a plain pip install . in a checkout, the installed gpt2 (the user cache) and python gpt2.py (the
    checkout's models/) each downloaded the 500 MB, as the rule says, but nowhere a user looks said so."""
    help_text = " ".join(run_main(["--help"])[1].split())
    assert ("a copy installed with pip install . and the checkout it came from download into two folders: set "
            "$GPT2_MODELS_DIR to share one") in help_text, help_text
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    models_paragraph = readme[readme.index("**Where models go:**"):readme.index("Options: `--n_tokens_to_generate")]
    assert "after a plain `pip install .` in a checkout" in models_paragraph
    assert "each downloads the 500 MB of 124M once: set `GPT2_MODELS_DIR`" in models_paragraph


@pytest.mark.parametrize("columns", ["60", "80", "100", "120"])
def test_help_shows_the_dash_example_as_the_command_was_run_on_one_line(monkeypatch, columns):
    """--help's example for a prompt that starts with a dash said `gpt2 -- '-5 degrees outside, and'` under
    `python gpt2.py` too (a checkout may have no gpt2 installed), wrapped inside its quotes at some widths, so that
    a copied command held a line break in its prompt. It names the command as run, on a line of its own."""
    monkeypatch.setenv("COLUMNS", columns)
    for prog in ("python gpt2.py", "gpt2"):
        out = io.StringIO()
        with redirect_stdout(out), pytest.raises(SystemExit):
            cli.main(["--help"], prog=prog)
        assert f"\n    {prog} -- '-5 degrees outside, and'\n" in out.getvalue(), out.getvalue()


@pytest.mark.parametrize("columns", ["40", "60", "72", "80", "100", "120", "160"])
def test_help_never_breaks_a_command_it_quotes_across_lines(monkeypatch, columns):
    """--dtype's help said `(generating needs numba: pip` at the end of one line and `install 'numba>=0.59'; ...`
    on the next at 60 and 80 columns (argparse wraps at any space), so a command copied from it was two lines;
    --models_dir's `pip install .` could break the same way. Each is whole on one line, with plain spaces."""
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        cli.main(["--help"], prog="gpt2")
    help_lines = out.getvalue().splitlines()
    for command in ("pip install 'numba>=0.59'", "pip install ."):
        assert any(command in line for line in help_lines), (command, out.getvalue())
    assert "\xa0" not in out.getvalue()  # the spaces a reader copies are spaces


def test_models_dir_default_and_override(fake_model, monkeypatch, tmp_path):
    monkeypatch.setenv("GPT2_MODELS_DIR", str(tmp_path / "env"))
    run_main(["hi", "--n_tokens_to_generate", "1"])
    run_main(["hi", "--n_tokens_to_generate", "1", "--models_dir", str(tmp_path / "flag"), "--model_size", "355M"])
    assert fake_model.loads == [("124M", tmp_path / "env"), ("355M", str(tmp_path / "flag"))]


def test_sampling_options_without_temperature_sample_at_1_in_the_cli(fake_model):
    ids = fake_model.encoder.encode("hi")
    for options in (["--top_k", "40"], ["--top_p", "0.9"], []):
        expected = fake_model.encoder.decode(
            gpt2.generate(ids, fake_model.params, N_HEAD, 8, temperature=1.0, seed=3,
                          **{o[2:]: float(v) if "." in v else int(v) for o, v in zip(options[::2], options[1::2])}))
        assert run_main(["hi", "--n_tokens_to_generate", "8", "--seed", "3"] + options) == (0, expected + "\n", "")
    greedy = fake_model.encoder.decode(gpt2.generate(ids, fake_model.params, N_HEAD, 8))
    assert run_main(["hi", "--n_tokens_to_generate", "8", "--seed", "3"])[1] != greedy + "\n"


def test_a_prompt_too_long_is_one_line_and_exit_2(fake_model):
    status, out, err = run_main(["x" * 70, "--n_tokens_to_generate", "10"])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "the prompt is too long: 70 tokens" in err and f"n_ctx={N_CTX}" in err and "at most 54 tokens" in err
    status, _, err = run_main(["x" * 60, "--n_tokens_to_generate", "10"])
    assert status == 2 and "ask for at most 4 new tokens" in err


@contextmanager
def cwd(path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def test_cli_end_to_end_on_a_tiny_checkpoint(tmp_path):
    """`python gpt2.py` with the real utils.py and encoder.py, plain and streamed, run from another
    folder with the models folder from $GPT2_MODELS_DIR: the prompt arrives verbatim, the cwd stays empty."""
    import utils

    models = tmp_path / "models"
    write_tiny_checkpoint(models / "124M", n_ctx=64, n_embd=32, n_head=2, seed=3)
    encoder, hparams, params = utils.load_encoder_hparams_and_params("124M", models)  # converts once
    prompt = """Héllo wörld, 🙂 "naïve" ['1e3', None] True"""
    ids = encoder.encode(prompt)
    expected = encoder.decode(gpt2.generate(ids, params, hparams["n_head"], 12, temperature=1.0, seed=5))
    command = [sys.executable, str(ROOT / "gpt2.py"), prompt, "--n_tokens_to_generate", "12",
               "--temperature", "1.0", "--seed", "5"]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "GPT2_MODELS_DIR": str(models)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for extra in ([], ["--stream"]):
        run = subprocess.run(command + extra, cwd=elsewhere, capture_output=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        assert run.stdout.decode("utf-8") == expected + "\n"
    assert list(elsewhere.iterdir()) == []
    too_long = command[:4] + ["100"] + command[5:]
    run = subprocess.run(too_long, cwd=elsewhere, capture_output=True, env=env, timeout=300)
    error = run.stderr.decode(errors="replace")
    assert run.returncode == 2 and "Traceback" not in error and error.count("\n") == 1
    assert f"prompt of {len(ids)} tokens" in error and "n_ctx=64" in error


def test_a_prompt_that_starts_with_a_dash_is_pointed_at_double_dash(fake_model):
    status, out, err = run_main(["-x"])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "unrecognized arguments: -x; a prompt that starts with a dash goes after --:" in err
    assert "-- -x" in err and fake_model.loads == []
    status, _, err = run_main(["hi", "--temp", "1"])  # a prompt was given: a misspelt flag, no such hint
    assert status == 2 and "goes after --" not in err


@pytest.mark.parametrize("content, named", [("", "the file is empty"), (b"\xff\xfe", "is not valid UTF-8: byte 0")])
def test_score_of_an_empty_or_binary_file_says_so_before_loading(fake_model, tmp_path, content, named):
    path = tmp_path / "essay.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status, out, err = run_main(["--score", str(path)])
    assert status == 2 and out == "" and err.count("\n") == 1 and named in err and str(path) in err, err
    assert fake_model.loads == []
    status, _, err = run_main(["--score", str(tmp_path / "missing.txt")])
    assert status == 2 and "missing.txt" in err and fake_model.loads == []


def test_score_of_a_one_token_file_says_two_are_needed(fake_model, tmp_path):
    (tmp_path / "one.txt").write_text("a")
    status, _, err = run_main(["--score", str(tmp_path / "one.txt")])
    assert status == 2 and "holds 1 token" in err and "at least two" in err


@pytest.mark.parametrize("argv, named", [
    (["hi", "--serve"], "--serve runs until Ctrl-C; give it no PROMPT"),
    (["hi", "--port", "8000"], "--port goes with --serve"),
    (["--serve", "--port", "70000"], "expected a port from 0 to 65535"),
])
def test_serve_mistakes_are_one_line_and_exit_2(fake_model, argv, named):
    status, out, err = run_main(argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and named in err, err
    assert fake_model.loads == []


def test_a_damaged_checkpoint_exits_1_and_a_model_folder_of_nothing_exits_2(tmp_path):
    """A file that fails its check is not a mistake on the command line: exit 1, one line naming it. A folder
    that holds no model is: exit 2, before anything is read."""
    model_dir = tmp_path / "124M"
    write_tiny_checkpoint(model_dir, n_ctx=64, n_embd=32, n_head=2, seed=3)
    data = model_dir / "model.ckpt.data-00000-of-00001"
    body = bytearray(data.read_bytes())
    body[len(body) // 2] ^= 0x10
    data.write_bytes(bytes(body))
    status, out, err = run_main(["hi", "--model", str(model_dir)])
    assert status == 1 and out == "" and err.count("\n") == 1
    assert "data-00000-of-00001 is damaged" in err and "CRC-32C" in err
    (tmp_path / "empty").mkdir()
    status, _, err = run_main(["hi", "--model", str(tmp_path / "empty")])
    assert status == 2 and "holds neither OpenAI's layout" in err


def test_a_host_that_is_no_address_is_blamed_not_the_port(fake_model):
    status, out, err = run_main(["--serve", "--host", "256.1.1.1", "--port", "0"])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "--host 256.1.1.1: not an address of this machine" in err and "another --port" not in err


def test_too_many_new_tokens_never_asks_for_a_negative_prompt(fake_model):
    status, out, err = run_main(["hi", "--n_tokens_to_generate", str(N_CTX + 10)])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert f"ask for at most {N_CTX - 2} new tokens" in err and "shorten" not in err and " -" not in err, err


def test_options_after_double_dash_and_a_prompt_that_is_not_utf8_are_told(fake_model):
    status, _, err = run_main(["--", "hi", "--temperature", "1"])
    assert status == 2 and "everything after -- is the prompt" in err and "put the options before --" in err
    status, _, err = run_main(["ok \udcff"])  # how Python hands over the bytes b"ok \xff" of an argument
    assert status == 2 and "the prompt is not valid UTF-8: byte 3 is b'\\xff'" in err and fake_model.loads == []


def test_score_dash_scores_stdin_as_the_prompt_dash_reads_it(fake_model, monkeypatch, tmp_path):
    """``gpt2 --score -`` said "cannot read --score -: No such file or directory", where the PROMPT's ``-`` and
    every input of gpt2-tokenizer read standard input: it scores stdin, as it would the same text in a file."""
    def piped(data: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    monkeypatch.setattr(sys, "argv", ["gpt2"])  # the command as installed (argparse names it from argv[0])
    essay = tmp_path / "essay.txt"
    essay.write_text("The quick brown fox jumps over the lazy dog. " * 2, encoding="utf-8")
    from_file = run_main(["--score", str(essay)])
    assert from_file[0] == 0 and from_file[1].startswith("tokens: ")
    piped(essay.read_bytes())
    assert run_main(["--score", "-"]) == from_file
    piped(b"")
    assert run_main(["--score", "-"]) == (2, "", "gpt2: error: --score -: stdin is empty; give a text of at least two "
                                                 "tokens (see gpt2 --help)\n")
    piped(b"ok \xff")
    status, out, err = run_main(["--score", "-"])
    assert (status, out) == (2, "") and "--score -, the text on stdin, is not valid UTF-8: byte 3" in err, err


def test_a_dash_reads_the_prompt_from_stdin_as_gpt2_tokenizer_does(fake_model, monkeypatch):
    """``gpt2 -`` continues standard input, exactly as it comes (it used to continue the text "-"); stdin that is
    empty or not UTF-8 is one line and exit 2, before any model is loaded."""
    def piped(data: bytes):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))

    piped("naïve café 🙂\nline two\n".encode())
    assert run_main(["-", "--n_tokens_to_generate", "2"])[0] == 0
    assert fake_model.encoder.encoded == ["naïve café 🙂\nline two\n"]
    piped(b"ok \xff")
    status, out, err = run_main(["-", "--n_tokens_to_generate", "2"])
    assert (status, out) == (2, "") and err.count("\n") == 1
    assert "the prompt on stdin is not valid UTF-8: byte 3 is b'\\xff'" in err
    piped(b"")
    status, _, err = run_main(["--n_tokens_to_generate", "2", "--", "-"])
    assert status == 2 and "the prompt is empty" in err
    assert len(fake_model.loads) == 1  # only the run that had a prompt


def test_a_dash_on_a_terminal_says_how_to_end_the_prompt(fake_model, monkeypatch):
    """``gpt2 -`` with stdin a terminal would otherwise wait for Ctrl-D in silence: it says so, once, on stderr."""
    class TypedStdin(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", TypedStdin(io.BytesIO(b"typed prompt\n"), encoding="utf-8"))
    status, _, err = run_main(["-", "--n_tokens_to_generate", "2"])
    assert status == 0 and fake_model.encoder.encoded == ["typed prompt\n"]
    assert err == ("reading stdin from the terminal: type the text, then Ctrl-D at the start of a line to end it "
                   "(Ctrl-C to cancel)\n")


def test_a_models_dir_that_is_no_folder_is_one_line_and_exit_2_before_loading(fake_model, monkeypatch, tmp_path):
    """A file where the models folder goes (or on its path) could hold no model; it used to fail as exit 1 with
    Python's "good.txt/124M/checkpoint: Not a directory", after the load had started."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    for argv, named in [(["--models_dir", str(a_file)], f"--models_dir {a_file} is not a folder"),
                        (["--models_dir", str(a_file / "sub")], f"lies inside {a_file}, which is not a folder"),
                        (["--model", "355M", "--models_dir", str(a_file)], "is not a folder")]:
        status, out, err = run_main(["hi", *argv])
        assert (status, out) == (2, "") and err.count("\n") == 1 and named in err, err
    monkeypatch.setenv("GPT2_MODELS_DIR", str(a_file))
    status, _, err = run_main(["hi"])
    assert status == 2 and f"$GPT2_MODELS_DIR {a_file} is not a folder" in err
    assert fake_model.loads == []


def test_a_models_dir_with_no_size_to_read_there_is_one_line_and_exit_2_before_loading(fake_model, tmp_path):
    """--models_dir is where sizes are looked for: with --model FOLDER (and no --draft size) it was ignored,
    silently, and the folder read; now refused, as any option that goes with one not given is."""
    model_dir = tmp_path / "my-gpt2"
    write_tiny_checkpoint(model_dir, n_ctx=64, n_embd=32, n_head=2, seed=3)
    for extra, named in [([], f"--model {model_dir} names a folder"),
                         (["--draft", str(model_dir)], f"--model {model_dir} and --draft {model_dir} name folders")]:
        status, out, err = run_main(["hi", "--model", str(model_dir), "--models_dir", str(tmp_path), *extra])
        assert (status, out) == (2, "") and err.count("\n") == 1, err
        assert "--models_dir is where GPT-2's sizes (124M, 355M, 774M, 1558M) are kept" in err and named in err
        assert "drop --models_dir, or give a size" in err
    assert fake_model.loads == []
    # a --draft size is read from --models_dir, and the --model folder where it is
    status, _, err = run_main(["hi", "--model", str(model_dir), "--draft", "124M", "--models_dir", str(tmp_path),
                               "--n_tokens_to_generate", "1"])
    assert status == 0, err
    assert fake_model.loads == [(str(model_dir), str(tmp_path)), ("124M", str(tmp_path))]


def test_a_stride_longer_than_the_context_names_the_flag_and_the_most_it_takes(fake_model, tmp_path):
    """It used to be scoring.windows' own "score needs >= 2 ids and 0 < stride <= n_ctx (...)", no flag named."""
    essay = tmp_path / "essay.txt"
    essay.write_text("a few words to score, " * 4, encoding="utf-8")
    status, out, err = run_main(["--score", str(essay), "--stride", str(N_CTX + 1)])
    assert (status, out) == (2, "") and err.count("\n") == 1
    assert f"--stride {N_CTX + 1} is more than the model's context, n_ctx={N_CTX}" in err
    assert f"give at most {N_CTX}" in err
    assert run_main(["--score", str(essay), "--stride", str(N_CTX)])[0] == 0


def test_a_broken_model_folder_of_the_users_is_never_to_be_deleted_for_a_download(tmp_path):
    """--model FOLDER is the user's: nothing downloads into it, so a bad hparams.json or a missing checkpoint file
    must not be told "delete it and run again to download it afresh" (as it was, the same words as for a size's
    folder); the file stays where it is (a size's is moved aside, to be fetched again)."""
    folder = tmp_path / "my-gpt2"
    folder.mkdir()
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    (folder / "model.ckpt.index").write_bytes(b"")  # (hparams.json is read first)
    for content, named in [("[1]", "holds list, not a JSON object"), ('{"n_vocab": 5}', "lacks integer values")]:
        (folder / "hparams.json").write_text(content)
        status, out, err = run_main(["hi", "--model", str(folder)])
        assert (status, out) == (2, "") and err.count("\n") == 1, err  # what was passed holds no model: a mistake
        assert f"--model {folder}: " in err and named in err and "replace it with a good copy" in err, err
        assert "download" not in err and "delete" not in err, err
        assert (folder / "hparams.json").read_text() == content
    (folder / "checkpoint").unlink()
    status, _, err = run_main(["hi", "--model", str(folder)])
    assert status == 2 and f"{folder} has no checkpoint file" in err and "put the missing files there" in err, err
    assert "download" not in err and "delete" not in err, err


def test_a_model_folder_found_wrong_at_load_is_exit_2_and_its_damaged_weights_exit_1(tmp_path, params):
    """Every error of a load was exit 1, as if the machine or a download had failed, for a folder the user named
    that is no consistent GPT-2 (a config.json that contradicts its weights) too: that is a mistake in what was
    passed, exit 2, with what to pass instead (named by its flag, --draft's too). Weights whose bytes are damaged
    stay exit 1, in OpenAI's layout (the CRC, above) and in Hugging Face's."""
    from gpt2_numpy import hfmodel

    hparams = {"n_vocab": N_VOCAB, "n_ctx": N_CTX, "n_embd": N_EMBD, "n_head": N_HEAD, "n_layer": N_LAYER}
    folder = tmp_path / "hf"
    hfmodel.save_hf_folder(folder, hparams, params, {chr(65 + i): i for i in range(N_VOCAB)}, [])
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_layer": N_LAYER + 1}))  # one block more
    for argv, flag in ((["hi", "--model", str(folder)], "--model"),
                       (["hi", "--model", "124M", "--draft", str(folder), "--models_dir", str(tmp_path)], "--draft")):
        if flag == "--draft":  # a model that loads (the draft is read after it)
            write_tiny_checkpoint(tmp_path / "124M", n_ctx=64, n_embd=32, n_head=2, seed=3)
        status, out, err = run_main(argv)
        assert (status, out) == (2, "") and err.count("\n") == 1, err
        assert f"{flag} {folder}: " in err and "does not match its config.json" in err, err
        assert "give a folder holding one whole GPT-2" in err, err
    (folder / "config.json").write_text(json.dumps(config))
    openai_folder = tmp_path / "openai"  # the same in OpenAI's layout: its hparams.json one block more
    write_tiny_checkpoint(openai_folder, n_ctx=64, n_embd=32, n_head=2, seed=3)
    hparams_path = openai_folder / "hparams.json"
    hparams_path.write_text(json.dumps({**json.loads(hparams_path.read_text()), "n_layer": 3}))
    status, out, err = run_main(["hi", "--model", str(openai_folder)])
    assert (status, out) == (2, "") and err.count("\n") == 1, err
    assert "does not match hparams" in err and "give a folder whose hparams.json and checkpoint are one model's" in err
    assert "put the missing files there" not in err, err
    weights = folder / hfmodel.SAFETENSORS
    weights.write_bytes(weights.read_bytes()[:100])  # a download cut short
    status, out, err = run_main(["hi", "--model", str(folder)])
    assert (status, out) == (1, "") and err.count("\n") == 1, err
    assert "is not a readable safetensors file" in err, err


class GoneReader(io.StringIO):
    """A stdout whose reader went away (``| head``): every write is a broken pipe."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


class FullDisk(io.StringIO):
    """A stdout on a full disk (``> /dev/full``): every write fails with ENOSPC."""

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("argv", [["hi"], ["hi", "--stream"], ["--score", "FILE"]])
def test_a_stdout_on_a_full_disk_is_named_in_one_line_and_exit_1(fake_model, monkeypatch, tmp_path, argv):
    """`gpt2 hi > /dev/full` said "error: No space left on device", naming nothing: the disk of the input, of the
    models folder? The error names stdout; exit 1, the work failed."""
    essay = tmp_path / "essay.txt"
    essay.write_text("Some text to score.", encoding="utf-8")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", FullDisk())
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main([str(essay) if word == "FILE" else word for word in argv]) == 1
    assert err.getvalue().endswith(": error: cannot write the output to stdout: No space left on device\n")
    assert err.getvalue().count("\n") == 1, err.getvalue()


def test_a_reader_that_goes_away_ends_gpt2_quietly_with_141(fake_model, monkeypatch):
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", GoneReader())
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(["hi", "--n_tokens_to_generate", "3", "--stream"]) == 141
    assert err.getvalue() == ""


@pytest.mark.parametrize("argv", [["hi"], ["hi", "--stream"], ["--score", "FILE"]])
def test_a_closed_stdout_is_one_line_and_exit_2_before_loading(fake_model, tmp_path, argv):
    """`gpt2 hi >&-` (Python's sys.stdout is then None) loaded the model and generated, printed nothing (print
    drops text with no stream), then ended in a traceback ("'NoneType' object has no attribute 'flush'"); with
    --stream, at the first token. Nothing can be printed: told first, exit 2."""
    essay = tmp_path / "essay.txt"
    essay.write_text("Some text to score.", encoding="utf-8")
    argv = [str(essay) if word == "FILE" else word for word in argv]
    err = io.StringIO()
    with redirect_stdout(None), redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exit_:
            status = exit_.code
    assert status == 2 and err.getvalue().count("\n") == 1 and fake_model.loads == [], err.getvalue()
    assert ": error: stdout is closed, and the output is printed there: give it a file" in err.getvalue()


@pytest.mark.exhaustive
def test_gpt2_stream_into_head_exits_like_gpt2_tokenizer(tmp_path):
    """`gpt2 PROMPT --stream | head -c 5` on a tiny checkpoint: quiet, and the status of SIGPIPE, as the other
    command gives (a process of its own: the exhaustive tier)."""
    models = tmp_path / "models"
    write_tiny_checkpoint(models / "124M", n_ctx=64, n_embd=32, n_head=2, seed=3)
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "GPT2_MODELS_DIR": str(models)}
    with subprocess.Popen([sys.executable, str(ROOT / "gpt2.py"), "Hello", "--stream", "--n_tokens_to_generate",
                           "60"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        proc.stdout.read(1)
        proc.stdout.close()
        assert proc.wait(timeout=300) == 141
        assert proc.stderr.read() == b""


def test_a_damaged_checkpoint_of_a_size_is_moved_aside_so_a_rerun_downloads_it(tmp_path, monkeypatch):
    from gpt2_numpy import checkpoints

    model_dir = tmp_path / "124M"
    write_tiny_checkpoint(model_dir, n_ctx=64, n_embd=32, n_head=2, seed=3)
    data = model_dir / "model.ckpt.data-00000-of-00001"
    good = data.read_bytes()
    body = bytearray(good)
    body[len(body) // 2] ^= 0x10
    data.write_bytes(bytes(body))
    status, out, err = run_main(["hi", "--models_dir", str(tmp_path)])
    assert status == 1 and out == "" and err.count("\n") == 1 and "is damaged" in err
    assert "moved aside to model.ckpt.data-00000-of-00001.damaged" in err and "run again" in err
    assert not data.exists() and (model_dir / "model.ckpt.data-00000-of-00001.damaged").exists()
    fetched = []

    def download(model_size, folder):  # the rerun fetches what is missing: here, the good file
        fetched.append(model_size)
        data.write_bytes(good)

    monkeypatch.setattr(checkpoints, "download_gpt2_files", download)
    assert run_main(["hi", "--models_dir", str(tmp_path), "--n_tokens_to_generate", "2"])[0] == 0
    assert fetched == ["124M"]


def test_a_damaged_vocabulary_file_of_a_size_is_moved_aside_so_a_rerun_downloads_it(tmp_path, monkeypatch):
    """encoder.json and vocab.bpe are two of a size's seven downloaded files: a damaged one (a download cut short
    outside this program) was one line naming the JSON error and nothing more, kept in place for every rerun."""
    from gpt2_numpy import checkpoints

    model_dir = tmp_path / "124M"
    write_tiny_checkpoint(model_dir, n_ctx=64, n_embd=32, n_head=2, seed=3)
    for name, cut in (("encoder.json", 1000), ("vocab.bpe", 200_000)):
        good = (model_dir / name).read_bytes()
        (model_dir / name).write_bytes(good[:cut] + b"\xff")  # cut short, then a byte no UTF-8 text holds
        status, out, err = run_main(["hi", "--models_dir", str(tmp_path)])
        assert (status, out) == (1, "") and err.count("\n") == 1 and f"{model_dir / name}" in err, err
        assert f"moved aside to {name}.damaged: run again to download it afresh" in err, err
        assert not (model_dir / name).exists() and (model_dir / f"{name}.damaged").exists()

        def download(model_size, folder, name=name, good=good):  # the rerun fetches what is missing
            (Path(folder) / name).write_bytes(good)

        monkeypatch.setattr(checkpoints, "download_gpt2_files", download)
        assert run_main(["hi", "--models_dir", str(tmp_path), "--n_tokens_to_generate", "2"])[0] == 0


def test_the_kv_cache_size_is_stated_and_bounded_by_the_context(params):
    decoder = kvcache.KVDecoder([PROMPT, PROMPT[:3]], params, N_HEAD, 5)
    assert decoder.cache_bytes == sum(a.nbytes for pair in decoder.caches for a in pair)
    assert decoder.cache_bytes == kvcache.kv_cache_bytes(N_LAYER, N_EMBD, len(PROMPT) + 5, n_batch=2)
    most = kvcache.kv_cache_bytes(N_LAYER, N_EMBD, N_CTX)
    assert kvcache.KVDecoder([[1] * (N_CTX - 1)], params, N_HEAD, 1).cache_bytes == most  # a full context
    assert most == N_LAYER * 2 * N_CTX * N_EMBD * 4
