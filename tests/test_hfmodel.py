"""Hugging Face folders (gpt2_numpy/hfmodel.py, load_encoder_hparams_and_params with a path, --save_hf) and
score (gpt2_numpy/scoring.py), against transformers: a folder transformers wrote reads back to the same weights and
logits, ours loads in transformers with the same logits, and score equals transformers' loss."""

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import GPT2LMHeadModel, GPT2TokenizerFast

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import gpt2  # noqa: E402 - the checkout's picoGPT face: gpt2.gpt2, gpt2.generate, gpt2.score
from gpt2_numpy import hfmodel  # noqa: E402
from gpt2_numpy import checkpoints  # noqa: E402
from test_gpt2 import N_HEAD, hf_logits, hf_model, params_bytes, random_params, run_main  # noqa: E402
from test_utils import assert_same_params  # noqa: E402

VOCAB = ROOT / "tokenizer" / "data"
TEXT = ("The tower is 324 metres (1,063 ft) tall, about the same height as an 81-storey building, and the "
        "tallest structure in Paris. Its base is square, measuring 125 metres (410 ft) on each side. ") * 3


@pytest.fixture(scope="module")
def params():
    return random_params(seed=3, n_ctx=48, n_embd=32, scale=0.1)


@pytest.fixture(scope="module")
def hf(params):
    return hf_model(params)  # float64 oracle


@pytest.fixture(scope="module")
def hf_folder(params, tmp_path_factory):
    """A folder written by transformers itself (save_pretrained) from the same weights, with a
    tokenizer.json written by Hugging Face's tokenizers and, as the hub's gpt2 repo has, vocab.json +
    merges.txt."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path_factory.mktemp("hf") / "gpt2-tiny"
    hf_model(params).float().save_pretrained(folder, safe_serialization=True)
    tokenizer = Tokenizer(models.BPE.from_file(str(VOCAB / "encoder.json"), str(VOCAB / "vocab.bpe")))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.save(str(folder / "tokenizer.json"))
    shutil.copyfile(VOCAB / "encoder.json", folder / "vocab.json")
    shutil.copyfile(VOCAB / "vocab.bpe", folder / "merges.txt")
    return folder


def test_folder_written_by_transformers_reads_back_exactly(hf_folder, params, hf):
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in hf_folder.iterdir()}
    encoder, hparams, loaded = checkpoints.load_encoder_hparams_and_params(str(hf_folder))
    assert hparams == {"n_vocab": 50257, "n_ctx": 48, "n_embd": 32, "n_head": N_HEAD, "n_layer": 2}
    assert_same_params(loaded, params)
    assert isinstance(loaded["wte"], np.memmap)  # mapped, not copied
    ids = encoder.encode(TEXT)[:40]
    assert encoder.encode("Hello world") == [15496, 995]
    ours = gpt2.gpt2(ids, **loaded, n_head=N_HEAD)
    assert np.abs(ours - hf_logits(hf, ids)).max() <= 1e-4
    greedy = hf.generate(torch.tensor([ids[:10]]), max_new_tokens=8, do_sample=False, pad_token_id=0)[0, 10:].tolist()
    assert gpt2.generate(ids[:10], loaded, N_HEAD, 8) == greedy


def test_tokenizer_json_alone_is_enough(hf_folder, tmp_path):
    folder = tmp_path / "only-tokenizer-json"
    shutil.copytree(hf_folder, folder)
    (folder / "vocab.json").unlink()
    (folder / "merges.txt").unlink()
    encoder, _, _ = checkpoints.load_encoder_hparams_and_params(str(folder))
    text = "Not all heroes wear capes. naïve 🙂"
    assert encoder.encode(text) == __import__("encoder").get_encoder("", VOCAB).encode(text)
    assert json.loads((folder / "tokenizer.json").read_text())["model"]["merges"]  # it did hold the merges


def test_a_damaged_vocab_json_or_tokenizer_json_is_named_with_the_place_of_the_damage(hf_folder, tmp_path):
    """The error named the folder alone; now it names the file, the line and column, and what to do."""
    folder = tmp_path / "damaged"
    shutil.copytree(hf_folder, folder)
    (folder / "vocab.json").write_text('{"a": 0,\n "b: 1}', encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        checkpoints.load_encoder_hparams_and_params(str(folder))
    assert (f"{folder / 'vocab.json'}: not valid JSON at line 2, column 2: Unterminated string starting at; "
            f"the file is damaged or cut short: replace it with a good copy") in str(refused.value)
    for name in ("vocab.json", "merges.txt"):
        (folder / name).unlink()
    (folder / "tokenizer.json").write_text('{"model": ', encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer\.json: not valid JSON at line 1, column 11: Expecting value;"):
        checkpoints.load_encoder_hparams_and_params(str(folder))


def test_a_model_saved_without_its_tokenizer_takes_gpt2s_vocabulary_if_it_has_gpt2s_ids(hf_folder, tmp_path):
    """model.save_pretrained(DIR) writes config.json and model.safetensors, no tokenizer: with GPT-2's 50257 ids
    the folder runs on GPT-2's own vocabulary (as the loader's comment always said; it was get_encoder's "no
    tokenizer files there ... or one of GPT-2's model names", exit 1 from gpt2 --model DIR); with other ids, one
    error saying the tokenizer files are wanted."""
    folder = tmp_path / "model-only"
    shutil.copytree(hf_folder, folder)
    for name in ("vocab.json", "merges.txt", "tokenizer.json"):
        (folder / name).unlink()
    encoder, hparams, _ = checkpoints.load_encoder_hparams_and_params(str(folder))
    assert hparams["n_vocab"] == 50257
    assert encoder.encode(TEXT) == __import__("encoder").get_encoder("", VOCAB).encode(TEXT)
    assert run_main(["Not all heroes", "--model", str(folder), "--n_tokens_to_generate", "2"])[0] == 0

    other = tmp_path / "other-vocab"
    hparams = {"n_vocab": 300, "n_ctx": 48, "n_embd": 32, "n_head": N_HEAD, "n_layer": 2}
    vocab = {chr(0x100 + i): i for i in range(300)}  # any 300 token strings: they are deleted below
    hfmodel.save_hf_folder(other, hparams, random_params(seed=4, n_vocab=300, n_ctx=48, n_embd=32), vocab, [])
    for name in ("vocab.json", "merges.txt"):
        (other / name).unlink()
    with pytest.raises(ValueError, match=r"holds no tokenizer .* 300 ids are not GPT-2's 50257; put the model's "):
        checkpoints.load_encoder_hparams_and_params(str(other))


def test_hf_shapes_lists_its_tensors_in_picogpts_order(params):
    """hf_shapes promises picoGPT's order: its names, placed in the tree, come in the order a depth-first walk
    of picoGPT's tree (wte, wpe, blocks of ln_1, attn, ln_2, mlp, ln_f) meets the arrays."""
    def leaves(tree, path=()):
        if isinstance(tree, np.ndarray):
            yield list(path)
        else:
            for key, subtree in (enumerate(tree) if isinstance(tree, list) else tree.items()):
                yield from leaves(subtree, (*path, key))

    hparams = {"n_vocab": params["wte"].shape[0], "n_ctx": params["wpe"].shape[0], "n_embd": params["wte"].shape[1],
               "n_layer": len(params["blocks"])}
    shapes = hfmodel.hf_shapes(hparams)
    assert [hfmodel.picogpt_keys(name) for name in shapes] == list(leaves(params))
    for name, shape in shapes.items():
        node = params
        for key in hfmodel.picogpt_keys(name):
            node = node[key]
        assert node.shape == shape, name


def test_save_hf_round_trip(params, tmp_path):
    """Ours -> folder -> transformers: the same logits; and back through our reader: the same weights."""
    hparams = {"n_vocab": 50257, "n_ctx": 48, "n_embd": 32, "n_head": N_HEAD, "n_layer": 2}
    encoder = __import__("encoder").get_encoder("", VOCAB)
    checkpoints.save_hf(tmp_path / "out", encoder, hparams, params)
    model = GPT2LMHeadModel.from_pretrained(tmp_path / "out").eval()
    ids = encoder.encode(TEXT)[:40]
    theirs = hf_logits(model, ids)
    ours = gpt2.gpt2(ids, **params, n_head=N_HEAD)
    assert np.abs(ours - theirs).max() <= 1e-4
    _, hparams_back, params_back = checkpoints.load_encoder_hparams_and_params(str(tmp_path / "out"))
    assert hparams_back == hparams
    assert_same_params(params_back, params)
    assert GPT2TokenizerFast.from_pretrained(tmp_path / "out")(TEXT)["input_ids"] == encoder.encode(TEXT)
    with pytest.raises(FileExistsError, match="already holds a model"):  # never written over
        checkpoints.save_hf(tmp_path / "out", encoder, hparams, params)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary folder left


def test_cli_save_hf_writes_a_folder_transformers_loads(hf_folder, params, tmp_path):
    """`gpt2 --model FOLDER --save_hf DIR` (FOLDER as transformers wrote it): transformers loads DIR, its logits
    are ours, and its tokenizer gives GPT-2's ids."""
    out = tmp_path / "out"
    assert run_main(["--model", str(hf_folder), "--save_hf", str(out)])[0] == 0
    model = GPT2LMHeadModel.from_pretrained(out).eval()
    encoder = __import__("encoder").get_encoder("", VOCAB)
    ids = encoder.encode(TEXT)[:40]
    assert np.abs(gpt2.gpt2(ids, **params, n_head=N_HEAD) - hf_logits(model, ids)).max() <= 1e-4
    assert GPT2TokenizerFast.from_pretrained(out)(TEXT)["input_ids"] == encoder.encode(TEXT)


def test_openai_folder_by_path_and_cli_save_hf(tmp_path):
    """`gpt2 --model FOLDER --save-hf DIR` from an OpenAI-layout folder, then generating from DIR."""
    from tiny_checkpoint import write_tiny_checkpoint

    params = write_tiny_checkpoint(tmp_path / "openai")
    assert run_main(["--model", str(tmp_path / "openai"), "--save-hf", str(tmp_path / "hf")])[0] == 0
    _, _, loaded = checkpoints.load_encoder_hparams_and_params(str(tmp_path / "hf"))
    assert_same_params(loaded, params)
    status_a, out_a, _ = run_main(["Hello", "--model", str(tmp_path / "openai"), "--n_tokens_to_generate", "5"])
    status_b, out_b, _ = run_main(["Hello", "--model", str(tmp_path / "hf"), "--n_tokens_to_generate", "5"])
    assert status_a == status_b == 0 and out_a == out_b and out_a.strip()


def test_cli_save_hf_refuses_the_folder_the_model_is_read_from(tmp_path):
    """--save_hf into --model's own folder would replace the model it reads (with --force) or leave two layouts
    in one folder: refused in one line, before any work, nothing written."""
    from tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(tmp_path / "openai")
    assert run_main(["--model", str(tmp_path / "openai"), "--save_hf", str(tmp_path / "hf")])[0] == 0
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for model, out in [("hf", "hf"), ("hf", "hf/../hf"), ("openai", "openai")]:
        status, stdout, stderr = run_main(["--model", str(tmp_path / model), "--save_hf", str(tmp_path / out),
                                           "--force"])
        assert (status, stdout) == (2, "") and stderr.count("\n") == 1, stderr
        assert f"--save_hf {tmp_path / out} is the folder --model reads the model from; name another folder" in stderr
    status, _, stderr = run_main(["--model", "124M", "--models_dir", str(tmp_path / "models"), "--save_hf",
                                  str(tmp_path / "models" / "124M")])
    assert status == 2 and "is the folder --model reads the model from" in stderr  # before any download
    status, _, stderr = run_main(["hi", "--model", str(tmp_path / "openai"), "--draft", str(tmp_path / "hf"),
                                  "--save_hf", str(tmp_path / "hf"), "--force"])
    assert status == 2 and f"--save_hf {tmp_path / 'hf'} is the folder --draft reads the model from" in stderr
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_cli_save_hf_writes_nothing_when_the_prompt_or_the_text_cannot_be_run(tmp_path):
    """A mistake the loaded model shows (a prompt too long for its context, a text too short to score, a stride
    past the context) is told, in one line, before --save_hf's folder is written: nothing is left behind."""
    from tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(tmp_path / "openai")  # n_ctx 32
    (tmp_path / "one.txt").write_text("a", encoding="utf-8")
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    out = tmp_path / "hf"
    for run, said in [(["Hello", "--n_tokens_to_generate", "40"], "exceeds the model's context"),
                      (["--score", str(tmp_path / "one.txt")], "holds 1 token"),
                      (["--score", str(tmp_path / "text.txt"), "--stride", "40"], "--stride 40 is more than")]:
        status, stdout, stderr = run_main([*run, "--model", str(tmp_path / "openai"), "--save_hf", str(out)])
        assert (status, stdout) == (2, "") and stderr.count("\n") == 1 and said in stderr, stderr
        assert not out.exists()


def test_cli_save_hf_says_what_it_writes_when_it_is_slow(tmp_path, monkeypatch):
    """A large model's --save_hf (6 GB at 1558M) says "writing DIR ..." on a terminal after
    command_line.SLOW_AFTER_SECONDS; a quick one, or stderr on no terminal, says nothing but its `wrote`."""
    import time

    from gpt2_numpy import cli
    from tiny_checkpoint import write_tiny_checkpoint
    from tokenizer import command_line

    write_tiny_checkpoint(tmp_path / "openai")
    save = cli.save_hf
    monkeypatch.setattr(cli, "save_hf", lambda *args, **kwargs: time.sleep(0.5) or save(*args, **kwargs))
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0.1)
    argv = ["--model", str(tmp_path / "openai"), "--save_hf"]
    assert run_main(argv + [str(tmp_path / "quiet")]) == (0, f"wrote {tmp_path / 'quiet'}\n", "")
    monkeypatch.setattr(command_line, "show_progress", lambda: True)
    assert run_main(argv + [str(tmp_path / "said")]) == (0, f"wrote {tmp_path / 'said'}\n",
                                                          f"writing {tmp_path / 'said'} ...\n")
    assert checkpoints.folder_layout(tmp_path / "said") == "hf"


def test_a_draft_with_more_token_ids_than_the_model_is_told_before_save_hf_writes(tmp_path):
    """A draft with GPT-2's tokens but a padded number of ids (50304, as nanoGPT's) cannot draft for the model:
    one line naming --draft, exit 2, before --save_hf's folder is written (not once the run is under way)."""
    from tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(tmp_path / "openai")
    encoder, hparams, _ = checkpoints.load_encoder_hparams_and_params(str(tmp_path / "openai"))
    hfmodel.save_hf_folder(tmp_path / "padded", {**hparams, "n_vocab": 50304, "n_layer": 1},
                           random_params(n_vocab=50304, n_ctx=hparams["n_ctx"], n_embd=hparams["n_embd"], n_layer=1),
                           encoder.encoder, sorted(encoder.bpe_ranks, key=encoder.bpe_ranks.__getitem__))
    out = tmp_path / "out"
    status, stdout, stderr = run_main(["hi", "--model", str(tmp_path / "openai"), "--draft", str(tmp_path / "padded"),
                                       "--n_tokens_to_generate", "5", "--save_hf", str(out)])
    assert (status, stdout) == (2, "") and stderr.count("\n") == 1, stderr
    assert f"--draft {tmp_path / 'padded'}: its model has 50304 token ids and --model" in stderr
    assert not out.exists()


def test_an_id_past_the_tokenizers_prints_as_nothing_and_is_said_once(tmp_path):
    """A model with more token ids than its tokenizer has tokens (padded to 50304, as nanoGPT's): an id past them
    stands for no text, so it prints as nothing (as HF's tokenizers decode it), said once on stderr; not a
    traceback from the decoder. Here ln_f sends every position to the same vector, which row 50300 of wte
    matches best: greedy picks it every time."""
    from tiny_checkpoint import write_tiny_checkpoint

    write_tiny_checkpoint(tmp_path / "openai")
    encoder, hparams, _ = checkpoints.load_encoder_hparams_and_params(str(tmp_path / "openai"))
    padded = random_params(n_vocab=50304, n_ctx=hparams["n_ctx"], n_embd=hparams["n_embd"], n_layer=1)
    padded["ln_f"] = {"g": np.zeros(hparams["n_embd"], np.float32), "b": np.ones(hparams["n_embd"], np.float32)}
    padded["wte"][50300] = 1.0
    hfmodel.save_hf_folder(tmp_path / "padded", {**hparams, "n_vocab": 50304, "n_layer": 1}, padded,
                           encoder.encoder, sorted(encoder.bpe_ranks, key=encoder.bpe_ranks.__getitem__))
    said = ("token id 50300 stands for no text: the model has 50304 token ids, its tokenizer 50257 tokens (a padded "
            "vocabulary); such ids print as nothing\n")
    for stream in ([], ["--stream"]):
        assert run_main(["hi", "--model", str(tmp_path / "padded"), "--n_tokens_to_generate", "3", *stream]) == \
            (0, "\n", said)


def test_off_a_terminal_a_large_save_hf_says_what_it_writes_at_its_start(tmp_path, monkeypatch):
    """A log gets no timed line: writing command_line.SLOW_BYTES or more of weights (355M and up) is announced by
    its size as it starts. SLOW_BYTES lowered to the tiny model's float32 bytes stands in for a large model."""
    from tiny_checkpoint import write_tiny_checkpoint
    from tokenizer import command_line

    params = write_tiny_checkpoint(tmp_path / "openai")
    argv = ["--model", str(tmp_path / "openai"), "--save_hf"]
    assert run_main(argv + [str(tmp_path / "first")])[0] == 0  # (the first load's CRC check done)
    n_bytes = params_bytes(params)
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes + 1)
    assert run_main(argv + [str(tmp_path / "quiet")]) == (0, f"wrote {tmp_path / 'quiet'}\n", "")
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    assert run_main(argv + [str(tmp_path / "said")]) == (0, f"wrote {tmp_path / 'said'}\n",
                                                          f"writing {tmp_path / 'said'} ...\n")


# -------------------------------------------------------------------------------- score
def hf_token_nlls(model, ids):
    """Every predicted token's NLL from one HF pass (the input must fit the context)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    return -torch.log_softmax(logits, -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()


def test_score_equals_hf_loss(params, hf):
    encoder = __import__("encoder").get_encoder("", VOCAB)
    ids = encoder.encode(TEXT)[:48]
    with torch.no_grad():
        loss = hf(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
    assert abs(gpt2.score(ids, params, N_HEAD) - loss) <= 1e-4


@pytest.mark.parametrize("stride", [3, 7, 24, 48])
def test_score_with_striding_equals_hf_windows(params, hf, stride):
    """HF's sliding-window recipe, token by token: each window of n_ctx ids scores the ids after
    the previous window's end."""
    encoder = __import__("encoder").get_encoder("", VOCAB)
    ids = encoder.encode(TEXT)
    assert len(ids) > 2 * 48
    nlls, scored_up_to = [], 1
    for start in range(0, len(ids), stride):
        end = min(start + 48, len(ids))
        nlls += list(hf_token_nlls(hf, ids[start:end])[max(scored_up_to - 1 - start, 0) :])
        scored_up_to = end
        if end == len(ids):
            break
    # every id but the first is scored, except, without overlap, each window's first
    assert len(nlls) == len(ids) - 1 - (stride == 48) * ((len(ids) - 1) // 48)
    assert abs(gpt2.score(ids, params, N_HEAD, stride=stride) - float(np.mean(nlls))) <= 1e-4


def test_score_cli_prints_tokens_perplexity_bits_per_byte(hf_folder, params, tmp_path):
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    status, out, err = run_main(["--score", str(tmp_path / "text.txt"), "--model", str(hf_folder), "--stride", "16"])
    assert status == 0, err
    encoder = __import__("encoder").get_encoder("", VOCAB)
    ids = encoder.encode(TEXT)
    nll = gpt2.score(ids, params, N_HEAD, stride=16)
    first_bytes = len(encoder.decode(ids[:1]).encode())
    assert out.splitlines() == [
        f"tokens: {len(ids)} ({len(ids) - 1} predicted)",
        f"mean NLL: {nll:.4f} nats/token",
        f"perplexity: {math.exp(nll):.4f}",
        f"bits per byte: {nll * (len(ids) - 1) / math.log(2) / (len(TEXT.encode()) - first_bytes):.4f}",
    ]


def test_score_cli_without_overlap_counts_only_the_predicted_tokens(hf_folder, params, tmp_path):
    """With stride == n_ctx each window's first id is not predicted: bits per byte divides the
    nats of the ids that were predicted by the bytes of those ids only."""
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    status, out, err = run_main(["--score", str(tmp_path / "text.txt"), "--model", str(hf_folder), "--stride", "48"])
    assert status == 0, err
    encoder = __import__("encoder").get_encoder("", VOCAB)
    ids = encoder.encode(TEXT)
    unpredicted = range(0, len(ids), 48)  # the first id of each window
    assert len(unpredicted) >= 3
    predicted_bytes = len(TEXT.encode()) - sum(len(encoder.decode([ids[i]]).encode()) for i in unpredicted)
    nll = gpt2.score(ids, params, N_HEAD, stride=48)
    n_predicted = len(ids) - len(unpredicted)
    assert out.splitlines() == [
        f"tokens: {len(ids)} ({n_predicted} predicted)",
        f"mean NLL: {nll:.4f} nats/token",
        f"perplexity: {math.exp(nll):.4f}",
        f"bits per byte: {nll * n_predicted / math.log(2) / predicted_bytes:.4f}",
    ]


def test_score_rejects_too_short_input(params):
    with pytest.raises(ValueError, match=">= 2 ids"):
        gpt2.score([5], params, N_HEAD)


# ---------------------------------------------------------------------------- bad input
def test_a_folder_in_neither_layout(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="neither OpenAI's layout .* nor Hugging Face's"):
        checkpoints.load_encoder_hparams_and_params(str(tmp_path))
    assert run_main(["hi", "--model", str(tmp_path)])[0] == 2


def test_config_disagreeing_with_the_tensors(hf_folder, tmp_path):
    folder = tmp_path / "bad-config"
    shutil.copytree(hf_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "n_embd": 64}))
    with pytest.raises(ValueError, match=r"tensor wte.weight has shape \[50257, 32\], but config.json"):
        checkpoints.load_encoder_hparams_and_params(str(folder))
    (folder / "config.json").write_text(json.dumps({**config, "n_layer": 3}))
    with pytest.raises(ValueError, match=r"missing tensors \['h.2.ln_1.weight'"):
        checkpoints.load_encoder_hparams_and_params(str(folder))
    (folder / "config.json").write_text(json.dumps({**config, "n_layer": 1}))
    with pytest.raises(ValueError, match=r"unexpected tensors \['transformer.h.1|unexpected tensors \['h.1"):
        checkpoints.load_encoder_hparams_and_params(str(folder))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_weights_are_widened_and_a_large_widening_says_so(params, hf_folder, tmp_path, dtype, monkeypatch,
                                                                  capsys):
    """A folder saved in 16 bits loads as the float32 its numbers are, every one exact. Widening them makes the
    whole model again in memory (1558M: 6 GB, seconds): off a terminal said in one line at its start when that
    is command_line.SLOW_BYTES or more (lowered here to the tiny model's bytes), nothing when it is less."""
    from tokenizer import command_line

    folder = tmp_path / "half"
    hf_model(params).to(dtype).save_pretrained(folder, safe_serialization=True)
    capsys.readouterr()  # (transformers' own bar)
    loaded = hfmodel.read_safetensors(folder / "model.safetensors")
    expected = hfmodel.read_safetensors(hf_folder / "model.safetensors")  # float32
    n_bytes = sum(array.nbytes for array in loaded.values())
    assert capsys.readouterr().err == ""  # (a small model: nothing said)
    for name, array in loaded.items():
        assert array.dtype == np.float32
        rounded = torch.from_numpy(np.array(expected[name])).to(dtype).float().numpy()
        assert np.array_equal(array, rounded), name
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    hfmodel.read_safetensors(folder / "model.safetensors")
    kind = "F16" if dtype == torch.float16 else "BF16"
    said = capsys.readouterr().err
    assert said == f"converting the {kind} weights of {folder / 'model.safetensors'} to float32 ...\n"


def test_a_pytorch_pickle_is_read_through_torch_and_a_large_one_says_so(params, hf_folder, tmp_path, monkeypatch,
                                                                         capsys):
    """An old-style folder (pytorch_model.bin, no safetensors) loads the same weights through torch. The pickle is
    read whole (1558M: 6 GB, seconds): off a terminal said in one line at its start when it is
    command_line.SLOW_BYTES or more (lowered here to the file's size), nothing when it is less."""
    from tokenizer import command_line

    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copyfile(hf_folder / "config.json", folder / "config.json")
    torch.save(hf_model(params).float().state_dict(), folder / hfmodel.PYTORCH_BIN)
    n_bytes = (folder / hfmodel.PYTORCH_BIN).stat().st_size
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes + 1)
    _, loaded = hfmodel.load_hf_folder(folder)
    assert capsys.readouterr().err == ""
    assert_same_params(loaded, hfmodel.load_hf_folder(hf_folder)[1])
    monkeypatch.setattr(command_line, "SLOW_BYTES", n_bytes)
    hfmodel.load_hf_folder(folder)
    assert capsys.readouterr().err == f"reading {folder / hfmodel.PYTORCH_BIN} through torch ...\n"


def test_a_missing_tensor_and_a_truncated_file(hf_folder, tmp_path):
    tensors = hfmodel.read_safetensors(hf_folder / "model.safetensors")
    folder = tmp_path / "missing"
    shutil.copytree(hf_folder, folder)
    hfmodel.write_safetensors(folder / "model.safetensors",
                              {k: v for k, v in tensors.items() if k != "transformer.h.1.mlp.c_fc.bias"}, {"format": "pt"})
    with pytest.raises(ValueError, match=r"missing tensors \['h.1.mlp.c_fc.bias'\]"):
        checkpoints.load_encoder_hparams_and_params(str(folder))
    data = (hf_folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) - 100])
    with pytest.raises(ValueError, match="model.safetensors is not a readable safetensors file: .*truncated"):
        checkpoints.load_encoder_hparams_and_params(str(folder))
