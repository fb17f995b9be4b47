"""`python -m tokenizer` encode/decode/count, run as a user would (subprocess), including its errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CORPUS, REPO


def run(*args, ok=True):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "tokenizer", *args], capture_output=True, text=True, env=env, cwd=REPO)
    assert (proc.returncode == 0) == ok, proc.stderr
    return proc


def test_encode_and_decode_round_trip():
    assert run("encode", "hello world").stdout.split() == ["31373", "995"]
    assert run("decode", "31373", "995").stdout == "hello world\n"
    assert run("decode", "31373 995").stdout == "hello world\n"
    assert run("encode", "hello world", "--encoding", "cl100k_base").stdout.split() == ["15339", "1917"]


def test_encode_keeps_numbers_as_text():
    assert run("encode", "42").stdout.split() == ["3682"]  # the token "42", not the number


def test_count_file():
    out = run("count", str(CORPUS / "de_manpages.txt"), "--encoding", "gpt4").stdout
    assert "de_manpages.txt" in out and "tokens" in out and "bytes/token" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "x", "--encoding", "gpt5"], "Unknown encoding 'gpt5'"),
        (["decode", "99999999"], "not in the vocabulary"),
        (["decode", "hello"], "integer token ids"),
        (["count", "/no/such/file.txt"], "no such file"),
    ],
)
def test_errors_are_one_line(args, message):
    proc = run(*args, ok=False)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("fmt", ["gpt2", "tiktoken", "hf"])
def test_train_saves_a_loadable_tokenizer(tmp_path, fmt):
    import tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes((CORPUS / "en_docs.txt").read_bytes()[:300_000])
    out = tmp_path / "tok"
    proc = run("train", "--input", str(corpus), "--vocab_size", "400", "--special_tokens", "<|endoftext|>",
               "--out", str(out), "--format", fmt, "--num_workers", "2")
    for expected in ["trained 143 merges (400 tokens)", "peak memory:", "longest token:", "bytes/token"]:
        assert expected in proc.stdout
    enc = tokenizer.load(out)
    text = corpus.read_text(encoding="utf-8")[:20_000]
    ids = enc.encode(text, allowed_special="all")
    assert enc.decode(ids) == text and max(ids) < 400


def test_train_errors():
    assert "needs --input" in run("train", "--vocab_size", "300", ok=False).stderr
    assert "too small" in run("train", "--input", str(CORPUS / "de_manpages.txt"), "--vocab_size", "10",
                              "--out", "/tmp/never", ok=False).stderr
