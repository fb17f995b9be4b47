"""The many-positions path: a long prompt's prefill and `gpt2 --score`'s windows. model.attention_in_blocks
against model.attention; KVDecoder.prefill_states past one block of queries against model.gpt2's logits and
HF transformers'; scoring.next_token_nlls against a plain log-softmax; scoring.windows and the progress it
reports; the --score progress bar (in this process, and on a pseudo-terminal in the exhaustive tier)."""
import json
import math
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpt2
from conftest import FUZZ_EXAMPLES
from gpt2_numpy import bands, cli, kvcache, model, scoring
from test_gpt2 import N_HEAD, assert_close_to_oracle, hf_logits, hf_model, random_params, run_main

ROOT = Path(__file__).resolve().parents[1]
LONG_CTX = 300  # more than two of attention_in_blocks' default blocks of 128 queries


@pytest.fixture(scope="module")
def long_params():
    return random_params(seed=5, n_ctx=LONG_CTX, n_embd=32, scale=0.1)


@pytest.fixture(scope="module")
def long_hf(long_params):
    return hf_model(long_params)


def long_ids(n, seed=0):
    return np.random.default_rng(seed).integers(0, 50257, n).tolist()


# ---------------------------------------------------------------------- attention in blocks
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(n_q=st.integers(1, 40), n_before=st.integers(0, 20), block=st.integers(1, 50), padded=st.integers(0, 12),
       seed=st.integers(0, 2**16))
def test_attention_in_blocks_equals_attention(n_q, n_before, block, padded, seed):
    """Any block size, after cached positions or none, with a batch row left-padded as KVDecoder pads it: every
    query that sees a real key gets attention()'s output (a padding query's output is never read)."""
    rng = np.random.default_rng(seed)
    n_k = n_before + n_q
    q = rng.standard_normal((2, 3, n_q, 8), dtype=np.float32)
    k, v = (rng.standard_normal((2, 3, n_k, 8), dtype=np.float32) for _ in range(2))
    padding = np.zeros((2, n_k), np.float32)
    padding[1, :padded] = kvcache.MASKED  # row 1's first `padded` positions are padding
    mask = model.causal_mask(n_q, n_before) + padding[:, None, None, :]  # [2, 1, n_q, n_k], as KVDecoder's
    ours, theirs = model.attention_in_blocks(q, k, v, mask, block=block), model.attention(q, k, v, mask)
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    real = (np.arange(n_k)[None, -n_q:] >= np.array([0, padded])[:, None])  # [2, n_q]: a real query
    np.testing.assert_allclose(ours[real[:, None, :].repeat(3, 1)], theirs[real[:, None, :].repeat(3, 1)],
                               rtol=1e-5, atol=1e-6)


def test_the_decoder_uses_blocks_for_many_positions_and_attention_for_one(params_small, monkeypatch):
    """A prompt goes through attention_in_blocks, but for its last block, where only the newest position's query
    attends (the first token reads no other); a decoding step, one position, through attention."""
    calls = []
    for name in ("attention", "attention_in_blocks"):
        real = getattr(kvcache, name)
        monkeypatch.setattr(kvcache, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
    decoder = kvcache.KVDecoder([[1, 2, 3, 4]], params_small, N_HEAD, 1)
    decoder.prefill()
    assert set(calls[:-1]) == {"attention_in_blocks"} and calls[-1] == "attention"
    calls.clear()
    decoder.decode([5])
    assert set(calls) == {"attention"}


@pytest.fixture(scope="module")
def params_small():
    return random_params(seed=1)


# ---------------------------------------------------------------------- long prefills
def test_prefill_states_past_one_block_equal_full_logits_and_hf(long_params, long_hf):
    """Prompts longer than a block of queries, batched with left padding: every real position's
    state @ wte.T is model.gpt2's logits and HF's; prefill()'s logits are the last state's, and decode()
    after prefill_states() goes on from the cache."""
    prompts = [long_ids(LONG_CTX - 1, seed=1), long_ids(170, seed=2)]
    decoder = kvcache.KVDecoder(prompts, long_params, N_HEAD, 1)
    states = decoder.prefill_states()  # [2, LONG_CTX - 1, n_embd]
    wte = long_params["wte"]
    for row, prompt in enumerate(prompts):
        logits = states[row, -len(prompt):] @ wte.T  # the real positions (padding is on the left)
        np.testing.assert_allclose(logits, gpt2.gpt2(prompt, **long_params, n_head=N_HEAD), atol=2e-5, rtol=0)
    assert_close_to_oracle(states[0] @ wte.T, hf_logits(long_hf, prompts[0]).astype(np.float32))
    single = kvcache.KVDecoder(prompts[:1], long_params, N_HEAD, 1)
    np.testing.assert_allclose(single.prefill()[0], states[0, -1] @ wte.T, atol=2e-5, rtol=0)
    after = decoder.decode([7, 7])[0]
    np.testing.assert_allclose(after, gpt2.gpt2(prompts[0] + [7], **long_params, n_head=N_HEAD)[-1],
                               atol=2e-5, rtol=0)


@pytest.mark.parametrize("n_last", [1, 2, 131, LONG_CTX - 1])
def test_prefill_states_of_the_newest_positions_equal_all_of_them(long_params, n_last):
    """prefill_states(n_last), whose last block computes only those positions, against the newest n_last of every
    position's states; the cache is filled the same, so the next decode() step's logits agree too."""
    prompts = [long_ids(LONG_CTX - 1, seed=4), long_ids(200, seed=5)]
    every, newest = (kvcache.KVDecoder(prompts, long_params, N_HEAD, 1) for _ in range(2))
    all_states, states = every.prefill_states(), newest.prefill_states(n_last)
    assert states.shape == (2, n_last, all_states.shape[-1])
    np.testing.assert_allclose(states, all_states[:, -n_last:], atol=2e-5, rtol=0)
    np.testing.assert_allclose(newest.decode([9, 9]), every.decode([9, 9]), atol=2e-5, rtol=0)


@pytest.mark.parametrize("n_last", [0, -1, LONG_CTX])
def test_prefill_states_of_no_or_too_many_positions_is_a_value_error(long_params, n_last):
    decoder = kvcache.KVDecoder([long_ids(LONG_CTX - 1)], long_params, N_HEAD, 1)
    with pytest.raises(ValueError, match=f"n_last counts prompt positions: 1 to {LONG_CTX - 1}.*got {n_last}"):
        decoder.prefill_states(n_last)


def test_long_prompt_greedy_equals_reference(long_params):
    prompt = long_ids(280, seed=3)
    assert gpt2.generate(prompt, long_params, N_HEAD, 3) == gpt2.generate_reference(prompt, long_params, N_HEAD, 3)


@pytest.mark.parametrize("into_out", [False, True])
@pytest.mark.parametrize("n_cores", [2, 3])
@pytest.mark.parametrize("shape, axis", [((1, 300, 256), 1), ((3, 97, 333), 1), ((701, 200), 0)])
@pytest.mark.parametrize("layer", ["layer_norm", "gelu"])
def test_bands_give_the_layers_own_positions(layer, shape, axis, n_cores, into_out, monkeypatch):
    """in_bands (a band of positions per core, each in a thread) against one call on the whole array: equal bit
    for bit, whatever the number of bands, and the bands really ran in other threads; given `out`, the bands
    wrote into it and it is what comes back."""
    import threading

    monkeypatch.setattr(bands, "N_CORES", n_cores)
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape, dtype=np.float32)
    g, b = rng.standard_normal((2, shape[-1]), dtype=np.float32)
    weights = {"g": g, "b": b} if layer == "layer_norm" else {}
    threads, all_bands = [], threading.Barrier(n_cores, timeout=30)

    def watched(band, **w):
        threads.append(threading.get_ident())
        all_bands.wait()  # passes only when every band is running at once
        return getattr(model, layer)(band, **w)

    out = np.full(shape, np.nan, np.float32) if into_out else None
    banded = bands.in_bands(watched, x, axis=axis, out=out, **weights)
    assert banded.shape == x.shape and banded.dtype == np.float32 and (banded is out or not into_out)
    np.testing.assert_array_equal(banded, getattr(model, layer)(x, **weights))
    # one band per core, all at once, each in a thread of the pool
    assert len(set(threads)) == len(threads) == n_cores and threading.get_ident() not in threads


def test_bands_inside_a_band_run_in_one_piece(monkeypatch):
    """in_bands called from inside a band (a band's product cutting itself into bands) runs there, in one piece:
    with every pool thread running a band, a band that handed work to the pool could wait for itself."""
    import threading

    monkeypatch.setattr(bands, "N_CORES", 2)
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    x = np.random.default_rng(0).standard_normal((6, 50), dtype=np.float32)
    inner_threads = []

    def inner(band):
        assert bands.in_a_band()
        inner_threads.append(threading.get_ident())
        return model.gelu(band)

    def outer(band):  # each band (of rows) cuts its rows' columns into bands again
        assert bands.in_a_band()
        return bands.in_bands(inner, band.T, axis=0).T

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as caller:  # a thread of its own, so that a deadlock fails the test, not hangs it
        done = caller.submit(bands.in_bands, outer, x, axis=0)
        np.testing.assert_array_equal(done.result(timeout=60), model.gelu(x))
    # two outer bands, each calling inner once (in one piece) in the band's own thread
    assert len(inner_threads) == 2 and not bands.in_a_band()


@pytest.mark.parametrize("n_rows, stretch_rows", [(1, 1), (64, 64), (300, 64), (301, 7), (5, 64)])
def test_ffn_in_stretches_equals_ffn(n_rows, stretch_rows, monkeypatch):
    """ffn_in_stretches (c_fc's bias and gelu a stretch of rows at a time) against model.ffn: the same numbers,
    bit for bit, whether the stretches divide the rows or not, for a batch's leading axes too."""
    n_embd = 24
    rng = np.random.default_rng(n_rows)
    mlp = {"c_fc": {"w": rng.standard_normal((n_embd, 4 * n_embd), dtype=np.float32),
                    "b": rng.standard_normal(4 * n_embd, dtype=np.float32)},
           "c_proj": {"w": rng.standard_normal((4 * n_embd, n_embd), dtype=np.float32),
                      "b": rng.standard_normal(n_embd, dtype=np.float32)}}
    x = rng.standard_normal((2, n_rows, n_embd), dtype=np.float32)
    monkeypatch.setattr(kvcache, "STRETCH_BYTES", stretch_rows * 4 * n_embd * 4)
    ours = kvcache.ffn_in_stretches(x, **mlp)
    assert ours.shape == x.shape and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, model.ffn(x, **mlp))


def test_a_long_prompt_takes_ffn_in_stretches_unless_ffn_is_patched(long_params, monkeypatch):
    """A prompt's MLP goes through ffn_in_stretches (here with stretches of a few rows); a learner's own
    model.ffn, patched in, is what runs instead, for the prompt and the steps after it."""
    calls = []
    real = kvcache.ffn_in_stretches
    monkeypatch.setattr(kvcache, "ffn_in_stretches", lambda *a, **k: calls.append("twin") or real(*a, **k))
    monkeypatch.setattr(kvcache, "STRETCH_BYTES", 5 * 4 * long_params["wte"].shape[1] * 4)
    prompt = long_ids(200, seed=6)
    ours = kvcache.KVDecoder([prompt], long_params, N_HEAD, 1).prefill()[0]
    assert calls and set(calls) == {"twin"}
    np.testing.assert_allclose(ours, gpt2.gpt2(prompt, **long_params, n_head=N_HEAD)[-1], atol=2e-5, rtol=0)
    calls.clear()
    ffn = model.ffn
    monkeypatch.setattr(model, "ffn", lambda *a, **k: calls.append("patched") or ffn(*a, **k))
    kvcache.KVDecoder([prompt], long_params, N_HEAD, 1).prefill()
    assert calls and set(calls) == {"patched"}


def test_a_prompt_with_banded_layers_gives_the_logits_of_one_piece(long_params, monkeypatch):
    """A long prompt's prefill runs in bands (in_bands: here every size is banded): per block, bands of positions
    for ln_1 and c_attn, bands of heads for attention, bands of positions for the rest, one band per core each;
    in the last block, c_attn's and attention's bands only: the rest is for the newest position alone. With the
    bands turned off its logits and cache are the same, to float32 rounding (a band's products may
    take another of BLAS's code paths than the whole's)."""
    prompt = long_ids(LONG_CTX - 1, seed=3)

    def prefill():
        decoder = kvcache.KVDecoder([prompt], long_params, N_HEAD, 1)
        return decoder.prefill(), decoder.caches[-1][1][:, :, : len(prompt)].copy()  # the filled columns

    handed = []
    monkeypatch.setattr(bands, "N_CORES", 2)
    real_submit = bands.band_threads().submit
    monkeypatch.setattr(bands.band_threads(), "submit", lambda *a, **k: handed.append(1) or real_submit(*a, **k))
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    banded = prefill()
    n_bands = 3 * 2 * (len(long_params["blocks"]) - 1) + 2 * 2
    assert len(handed) == n_bands
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 10**12)
    one_piece = prefill()
    assert len(handed) == n_bands
    np.testing.assert_allclose(banded[0], one_piece[0], rtol=0, atol=1e-5)
    np.testing.assert_allclose(banded[1], one_piece[1], rtol=0, atol=1e-5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")
def test_bands_work_in_a_process_forked_after_them(monkeypatch):
    """A child forked from a process that ran bands gets threads of its own (the pool it inherits has none: work
    handed to it would wait forever), and the same result."""
    import multiprocessing

    monkeypatch.setattr(bands, "N_CORES", 2)  # bands even on one core (the child inherits the setting)
    x = np.random.default_rng(0).standard_normal((1, 400, 300), dtype=np.float32)
    in_parent = bands.in_bands(model.gelu, x, axis=1)
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        in_child = pool.apply_async(bands.in_bands, (model.gelu, x), {"axis": 1}).get(timeout=60)
    np.testing.assert_array_equal(in_child, in_parent)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="keep_freed_memory asks glibc's malloc")
def test_a_long_prompt_keeps_freed_memory_for_the_next_layer(long_params, monkeypatch):
    """A prompt of MANY_POSITIONS or more asks malloc to keep freed memory (a short one does not). Then arrays of
    megabytes made again after being dropped, as each layer of a long prompt makes them, reuse the kept pages:
    no page faults, where fresh pages cost one fault each (without it, 6,100 each round here)."""
    import resource

    calls = []
    real = kvcache.keep_freed_memory
    monkeypatch.setattr(kvcache, "keep_freed_memory", lambda: calls.append(1) or real())
    kvcache.KVDecoder([[1, 2, 3]], long_params, N_HEAD, 1).prefill()
    assert calls == []
    kvcache.KVDecoder([long_ids(kvcache.MANY_POSITIONS)], long_params, N_HEAD, 1).prefill()
    assert calls == [1]

    def faults_of_a_layer():  # 8 arrays of 3 MiB alive at once, then dropped (below NumPy's huge-page size)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        arrays = [np.ones(3 << 18, np.float32) for _ in range(8)]
        del arrays
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    faults_of_a_layer()
    assert faults_of_a_layer() + faults_of_a_layer() < 200


# ---------------------------------------------------------------------- scoring
@pytest.mark.parametrize("chunk", [1, 1000, 4096, 60000])
def test_next_token_nlls_equal_log_softmax(chunk):
    """Whatever slices the vocabulary goes in (one id, some with a short last one, all at once), with logits
    in the thousands (exp would overflow without the running maximum)."""
    rng = np.random.default_rng(0)
    n_vocab = 5000 if chunk == 1 else 50257  # chunk 1: a slice per id, so a smaller vocabulary
    states = rng.standard_normal((6, 16), dtype=np.float32) * 30
    wte = rng.standard_normal((n_vocab, 16), dtype=np.float32) * 30
    targets = rng.integers(0, n_vocab, 6)
    logits = torch.from_numpy(states.astype(np.float64) @ wte.astype(np.float64).T)  # [6, n_vocab]
    assert logits.abs().max() > 1000
    expected = -torch.log_softmax(logits, -1)[torch.arange(6), torch.from_numpy(targets)].numpy()
    ours = scoring.next_token_nlls(states, wte, targets, chunk=chunk)
    assert ours.dtype == np.float64 and np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-3)  # float32 logits of size ~3000


def test_score_over_long_windows_equals_hf(long_params, long_hf):
    """Windows of 300 ids (three blocks of queries) starting 100 apart, against HF's logits window by window."""
    ids = long_ids(620, seed=4)
    nlls, positions = gpt2.token_nlls(ids, long_params, N_HEAD, stride=100)
    expected = []
    for start, end, first in scoring.windows(len(ids), LONG_CTX, stride=100):
        logits = torch.from_numpy(hf_logits(long_hf, ids[start:end]))
        expected += (-torch.log_softmax(logits, -1)[torch.arange(end - 1 - start), torch.tensor(ids[start + 1:end])]
                     )[first - 1 - start:].tolist()
    assert positions.tolist() == list(range(1, len(ids)))
    np.testing.assert_allclose(nlls, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("n_cores", [2, 3])
def test_banded_scoring_equals_one_piece(long_params, monkeypatch, n_cores):
    """Every size banded (the prefill's layers, and the scored rows' NLLs: a band of rows per core), against
    scoring in one piece: the same NLLs to float32 rounding, and each window's rows really handed out."""
    ids = long_ids(450, seed=5)
    one_piece = gpt2.token_nlls(ids, long_params, N_HEAD, stride=100)[0]
    handed = []
    real_nlls = scoring.next_token_nlls
    monkeypatch.setattr(scoring, "next_token_nlls", lambda *a, **k: handed.append(len(a[0])) or real_nlls(*a, **k))
    monkeypatch.setattr(bands, "N_CORES", n_cores)
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    banded = gpt2.token_nlls(ids, long_params, N_HEAD, stride=100)[0]
    n_windows = len(scoring.windows(len(ids), LONG_CTX, stride=100))
    assert len(handed) == n_cores * n_windows and sum(handed) == len(ids) - 1
    np.testing.assert_allclose(banded, one_piece, atol=1e-5, rtol=0)


@pytest.mark.parametrize("n_ids, stride, expected", [
    (10, 24, [(0, 10, 1)]),
    (48, 24, [(0, 48, 1)]),
    (60, 24, [(0, 48, 1), (24, 60, 48)]),
    (100, 48, [(0, 48, 1), (48, 96, 49), (96, 100, 97)]),  # no overlap: each later window's first goes unscored
])
def test_windows(n_ids, stride, expected):
    assert scoring.windows(n_ids, 48, stride=stride) == expected
    with pytest.raises(ValueError, match="0 < stride <= n_ctx"):
        scoring.windows(n_ids, 48, stride=49)


def test_progress_is_called_once_per_window_with_the_ids_it_scored(long_params):
    ids = long_ids(650, seed=5)
    reports = []
    nlls, positions = scoring.token_nlls(ids, long_params, N_HEAD, stride=150, progress=reports.append)
    spans = scoring.windows(len(ids), LONG_CTX, stride=150)
    assert len(spans) == 4 and reports == [end - first for _, end, first in spans]
    assert sum(reports) == len(positions) == len(nlls) == len(ids) - 1


# ---------------------------------------------------------------------- the --score progress bar
def fake_load(params):
    from test_gpt2 import ByteEncoder

    hparams = {"n_vocab": 50257, "n_ctx": len(params["wpe"]), "n_embd": params["wpe"].shape[1], "n_head": N_HEAD,
               "n_layer": len(params["blocks"])}
    return lambda model_size, models_dir: (ByteEncoder(), hparams, params)


def test_score_shows_a_bar_on_a_terminal_and_nothing_otherwise(long_params, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "load_encoder_hparams_and_params", fake_load(long_params))
    (tmp_path / "text.txt").write_text("x" * 400, encoding="utf-8")  # 400 ids for the byte encoder: 3 windows
    status, out, quiet = run_main(["--score", str(tmp_path / "text.txt")])
    assert status == 0 and quiet == ""  # stderr is no terminal here: no bar
    monkeypatch.setattr(cli, "show_progress", lambda: True)
    status, again, err = run_main(["--score", str(tmp_path / "text.txt")])
    assert status == 0 and again == out
    # a bar over every predicted id (that each window's ids are counted is the test above); it is erased when
    # done (leave=False), so how far its last drawing got depends on the machine's speed
    assert "scoring" in err and "/399" in err


@pytest.mark.exhaustive
def test_score_draws_its_bar_on_a_pseudo_terminal(long_params, tmp_path):
    """`python gpt2.py --score FILE` with stderr on a pseudo-terminal draws the bar; with stderr on a pipe, none.
    A process of its own: the exhaustive tier."""
    import fcntl
    import pty
    import struct
    import termios

    from gpt2_numpy import hfmodel

    vocab = ROOT / "tokenizer" / "data"
    lines = (vocab / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    hparams = {"n_vocab": 50257, "n_ctx": LONG_CTX, "n_embd": 32, "n_head": N_HEAD, "n_layer": 2}
    hfmodel.save_hf_folder(tmp_path / "model", hparams, long_params,
                           json.loads((vocab / "encoder.json").read_text(encoding="utf-8")),
                           [tuple(line.split(" ")) for line in lines[1:] if line])
    (tmp_path / "text.txt").write_text("The tower is 324 metres tall. " * 60, encoding="utf-8")
    command = [sys.executable, str(ROOT / "gpt2.py"), "--score", str(tmp_path / "text.txt"),
               "--model", str(tmp_path / "model")]
    piped = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert piped.returncode == 0 and piped.stderr == "" and "perplexity" in piped.stdout
    leader, follower = pty.openpty()
    # a new pseudo-terminal is 0 columns wide, where tqdm draws nothing: give it a person's 24 x 100
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, cwd=tmp_path) as proc:
        os.close(follower)
        drawn = b""
        while True:
            try:
                piece = os.read(leader, 4096)
            except OSError:  # the terminal closed: the process ended
                break
            if not piece:
                break
            drawn += piece
        assert proc.wait(timeout=300) == 0 and proc.stdout.read().decode() == piped.stdout
    os.close(leader)
    assert b"scoring" in drawn and b"tok" in drawn
    assert math.isfinite(float(piped.stdout.split("perplexity: ")[1].split()[0]))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds OpenBLAS through /proc/self/maps")
def test_bands_hold_numpys_openblas_to_one_thread_and_give_its_threads_back(monkeypatch):
    """NumPy's wheels bundle OpenBLAS: while bands run, its products are held to one thread each (else each band's
    products would start BLAS threads of their own, twice as many threads as cores); after them, the number of
    threads is what it was (the setting is the whole process's: held, a decoding step's products on the main
    thread ran on one core, 1.8x slower), also when a band raises."""
    from gpt2_numpy import blas_threads

    assert any("openblas" in path.lower() for path in blas_threads.loaded_openblas())
    assert blas_threads.thread_setting() is not None
    monkeypatch.setattr(bands, "N_CORES", 2)
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    before = blas_threads.n_threads()
    assert before > 1 or (os.cpu_count() or 1) == 1  # else the test would not see the number given back
    seen = []

    def band(rows):
        seen.append(blas_threads.n_threads())
        return rows

    x = np.ones((4, 3), np.float32)
    np.testing.assert_array_equal(bands.in_bands(band, x, axis=0), x)
    assert seen == [1, 1] and blas_threads.n_threads() == before

    def failing(rows):
        raise ZeroDivisionError("a band's error")

    with pytest.raises(ZeroDivisionError):
        bands.in_bands(failing, x, axis=0)
    assert blas_threads.n_threads() == before
    with blas_threads.one_thread(), blas_threads.one_thread():  # holds nest: the last one out gives them back
        assert blas_threads.n_threads() == 1
    assert blas_threads.n_threads() == before
    decoder = kvcache.KVDecoder([[1, 2, 3, 4, 5], [6, 7]], random_params(seed=2), N_HEAD, 2)  # a prompt in bands
    holds = []
    one_thread = blas_threads.one_thread
    monkeypatch.setattr(blas_threads, "one_thread", lambda: holds.append(1) or one_thread())
    decoder.prefill()
    assert holds and blas_threads.n_threads() == before  # for the decoding steps that follow
    seen.clear()
    linear = model.linear
    monkeypatch.setattr(kvcache, "linear", lambda *a, **k: seen.append(blas_threads.n_threads()) or linear(*a, **k))
    decoder.decode([8, 9])  # one position per row: its products are not cut into bands, and keep BLAS's threads
    assert seen and set(seen) == {before}


STOPPING_IDLE_THREADS = """
import os, threading, numpy as np
from gpt2_numpy import blas_threads
def n_tasks():
    return len(os.listdir("/proc/self/task"))  # the process's threads, as the system counts them
a = np.random.default_rng(0).standard_normal((600, 600))
expected = a @ a  # starts OpenBLAS's worker thread
running = n_tasks()
stopped = blas_threads.stop_idle_threads()
stopped_tasks = n_tasks()
same = bool((a @ a == expected).all())  # starts it again
print(running, stopped, stopped_tasks, n_tasks(), same)
threading.Thread(target=threading.Event().wait, name="someone else's", daemon=True).start()
running = n_tasks()
print(running, blas_threads.stop_idle_threads(), n_tasks())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts a process's threads in /proc/self/task")
def test_stopping_openblas_idle_threads_ends_them_only_while_no_one_else_could_be_using_them():
    """blas_threads.stop_idle_threads ends OpenBLAS's worker thread (in a fresh process with OpenBLAS on 2 threads
    and no other Python thread: the system's count of its threads falls by one), and the next product starts it
    again and gives the same numbers. With a thread alive that is not this package's, it does nothing: that
    thread could be inside a product that needs the workers."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", STOPPING_IDLE_THREADS], capture_output=True, text=True, env=env,
                         check=True).stdout.split("\n")
    running, stopped, stopped_tasks, restarted, same = out[0].split()
    assert (stopped, int(stopped_tasks), int(restarted), same) == ("True", int(running) - 1, int(running), "True")
    running, stopped, after = out[1].split()
    assert (stopped, after) == ("False", running)
