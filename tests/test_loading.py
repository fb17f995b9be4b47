"""tokenizer.loading for folders other projects write: GPT-2's two files under Hugging Face's names
(``vocab.json`` + ``merges.txt``), as ``gpt2 --save_hf`` (gpt2_numpy.checkpoints.save_hf) writes them."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tiktoken

from conftest import corpus_text
from gpt2_numpy import checkpoints
from gpt2_numpy.encoder import get_encoder
from tokenizer import cli
from tokenizer.loading import load_encoding


def tiny_params(n_vocab=50257, n_ctx=8, n_embd=4):
    """picoGPT's weight tree, one block, tiny: only the folder's tokenizer files matter here."""
    def dense(nx, nf):
        return {"w": np.zeros((nx, nf), np.float32), "b": np.zeros(nf, np.float32)}

    def norm():
        return {"g": np.ones(n_embd, np.float32), "b": np.zeros(n_embd, np.float32)}

    block = {"ln_1": norm(), "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
             "ln_2": norm(), "mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)}}
    return {"wte": np.zeros((n_vocab, n_embd), np.float32), "wpe": np.zeros((n_ctx, n_embd), np.float32),
            "blocks": [block], "ln_f": norm()}


@pytest.fixture(scope="module")
def save_hf_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "gpt2-hf"
    hparams = {"n_vocab": 50257, "n_ctx": 8, "n_embd": 4, "n_head": 1, "n_layer": 1}
    checkpoints.save_hf(folder, get_encoder("124M", tmp_path_factory.mktemp("models")), hparams, tiny_params())
    assert {"vocab.json", "merges.txt"} <= {p.name for p in folder.iterdir()}
    assert not (folder / "tokenizer.json").exists() and not (folder / "encoder.json").exists()
    return folder


TEXT = "Hello, world! <|endoftext|> naïve 🙂 don't  \n\n  1234 " + corpus_text("en_docs.txt", 3000)


def test_a_save_hf_folder_loads_with_gpt2s_ids(save_hf_folder):
    theirs = tiktoken.get_encoding("gpt2")
    for path in (save_hf_folder, save_hf_folder / "vocab.json", save_hf_folder / "merges.txt"):
        enc = load_encoding(path)
        assert enc.encode(TEXT, allowed_special="all") == theirs.encode(TEXT, allowed_special="all")
        assert enc.special_tokens == {"<|endoftext|>": 50256} and enc.n_vocab == 50257


def test_cli_encoding_dir_takes_a_save_hf_folder(save_hf_folder, capsys):
    assert cli.main(["encode", "Hello, world", "--encoding", str(save_hf_folder)], prog="t") == 0
    assert capsys.readouterr().out.split() == ["15496", "11", "995"]


def test_half_an_hf_pair_names_the_missing_file(save_hf_folder, tmp_path):
    folder = tmp_path / "half"
    shutil.copytree(save_hf_folder, folder)
    (folder / "merges.txt").unlink()
    with pytest.raises(FileNotFoundError, match=r"merges\.txt: missing; vocab\.json and merges\.txt go together"):
        load_encoding(folder)


def test_a_folder_with_nothing_names_every_layout(tmp_path):
    with pytest.raises(ValueError, match=r"vocab\.json \+ merges\.txt"):
        load_encoding(tmp_path)


@pytest.mark.parametrize("format_, file", [("gpt2", "encoder.json"), ("hf", "tokenizer.json")])
def test_a_tokenizer_read_from_the_current_folder_bears_its_name(tmp_path, monkeypatch, capsys, format_, file):
    # --encoding . (or a file of the current folder) named the tokenizer "": show printed "(...) bytes ()" and
    # stats a row without a name
    from tokenizer import Encoding

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"hi"}
    Encoding.from_vocab_merges(vocab, [(b"h", b"i")], [], name="x").save(tmp_path / "mine", format=format_)
    monkeypatch.chdir(tmp_path / "mine")
    assert load_encoding(".").name == load_encoding(file).name == load_encoding("./").name == "mine"
    assert cli.main(["show", "ih", "--encoding", "."], prog="t") == 0
    assert capsys.readouterr().out.splitlines()[2] == "2 tokens, 2 characters, 2 bytes (mine)"
