"""Vocabulary files parsed once and read back quickly (tokenizer/fast/vocab_cache.py): the same dict, or nothing."""

from __future__ import annotations

import doctest
import sys

import pytest

import tokenizer.registry as registry
import tokenizer.fast.vocab_cache as vocab_cache
from conftest import ENCODINGS_DIR
from tokenizer import get_encoding
from tokenizer.vocab_files import read_gpt2_encoder_json, read_tiktoken_file

SHA = "ab" * 32


@pytest.fixture
def cache(monkeypatch, tmp_path):
    """An empty user cache and no encoding loaded yet."""
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "vocabularies"


def test_docstring_examples():
    assert doctest.testmod(vocab_cache).failed == 0


@pytest.mark.parametrize("name", ["gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base"])
def test_every_vocabulary_comes_back_the_same_in_the_same_order(name):
    if name == "gpt2":
        ranks, _ = read_gpt2_encoder_json(registry.PACKAGE_DATA / "encoder.json")
    else:
        ranks = read_tiktoken_file(ENCODINGS_DIR / f"{name}.tiktoken")
    back = vocab_cache.unpack(vocab_cache.pack(ranks, sha256=SHA), sha256=SHA)
    assert list(back.items()) == list(ranks.items())


def small_packed() -> bytes:
    return vocab_cache.pack({b"a": 0, b"bc": 5, b"\xff\x00": 2**40}, sha256=SHA)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :]


@pytest.mark.parametrize("damage", [
    lambda d: d[:-1],  # cut short
    lambda d: d + b"\0",  # longer
    lambda d: flip(d, len(d) - 1),  # a token's byte
    lambda d: flip(d, len(d) - 12),  # a rank's byte
    lambda d: b"",
    lambda d: b"garbage" * 10,
    lambda d: d.replace(b'"format": 1', b'"format": 9'),
    lambda d: d.replace(sys.byteorder.encode(), b"other"),
    lambda d: d.replace(b'"tokens": 3', b'"tokens": 2'),
    lambda d: d.replace(b'"item_sizes": [4, 8]', b'"item_sizes": [8, 8]'),
    lambda d: d.replace(b'{"format"', b'["format"'),
], ids=["cut", "longer", "token byte", "rank byte", "empty", "garbage", "format", "byte order", "count",
        "item sizes", "header not JSON"])
def test_a_damaged_or_foreign_file_is_nothing(damage):
    assert vocab_cache.unpack(small_packed(), sha256=SHA) == {b"a": 0, b"bc": 5, b"\xff\x00": 2**40}
    assert vocab_cache.unpack(damage(small_packed()), sha256=SHA) is None


def test_a_file_made_for_another_vocabulary_file_is_nothing():
    assert vocab_cache.unpack(small_packed(), sha256="cd" * 32) is None


def test_ranks_beyond_64_bits_are_not_saved(cache):
    vocab_cache.save(SHA, {b"a": 2**70})
    assert vocab_cache.load_saved(SHA) is None and not cache.exists()


def test_get_encoding_parses_once_then_reads_the_saved_copy(cache, monkeypatch):
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
    first = get_encoding("cl100k_base")
    assert [p.name for p in cache.iterdir()] == [registry.CL100K.sha256 + ".vocab"]
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.setattr(registry, "read_tiktoken_file", lambda *a: pytest.fail("parsed the file again"))
    monkeypatch.setattr(registry, "vocab_file_path", lambda *a: pytest.fail("looked for the file again"))
    second = get_encoding("cl100k_base")
    assert second is not first
    assert list(second.token_ids.items()) == list(first.token_ids.items())
    text = "Hello, wörld! 12345 ДЖ 日本語 🤖"
    assert second.encode(text) == first.encode(text)
    assert second.core.vocabulary_source == first.core.vocabulary_source


def test_a_damaged_saved_copy_is_parsed_again_and_replaced(cache, monkeypatch):
    monkeypatch.setenv("TOKENIZER_DATA_DIR", str(ENCODINGS_DIR))
    expected = list(get_encoding("r50k_base").token_ids.items())
    [saved] = cache.iterdir()
    good = saved.read_bytes()
    saved.write_bytes(flip(good, len(good) // 2))
    monkeypatch.setattr(registry, "_cache", {})
    assert list(get_encoding("r50k_base").token_ids.items()) == expected
    assert saved.read_bytes() == good


def test_gpt2s_packaged_file_is_saved_too(cache):
    enc = get_encoding("gpt2")
    assert [p.name for p in cache.iterdir()] == [registry.GPT2_ENCODER_JSON.sha256 + ".vocab"]
    assert vocab_cache.load_saved(registry.GPT2_ENCODER_JSON.sha256) == dict(enc.token_ids)
