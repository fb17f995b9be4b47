"""16-bit weights (gpt2_numpy/half.py, its kernel gpt2_numpy/half_kernel.py): the rounding against torch's, the
kernel against NumPy on the widened weights, decoding against the float32 decoder on the rounded weights, the
logits against float32's within a stated bound, the cache beside the checkpoint, and the command's errors.

The first test in a session that needs the kernel compiles it (a few seconds), unless numba's cache holds it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FUZZ_EXAMPLES, REPO
from gpt2_numpy import bands, half, hfmodel, kvcache, rows_cache
from gpt2_numpy.scoring import score
from test_gpt2 import N_HEAD, params_bytes, random_params, run_main

# One worker runs this file: the first test to need the kernel compiles it (into the suite's fresh cache) under a lock,
# and a second worker starting on the file at the same time would only wait for it, idle, instead of running other
# files' tests meanwhile.
pytestmark = pytest.mark.xdist_group("bf16 kernel")

# The largest logit difference between bf16 and float32 weights on the random model below (logits' std about 3),
# measured 0.07-0.10 over three seeds; bf16 keeps 8 significant bits (relative rounding at most 2**-9 per weight).
LOGIT_BOUND = 0.25


@pytest.fixture(scope="module")
def params():
    return random_params(seed=7, n_embd=64)


@pytest.fixture(scope="module")
def bf16_weights(params):
    return kvcache.DecodingWeights(params, dtype="bf16")


# ------------------------------------------------------------------------------ rounding
def test_to_bf16_rounds_as_torch_nearest_ties_to_even():
    import torch

    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0, 0x80000000, 0x00008000, 0x00018000, 0x3F808000, 0x3F818000, 0x3F80_7FFF, 0x7F7FFFFF,
                      0x7F7F8000, 0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF], dtype=np.uint32)
    values = np.concatenate([bits, edges]).view(np.float32)
    ours = half.to_bf16(values)
    theirs = torch.from_numpy(values.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    is_nan = np.isnan(values)
    assert np.array_equal(ours[~is_nan], theirs[~is_nan])
    assert np.isnan(half.from_bf16(ours[is_nan])).all()  # a NaN stays a NaN (its payload may differ)
    assert np.array_equal(half.from_bf16(half.to_bf16(half.from_bf16(ours[~is_nan]))),
                          half.from_bf16(ours[~is_nan]))  # bf16 values are kept exactly


def test_rounded_params_round_the_matrices_only(params):
    rounded = half.rounded_params(params)
    assert np.array_equal(rounded["wte"], half.from_bf16(half.to_bf16(params["wte"])))
    assert not np.array_equal(rounded["wte"], params["wte"])
    block, original = rounded["blocks"][1], params["blocks"][1]
    assert np.array_equal(block["mlp"]["c_proj"]["w"], half.from_bf16(half.to_bf16(original["mlp"]["c_proj"]["w"])))
    assert block["mlp"]["c_proj"]["b"] is original["mlp"]["c_proj"]["b"]  # biases, norms, wpe: float32 as they are
    assert block["ln_1"] is original["ln_1"] and rounded["wpe"] is params["wpe"]


# ------------------------------------------------------------------------------ the kernel
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(n_x=st.integers(1, 2 * half.KERNEL_MAX_ROWS), n_in=st.integers(1, 80), n_out=st.integers(1, 80),
       seed=st.integers(0, 2**32 - 1))
def test_products_equal_numpy_on_the_widened_weights(n_x, n_in, n_out, seed):
    rng = np.random.default_rng(seed)
    rows = half.to_bf16(rng.standard_normal((n_out, n_in), dtype=np.float32))
    x = rng.standard_normal((n_x, n_in), dtype=np.float32)
    reference = x.astype(np.float64) @ half.from_bf16(rows).T.astype(np.float64)
    ours = x @ half.Bf16Matrix(rows)
    assert ours.dtype == np.float32 and ours.shape == (n_x, n_out)
    scale = np.abs(x).astype(np.float64) @ np.abs(half.from_bf16(rows)).T  # what float32 sums can lose against
    assert (np.abs(ours - reference) <= 4e-6 * scale + 1e-30).all()


def test_products_take_every_shape_the_layers_pass():
    rng = np.random.default_rng(1)
    rows = half.to_bf16(rng.standard_normal((5, 7), dtype=np.float32))
    matrix, widened = half.Bf16Matrix(rows), half.from_bf16(rows).T  # [7, 5]
    for shape in [(7,), (1, 7), (3, 7), (2, 3, 7), (2, 1, 7), (2, 20, 7)]:  # one row .. [n_batch, n_seq, n_in]
        x = rng.standard_normal(shape, dtype=np.float32)
        assert np.allclose(x @ matrix, x @ widened, rtol=1e-5, atol=1e-5)
        assert (x @ matrix).shape == shape[:-1] + (5,)
    column_major = np.asfortranarray(rng.standard_normal((4, 7), dtype=np.float32))
    assert np.allclose(column_major @ matrix, column_major @ widened, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="inner sizes differ"):
        np.ones((2, 6), np.float32) @ matrix


@pytest.mark.parametrize("n_cores", [1, 2, 3])
def test_many_rows_widen_the_weights_in_bands_of_weight_rows(n_cores, monkeypatch):
    """More rows than the kernel takes (a prompt): each core widens its own share of the weight rows, a block at a
    time, and multiplies every row of x by it. Banded or not, blocks dividing the rows or not: the product of x
    and the widened weights, to float32 rounding."""
    monkeypatch.setattr(bands, "N_CORES", n_cores)
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    monkeypatch.setattr(half, "WIDEN_BLOCK_BYTES", 7 * 4 * 30)  # blocks of 7 weight rows of 30 numbers
    rng = np.random.default_rng(n_cores)
    rows = half.to_bf16(rng.standard_normal((53, 30), dtype=np.float32))  # [n_out, n_in]
    x = rng.standard_normal((2, 20, 30), dtype=np.float32)  # 40 rows: past the kernel's KERNEL_MAX_ROWS
    ours = x @ half.Bf16Matrix(rows)
    assert ours.shape == (2, 20, 53) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, x @ half.from_bf16(rows).T, rtol=1e-5, atol=1e-5)


def test_a_bf16_prompt_in_bands_equals_one_piece(params, bf16_weights, monkeypatch):
    """A prompt whose layers run in bands (here every size is banded), each band's bf16 products then running in
    that band's thread (a band does not cut itself into bands again: the pool's threads are all busy): the
    logits of the prompt run in one piece, to float32 rounding."""
    prompt = list(range(40))
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 10**12)
    one_piece = kvcache.KVDecoder([prompt], bf16_weights, N_HEAD, 1).prefill()
    monkeypatch.setattr(bands, "N_CORES", 2)
    monkeypatch.setattr(bands, "BANDS_MIN_SIZE", 0)
    banded = kvcache.KVDecoder([prompt], bf16_weights, N_HEAD, 1).prefill()
    np.testing.assert_allclose(banded, one_piece, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------ decoding
def test_bf16_decoding_equals_float32_decoding_of_the_rounded_weights(params, bf16_weights):
    rounded = kvcache.DecodingWeights(half.rounded_params(params))
    prompts = [[1, 2, 3, 4, 5], [50256, 7, 9], [300]]
    assert kvcache.generate_batch(prompts, bf16_weights, N_HEAD, 24) == \
        kvcache.generate_batch(prompts, rounded, N_HEAD, 24)
    ours = kvcache.KVDecoder([list(range(40))], bf16_weights, N_HEAD, 2)  # a prefill past KERNEL_MAX_ROWS
    theirs = kvcache.KVDecoder([list(range(40))], rounded, N_HEAD, 2)
    assert np.allclose(ours.prefill(), theirs.prefill(), rtol=1e-4, atol=1e-4)
    assert np.allclose(ours.decode([11]), theirs.decode([11]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("in_order", [False, True])
def test_a_single_bf16_sequence_decodes_through_the_compiled_step(params, bf16_weights, monkeypatch, in_order):
    """One sequence decodes each token in one compiled call (gpt2_numpy/step_kernel.py) on the bf16 rows, reading
    them in either order (8 streams, or row by row): the same tokens as the float32 decoder on the rounded
    weights, and logits equal to float32 rounding."""
    monkeypatch.setattr(bf16_weights, "reads_in_order", in_order)
    rounded = kvcache.DecodingWeights(half.rounded_params(params))
    prompt = [1, 2, 3, 4, 5]
    assert kvcache.generate(prompt, bf16_weights, N_HEAD, 24) == kvcache.generate(prompt, rounded, N_HEAD, 24)
    ours, theirs = (kvcache.KVDecoder([prompt], weights, N_HEAD, 3) for weights in (bf16_weights, rounded))
    assert ours.compiled_step is not None and theirs.compiled_step is None
    ours.prefill(), theirs.prefill()
    for token in (11, 12, 13):
        expected = theirs.decode([token])
        np.testing.assert_allclose(ours.decode([token]), expected, rtol=0, atol=2e-5 * np.abs(expected).max())


def test_bf16_logits_are_within_the_bound_of_float32s(params, bf16_weights):
    ids = list(range(100, 160))
    ours = kvcache.KVDecoder([ids], bf16_weights, N_HEAD, 1).prefill()
    exact = kvcache.KVDecoder([ids], params, N_HEAD, 1).prefill()
    difference = np.abs(ours - exact).max()
    assert 0 < difference < LOGIT_BOUND  # rounded (not the float32 weights), and not by much
    assert abs(score(ids, half.rounded_params(params), N_HEAD) - score(ids, params, N_HEAD)) < 0.01


def test_an_unknown_dtype_is_a_value_error(params):
    with pytest.raises(ValueError, match="'f64' is not one of f32, bf16"):
        kvcache.DecodingWeights(params, dtype="f64")


# ------------------------------------------------------------------------------ the cache file
@pytest.fixture
def model_folder(tmp_path):
    params = random_params(seed=5, n_vocab=300, n_embd=32)
    hparams = {"n_vocab": 300, "n_ctx": 64, "n_embd": 32, "n_head": N_HEAD, "n_layer": 2}
    vocab = json.loads((REPO / "tokenizer" / "data" / "encoder.json").read_text(encoding="utf-8"))
    hfmodel.save_hf_folder(tmp_path / "model", hparams, params, vocab, [])
    return tmp_path / "model", params


def test_the_cache_is_written_once_reused_and_remade_when_the_checkpoint_changes(model_folder, capsys):
    folder, params = model_folder
    expected = half.kernel_rows(params)
    first = half.cached_bf16_matrices(params, folder)
    cache = half.cache_path(folder)
    assert cache == folder / "model.safetensors.bf16" and "converting" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    again = half.cached_bf16_matrices(params, folder)
    assert capsys.readouterr().err == "" and isinstance(again["wte"], np.memmap)  # read, not converted
    for name in half.matrix_names(2):
        assert np.array_equal(first[name], expected[name]) and np.array_equal(again[name], expected[name])
    written = cache.stat().st_mtime_ns
    weights = folder / hfmodel.SAFETENSORS
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))  # "changed"
    half.cached_bf16_matrices(params, folder)
    assert "converting" in capsys.readouterr().err and cache.stat().st_mtime_ns != written


def test_a_checkpoint_replaced_by_one_of_the_same_size_and_time_is_converted_again(model_folder, tmp_path, capsys):
    """cp -p, rsync -a or tar can put other weights in place with the old file's size and modification time:
    the cache of the old ones must not be taken for them."""
    folder, params = model_folder
    half.cached_bf16_matrices(params, folder)
    capsys.readouterr()
    weights = folder / hfmodel.SAFETENSORS
    other_params = random_params(seed=6, n_vocab=300, n_embd=32)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    hfmodel.save_hf_folder(tmp_path / "other", {"n_vocab": 300, "n_ctx": 64, "n_embd": 32, "n_head": N_HEAD,
                                                "n_layer": 2}, other_params, vocab, [])
    other = tmp_path / "other" / hfmodel.SAFETENSORS
    assert other.stat().st_size == weights.stat().st_size and other.read_bytes() != weights.read_bytes()
    os.utime(other, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns))  # as cp -p would
    os.replace(other, weights)
    rows = half.cached_bf16_matrices(other_params, folder)
    assert "converting" in capsys.readouterr().err
    assert np.array_equal(rows["wte"], half.to_bf16(other_params["wte"]))


@pytest.mark.parametrize("damage", [b"", b"GPT2BF16\xff", b"not a cache at all" * 10])
def test_a_damaged_cache_is_made_again(model_folder, damage, capsys):
    folder, params = model_folder
    half.cached_bf16_matrices(params, folder)
    cache = half.cache_path(folder)
    cache.write_bytes(damage)
    rows = half.cached_bf16_matrices(params, folder)
    assert "converting" in capsys.readouterr().err
    assert np.array_equal(rows["blocks/1/mlp/c_fc"], half.kernel_rows(params)["blocks/1/mlp/c_fc"])
    assert read_back(cache, folder) is not None


def test_partial_files_a_killed_writer_left_are_removed_by_the_next_writer(model_folder, capsys):
    """A run killed while writing the cache (SIGTERM, SIGKILL) leaves its hidden partial file, as big as the cache;
    the next run that writes it removes those left long ago, and not one being written now by another run."""
    folder, params = model_folder
    cache = half.cache_path(folder)
    left, being_written = (folder / f".{cache.name}.{tag}.partial" for tag in ("a" * 32, "b" * 32))
    for partial in (left, being_written):
        partial.write_bytes(b"GPT2BF16" + bytes(100))
    long_ago = time.time() - rows_cache.LEFT_PARTIAL_SECONDS - 60
    os.utime(left, (long_ago, long_ago))
    half.cached_bf16_matrices(params, folder)
    assert "converting" in capsys.readouterr().err and read_back(cache, folder) is not None
    assert not left.exists() and being_written.exists()


def read_back(cache, folder):  # the bf16 matrices in the cache file, or None
    return rows_cache.read(cache, half.CACHE_MAGIC, np.uint16, rows_cache.source_stamp(folder), half.matrix_names(2))


def test_a_cache_cut_short_is_made_again(model_folder):
    folder, params = model_folder
    half.cached_bf16_matrices(params, folder)
    cache = half.cache_path(folder)
    cache.write_bytes(cache.read_bytes()[:-2])
    assert read_back(cache, folder) is None


def test_a_folder_that_cannot_be_written_says_so_and_converts_each_time(model_folder, monkeypatch, capsys):
    folder, params = model_folder

    def refuse(*args, **kwargs):  # as in a read-only folder (chmod does not stop root, who runs CI)
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(rows_cache, "replaced_file", refuse)
    rows = half.cached_bf16_matrices(params, folder)
    err = capsys.readouterr().err
    assert err.endswith(" Permission denied); the next run converts the weights to bf16 again\n")  # one line
    assert err.count("\n") == 2 and "Errno 13" in err
    assert np.array_equal(rows["wte"], half.to_bf16(params["wte"])) and not half.cache_path(folder).exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
def test_a_fifo_by_the_caches_name_is_neither_opened_nor_replaced(model_folder, capsys):
    """Something other than a regular file where the cache would go (a FIFO: opening it to read would block) is
    left alone: the matrices are made in memory, with one line; the run does not hang."""
    folder, params = model_folder
    fifo = half.cache_path(folder)
    os.mkfifo(fifo)
    rows = half.cached_bf16_matrices(params, folder)
    err = capsys.readouterr().err
    assert err == f"converting the weights to bf16 in memory: {fifo} cannot be written; the next run converts " \
        "the weights to bf16 again\n"
    assert np.array_equal(rows["wte"], half.to_bf16(params["wte"])) and stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_disk_without_room_for_the_file_is_not_filled(model_folder, monkeypatch, capsys):
    """A cache file is written only if the disk keeps rows_cache.FREE_BYTES_KEPT free after it: else the matrices
    are made in memory, with one line saying how much room the file needs; with room, the next run writes it
    (with a bar over its bytes on a terminal)."""
    from tokenizer import command_line

    folder, params = model_folder
    shapes = {name: w.shape for name, w in half.named_matrices(params).items()}
    n_bytes = 2 * sum(int(np.prod(shape)) for shape in shapes.values())  # bf16: 2 bytes a weight
    monkeypatch.setattr(rows_cache, "free_bytes", lambda folder: n_bytes + rows_cache.FREE_BYTES_KEPT - 1)
    rows = half.cached_bf16_matrices(params, folder)
    err = capsys.readouterr().err
    assert err.startswith("converting the weights to bf16 in memory: the file would take ") and err.count("\n") == 1
    assert f"with more room the next run keeps them in {half.cache_path(folder)}" in err
    assert np.array_equal(rows["wte"], half.to_bf16(params["wte"])) and not half.cache_path(folder).exists()
    monkeypatch.setattr(rows_cache, "free_bytes", lambda folder: n_bytes + rows_cache.FREE_BYTES_KEPT)
    monkeypatch.setattr(command_line, "show_progress", lambda: True)  # on a terminal: a bar over the bytes written
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0)
    half.cached_bf16_matrices(params, folder)
    err = capsys.readouterr().err
    assert half.cache_path(folder).is_file() and "once, into" in err and half.cache_path(folder).name in err
    assert "B/s" in err or "/s]" in err


# ------------------------------------------------------------------------------ the command
def test_gpt2_dtype_bf16_generates_and_scores_with_the_rounded_weights(model_folder, tmp_path, capsys):
    folder, params = model_folder
    status, out, err = run_main(["a b", "--model", str(folder), "--dtype", "bf16", "--n_tokens_to_generate", "6"])
    assert status == 0, err
    from gpt2_numpy.checkpoints import load_encoder_hparams_and_params

    encoder, hparams, loaded = load_encoder_hparams_and_params(str(folder))
    expected = kvcache.generate(encoder.encode("a b"), half.rounded_params(loaded), N_HEAD, 6)
    assert out == encoder.decode(expected) + "\n" and half.cache_path(folder).is_file()
    # a draft decodes in bf16 too, from the copy beside its own checkpoint: the same tokens as plain decoding
    draft_folder = tmp_path / "draft"
    hfmodel.save_hf_folder(draft_folder, {**hparams, "n_layer": 1}, random_params(seed=6, n_vocab=300, n_embd=32,
                           n_layer=1), encoder.encoder, [])
    for draft in (folder, draft_folder):
        status, drafted, err = run_main(["a b", "--model", str(folder), "--dtype", "bf16", "--n_tokens_to_generate",
                                         "6", "--draft", str(draft), "--draft_tokens", "2"])
        assert (status, drafted) == (0, out), err
    # (converted once, into the file beside the draft's checkpoint, as the model's was)
    assert str(half.cache_path(draft_folder)) in err and half.cache_path(draft_folder).is_file()
    text = tmp_path / "text.txt"
    text.write_text("one two three four five six seven", encoding="utf-8")
    lines = {}
    for dtype in ("f32", "bf16"):
        status, out, err = run_main(["--score", str(text), "--model", str(folder), "--dtype", dtype])
        assert status == 0, err
        lines[dtype] = out
    assert lines["f32"] != lines["bf16"] and lines["f32"].splitlines()[0] == lines["bf16"].splitlines()[0]


def test_gpt2_score_dtype_bf16_says_it_rounds_the_weights_when_that_is_slow(model_folder, tmp_path, monkeypatch):
    """Rounding every matrix to bf16 for --score takes seconds from 355M up (1558M: about 20 s) before the scoring's
    bar: on a terminal said after command_line.SLOW_AFTER_SECONDS, off one by its size (command_line.SLOW_BYTES,
    lowered here to the small model's bytes), at its start; a quick one says nothing."""
    from tokenizer import command_line

    folder, params = model_folder
    text = tmp_path / "text.txt"
    text.write_text("one two three four five six seven", encoding="utf-8")
    argv = ["--score", str(text), "--model", str(folder), "--dtype", "bf16"]
    n_bytes = params_bytes(params)
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes + 1)
    status, scored, err = run_main(argv)
    assert (status, err) == (0, ""), err
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    assert run_main(argv) == (0, scored, "rounding the weights to bf16 ...\n")
    monkeypatch.setattr(command_line, "show_progress", lambda: True)  # on a terminal: said once it is slow
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0)
    monkeypatch.setattr(half, "rounded_params", lambda params, rounded=half.rounded_params: time.sleep(0.3) or
                        rounded(params))
    status, out, err = run_main(argv)
    assert (status, out) == (0, scored) and err.startswith("rounding the weights to bf16 ...\n"), err


@pytest.mark.parametrize("argv, named", [
    (["hi", "--dtype", "f64"], "invalid choice: 'f64'"),
    (["--save_hf", "x", "--dtype", "bf16"], "--dtype bf16 goes with a PROMPT or --score"),
])
def test_gpt2_dtype_mistakes_are_one_line(argv, named, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_main(argv)
    assert status == 2 and out == "" and err.count("\n") == 1 and named in err, err


def test_without_numba_dtype_bf16_is_one_line_naming_the_extra(monkeypatch, tmp_path, model_folder):
    monkeypatch.setitem(sys.modules, "numba", None)  # importlib.util.find_spec("numba") is None: as not installed
    status, out, err = run_main(["hi", "--dtype", "bf16", "--models_dir", str(tmp_path)])  # before any download
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "numba, which is not installed: pip install 'numba>=0.59'" in err
    # --score runs the rounded weights through NumPy: numba is not needed, so not asked for
    folder, params = model_folder
    text = tmp_path / "text.txt"
    text.write_text("one two three four five six seven", encoding="utf-8")
    status, out, err = run_main(["--score", str(text), "--model", str(folder), "--dtype", "bf16"])
    assert (status, err) == (0, "") and out.startswith("tokens: "), err
    with pytest.raises(ValueError, match=r"pip install 'numba>=0.59'"):
        kvcache.DecodingWeights(random_params(n_vocab=10, n_embd=8, n_layer=1), dtype="bf16")


def test_a_numba_that_cannot_be_imported_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    """As numba installed beside a NumPy newer than it supports: found, but its import raises ImportError."""
    broken = tmp_path / "site" / "numba"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('Numba needs NumPy 2.2 or less.\\nGot NumPy 2.3.')\n")
    monkeypatch.delitem(sys.modules, "numba", raising=False)  # (put back after the test)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    status, out, err = run_main(["hi", "--dtype", "bf16", "--models_dir", str(tmp_path)])  # before any download
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "numba, which is installed but cannot be imported (Numba needs NumPy 2.2 or less. Got NumPy 2.3.)" in err
    assert "pip install --upgrade 'numba>=0.59'" in err
    with pytest.raises(ValueError, match=r"cannot be imported"):
        kvcache.DecodingWeights(random_params(n_vocab=10, n_embd=8, n_layer=1), dtype="bf16")


def test_a_prompt_too_long_is_one_line_before_any_conversion(model_folder):
    folder, _ = model_folder  # n_ctx 64
    status, out, err = run_main(["a b", "--model", str(folder), "--dtype", "bf16", "--n_tokens_to_generate", "63"])
    assert status == 2 and out == "" and err.count("\n") == 1 and "exceeds the model's context" in err, err
    assert not half.cache_path(folder).exists()  # nothing converted, nothing written


@pytest.mark.exhaustive  # compiles the kernel: 10-20 s
def test_a_cache_folder_that_cannot_be_written_compiles_every_run_and_says_so_not_once(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder inside a file cannot be made, even by root
    done = subprocess.run([sys.executable, "-c", "from gpt2_numpy import half; half.load_kernel()"],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO), "TOKENIZER_CACHE_DIR": str(blocker / "cache")})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "cannot be written, so every run compiles it" in lines[0] and "once" not in lines[0]
