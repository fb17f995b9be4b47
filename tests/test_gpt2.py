"""Tests for gpt2.py: logits against HF transformers, KV cache, batching, sampling, CLI."""
import io
import os
import re
import subprocess
import sys
import types
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import gpt2
from tiny_checkpoint import write_tiny_checkpoint

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


def hf_model(params, n_head=N_HEAD):
    """transformers' GPT2LMHeadModel with the same weights (its Conv1D stores w as [nx, nf] too)."""
    n_vocab, n_embd = params["wte"].shape
    config = GPT2Config(vocab_size=n_vocab, n_positions=params["wpe"].shape[0], n_embd=n_embd,
                        n_layer=len(params["blocks"]), n_head=n_head, activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)
    model = GPT2LMHeadModel(config).eval()
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
    return model


@pytest.fixture(scope="module")
def params():
    return random_params()


@pytest.fixture(scope="module")
def hf(params):
    return hf_model(params)


def hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def full_recompute_greedy(ids, params, n):
    """picoGPT's generation: the whole sequence through gpt2() for every new token."""
    ids = list(ids)
    for _ in range(n):
        ids.append(int(np.argmax(gpt2.gpt2(ids, **params, n_head=N_HEAD)[-1])))
    return ids[-n:]


PROMPT = [464, 3290, 318, 257, 1332, 286, 50256, 0, 1234, 40000, 17]


# ------------------------------------------------------------------ against HF transformers
def test_logits_match_hf(params, hf):
    ours = gpt2.gpt2(PROMPT, **params, n_head=N_HEAD)
    theirs = hf_logits(hf, PROMPT)
    assert ours.shape == (len(PROMPT), N_VOCAB) and ours.dtype == np.float32
    assert ours.std() > 1.0  # the comparison means something only if logits are not ~0
    assert np.abs(ours - theirs).max() <= 1e-4


def test_logits_match_hf_full_context(params, hf):
    ids = list(np.random.default_rng(1).integers(0, N_VOCAB, N_CTX))
    assert np.abs(gpt2.gpt2(ids, **params, n_head=N_HEAD) - hf_logits(hf, ids)).max() <= 1e-4


def test_greedy_tokens_match_hf(params, hf):
    ids = list(PROMPT)
    for _ in range(12):  # HF, full recompute each step: independent of our cache
        ids.append(int(np.argmax(hf_logits(hf, ids)[-1])))
    assert gpt2.generate(PROMPT, params, N_HEAD, 12) == ids[len(PROMPT):]


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
    assert np.abs(gpt2.gelu(x) - expected).max() < 1e-6
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32) * 5 + 2
    g, b = np.full(8, 1.5, np.float32), np.full(8, -0.5, np.float32)
    expected = torch.nn.functional.layer_norm(torch.from_numpy(x), (8,), torch.from_numpy(g), torch.from_numpy(b), 1e-5)
    assert np.abs(gpt2.layer_norm(x, g, b) - expected.numpy()).max() < 1e-5


# ------------------------------------------------------------------------------- KV cache
def test_kv_cache_greedy_equals_full_recompute(params):
    assert gpt2.generate(PROMPT, params, N_HEAD, 20) == full_recompute_greedy(PROMPT, params, 20)


def test_kv_cache_logits_equal_full_logits(params):
    n_new = 15
    new = full_recompute_greedy(PROMPT, params, n_new)
    full = gpt2.gpt2(PROMPT + new, **params, n_head=N_HEAD)  # [n_seq, n_vocab]
    decoder = gpt2.KVDecoder([PROMPT], params, N_HEAD, n_new)
    cached = [decoder.prefill()[0]] + [decoder.decode([token])[0] for token in new[:-1]]
    assert cached[0].dtype == np.float32
    np.testing.assert_allclose(np.stack(cached), full[len(PROMPT) - 1 : -1], atol=2e-5, rtol=0)


def test_generation_reaching_n_ctx_exactly_works(params):
    prompt = list(range(1, N_CTX - 5))
    assert gpt2.generate(prompt, params, N_HEAD, 5) == full_recompute_greedy(prompt, params, 5)


# -------------------------------------------------------------------------------- batching
BATCH = [[11, 22, 33], PROMPT, [7], list(range(100, 125)), [50256, 50256, 9]]


def test_batch_equals_one_by_one(params):
    batch = gpt2.generate_batch(BATCH, params, N_HEAD, 10)
    assert batch == [gpt2.generate(p, params, N_HEAD, 10) for p in BATCH]
    assert len({tuple(row) for row in batch}) == len(BATCH)  # rows really differ


def test_batch_logits_equal_single_logits(params):
    batch = gpt2.KVDecoder(BATCH, params, N_HEAD, 2)
    first = batch.prefill()
    second = batch.decode([5] * len(BATCH))
    for row, prompt in enumerate(BATCH):
        single = gpt2.KVDecoder([prompt], params, N_HEAD, 2)
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


def test_top_k_1_and_tiny_top_p_are_greedy(params):
    greedy = gpt2.generate(PROMPT, params, N_HEAD, 10)
    assert gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=1.0, top_k=1, seed=0) == greedy
    assert gpt2.generate(PROMPT, params, N_HEAD, 10, temperature=1.0, top_p=1e-9, seed=0) == greedy


def sample_many(logits, n=3000, **options):
    rng = np.random.default_rng(0)
    return np.array([gpt2.sample(logits, rng=rng, **options) for _ in range(n)])


def test_top_k_never_samples_outside_the_k_best():
    logits = np.random.default_rng(5).standard_normal(1000).astype(np.float32)
    allowed = set(np.argsort(-logits)[:10].tolist())
    drawn = sample_many(logits, temperature=5.0, top_k=10)  # hot: outsiders would show up
    assert set(drawn.tolist()) == allowed  # only the 10 best, and every one of them


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
            ids, kept = gpt2.nucleus(np.arange(50257) + 1000, probs, top_p)
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


def test_bad_sampling_options_are_rejected(params):
    for options in ({"temperature": -1}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(ValueError):
            gpt2.generate(PROMPT, params, N_HEAD, 2, **options)


# ----------------------------------------------------------------------- inputs and limits
def test_inputs_and_params_are_not_mutated(params):
    prompt, prompts = list(PROMPT), [list(p) for p in BATCH]
    before = {id(a): a.copy() for a in (params["wte"], params["blocks"][0]["attn"]["c_attn"]["w"])}
    out = gpt2.generate(prompt, params, N_HEAD, 5)
    gpt2.generate_batch(prompts, params, N_HEAD, 5)
    assert prompt == PROMPT and prompts == BATCH and len(out) == 5
    for array in (params["wte"], params["blocks"][0]["attn"]["c_attn"]["w"]):
        assert np.array_equal(array, before[id(array)])


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


def test_empty_prompt_and_bad_ids_are_value_errors(params):
    with pytest.raises(ValueError, match="at least one token"):
        gpt2.generate([], params, N_HEAD, 2)
    with pytest.raises(ValueError, match="token ids"):
        gpt2.generate([N_VOCAB], params, N_HEAD, 2)


def test_zero_new_tokens(params):
    assert gpt2.generate(PROMPT, params, N_HEAD, 0) == []


def eot_params(params):
    """A copy whose every next token is <|endoftext|>: ln_f outputs a vector aligned with it."""
    p = {**params, "wte": params["wte"].copy(), "ln_f": {}}
    p["wte"][gpt2.EOT_ID] *= 4
    p["ln_f"] = {"g": np.zeros(N_EMBD, np.float32), "b": p["wte"][gpt2.EOT_ID].copy()}
    return p


def test_stop_at_eot(params):
    p = eot_params(params)
    assert gpt2.generate(PROMPT, p, N_HEAD, 4) == [gpt2.EOT_ID] * 4
    assert gpt2.generate(PROMPT, p, N_HEAD, 4, stop_at_eot=True) == []
    # in a batch, a row that stops does not stop the others
    mixed = gpt2.generate_batch([PROMPT, PROMPT], p, N_HEAD, 3, stop_at_eot=True)
    assert mixed == [[], []]
    normal = gpt2.generate_batch([PROMPT, [5, 6]], params, N_HEAD, 3, stop_at_eot=True)
    assert normal == [gpt2.generate(PROMPT, params, N_HEAD, 3), gpt2.generate([5, 6], params, N_HEAD, 3)]


# ------------------------------------------------------------------------------------- CLI
class ByteEncoder:
    """A stand-in encoder: ids 0..255 are single bytes, in OpenAI's decoder/byte_decoder shape."""

    def __init__(self):
        self.byte_decoder = {chr(0x100 + b): b for b in range(256)}
        self.decoder = {i: chr(0x100 + (i % 256)) for i in range(N_VOCAB)}

    def encode(self, text):
        return list(text.encode("utf-8"))

    def decode(self, ids):
        return b"".join(gpt2.token_bytes(self, i) for i in ids).decode("utf-8", errors="replace")


def test_decode_stream_holds_back_split_characters():
    encoder = ByteEncoder()
    text = "a é 🙂 z"
    pieces = list(gpt2.decode_stream(encoder, list(text.encode("utf-8"))))
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)  # no half characters printed
    assert "🙂" in pieces  # emitted whole, once its 4th byte arrived


def test_main_prints_the_continuation_streamed_or_not(params, monkeypatch):
    encoder = ByteEncoder()
    hparams = {"n_vocab": N_VOCAB, "n_ctx": N_CTX, "n_embd": N_EMBD, "n_head": N_HEAD, "n_layer": N_LAYER}
    fake_utils = types.SimpleNamespace(load_encoder_hparams_and_params=lambda size, d: (encoder, hparams, params))
    monkeypatch.setitem(sys.modules, "utils", fake_utils)
    expected = encoder.decode(gpt2.generate(encoder.encode("hi é"), params, N_HEAD, 12))
    assert gpt2.main("hi é", n_tokens_to_generate=12) == expected
    out = io.StringIO()
    with redirect_stdout(out):
        assert gpt2.main("hi é", n_tokens_to_generate=12, stream=True) is None
    assert out.getvalue() == expected + "\n"
    with pytest.raises(ValueError, match=re.escape("n_ctx=64")):
        gpt2.main("x" * 60, n_tokens_to_generate=10)


def test_cli_end_to_end_on_a_tiny_checkpoint(tmp_path, monkeypatch):
    """`python gpt2.py` with the real utils.py and encoder.py, plain and streamed."""
    import utils

    write_tiny_checkpoint(tmp_path / "124M", n_ctx=64, n_embd=32, n_head=2, seed=3)
    encoder, hparams, params = utils.load_encoder_hparams_and_params("124M", tmp_path)  # converts once
    prompt = "Héllo wörld, 🙂 naïve"
    ids = encoder.encode(prompt)
    expected = encoder.decode(gpt2.generate(ids, params, hparams["n_head"], 12, temperature=1.0, seed=5))
    command = [sys.executable, str(ROOT / "gpt2.py"), prompt, "--n_tokens_to_generate", "12",
               "--models_dir", str(tmp_path), "--temperature", "1.0", "--seed", "5"]
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    for extra in ([], ["--stream"]):
        run = subprocess.run(command + extra, cwd=ROOT, capture_output=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr.decode(errors="replace")
        assert run.stdout.decode("utf-8") == expected + "\n"
    too_long = command[:4] + ["100"] + command[5:]
    run = subprocess.run(too_long, cwd=ROOT, capture_output=True, env=env, timeout=300)
    error = run.stderr.decode(errors="replace")
    assert run.returncode != 0 and "Traceback" not in error
    assert f"prompt of {len(ids)} tokens" in error and "n_ctx=64" in error


def test_relaid_weights_are_made_once_and_dropped_with_their_array():
    small = random_params(n_vocab=300, n_ctx=16, n_embd=16, n_layer=1)
    wte, w = small["wte"], small["blocks"][0]["mlp"]["c_proj"]["w"]
    fast, head = gpt2.decoding_params(small, 1, 1)  # short run: original layouts, no copies
    assert head.base is wte and fast["blocks"][0]["mlp"]["c_proj"]["w"] is w
    fast, head = gpt2.decoding_params(small, 1, gpt2.RELAYOUT_MIN_STEPS)
    fast_w = fast["blocks"][0]["mlp"]["c_proj"]["w"]
    assert head.flags.c_contiguous and np.array_equal(head, wte.T)
    assert fast_w.flags.f_contiguous and np.array_equal(fast_w, w)
    assert small["blocks"][0]["mlp"]["c_proj"]["w"] is w  # the caller's tree is unchanged
    again, head_again = gpt2.decoding_params(small, 1, 1)  # later calls, even short, reuse them
    assert head_again.base is head.base and again["blocks"][0]["mlp"]["c_proj"]["w"] is fast_w
    batch, _ = gpt2.decoding_params(small, 8, 1)  # batches keep the row-major mlp weights
    assert batch["blocks"][0]["mlp"]["c_proj"]["w"] is w
    key = (id(wte), "F")
    del small, wte, w, fast, head, fast_w, again, head_again, batch
    assert key not in gpt2._RELAID  # freed with its array


def test_copy_in_order_keeps_values_and_shape():
    a = np.arange(600 * 7, dtype=np.float32).reshape(600, 7)
    f = gpt2.copy_in_order(a, "F", block=64)
    assert f.flags.f_contiguous and np.array_equal(f, a)
    c = gpt2.copy_in_order(np.asfortranarray(a.T), "C", block=64)
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


def test_long_runs_with_relaid_weights_equal_full_recompute():
    small = random_params(seed=2, n_vocab=1000, n_ctx=gpt2.RELAYOUT_MIN_STEPS + 8, n_embd=32)
    n_new = gpt2.RELAYOUT_MIN_STEPS + 2
    prompt = [5, 6, 7]
    expected = list(prompt)
    for _ in range(n_new):
        expected.append(int(np.argmax(gpt2.gpt2(expected, **small, n_head=N_HEAD)[-1])))
    assert gpt2.generate(prompt, small, N_HEAD, n_new) == expected[3:]
    assert (id(small["wte"]), "F") in gpt2._RELAID  # the run did use the copies
