"""gpt2_numpy/encoder.py (the checkout's encoder.py): OpenAI's Encoder interface, as a thin face on the tokenizer
core."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpt2_numpy import encoder
from conftest import corpus_text
from tokenizer import get_encoding


def test_openai_interface(tmp_path):
    enc = encoder.get_encoder("124M", tmp_path)  # no files there: falls back to the packaged GPT-2 files
    assert enc.encode("Not all heroes wear capes.") == [3673, 477, 10281, 5806, 1451, 274, 13]
    assert enc.decode([3673, 477, 10281, 5806, 1451, 274, 13]) == "Not all heroes wear capes."
    assert enc.encoder["Ġworld"] == 995 and enc.decoder[995] == "Ġworld"
    assert enc.byte_encoder[ord(" ")] == "Ġ" and enc.byte_decoder["Ġ"] == ord(" ")
    assert enc.bpe_ranks[("Ġ", "t")] == 0
    assert enc.bpe("Ġcapes") == "Ġcap es"
    assert enc.encode("<|endoftext|>") == [27, 91, 437, 1659, 5239, 91, 29]  # plain text, as in OpenAI's encoder


def test_same_ids_as_core_on_corpus():
    enc = encoder.get_encoder("124M", "models")
    text = corpus_text("en_docs.txt", 500_000) + corpus_text("ru_manpages.txt", 200_000)
    assert enc.encode(text) == get_encoding("gpt2").encode_ordinary(text)


def test_reads_files_from_model_folder(tmp_path):
    # a model folder with its own (tiny) vocabulary: bytes + one merge
    folder = tmp_path / "tiny"
    folder.mkdir()
    base = encoder.get_encoder("124M", tmp_path)
    vocab = {s: i for s, i in base.encoder.items() if i < 256}
    vocab["he"] = 256
    vocab["<|endoftext|>"] = 257
    (folder / "encoder.json").write_text(json.dumps(vocab))
    (folder / "vocab.bpe").write_text("#version: 0.2\nh e\n")
    enc = encoder.get_encoder("tiny", tmp_path)
    assert enc.encode("hehe") == [256, 256]
    assert enc.decode([256, 257]) == "he<|endoftext|>"


def test_unknown_model_name_without_files_is_an_error_not_gpt2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"my-tokenizr-gpt2.*folder does not exist.*124M"):
        encoder.get_encoder("my-tokenizr-gpt2", ".")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "encoder.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"half.*no vocab\.bpe"):
        encoder.get_encoder("half", tmp_path)
    # GPT-2's own sizes share one vocabulary: those names still fall back to the packaged files
    assert encoder.get_encoder("1558M", tmp_path).encode("hello world") == [31373, 995]


def test_broken_vocab_files_are_refused_naming_the_file(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    packaged = Path(encoder.PACKAGED)
    text = (packaged / "encoder.json").read_text(encoding="utf-8")
    (folder / "encoder.json").write_text(text[: len(text) // 2], encoding="utf-8")  # truncated
    (folder / "vocab.bpe").write_bytes((packaged / "vocab.bpe").read_bytes())
    with pytest.raises(ValueError, match=r"broken[/\\]encoder\.json: not valid JSON"):
        encoder.get_encoder("broken", tmp_path)
    (folder / "encoder.json").write_text(text, encoding="utf-8")
    for content in ["", "#version: 0.2\n", "#version: 0.2\n\n"]:
        (folder / "vocab.bpe").write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=r"broken[/\\]vocab\.bpe: no merges"):
            encoder.get_encoder("broken", tmp_path)
    (folder / "vocab.bpe").write_bytes(b"#version: 0.2\n\xff\xfe e\n")
    with pytest.raises(ValueError, match=r"vocab\.bpe is not valid UTF-8: byte 14"):
        encoder.get_encoder("broken", tmp_path)
