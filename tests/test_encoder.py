"""gpt2_numpy/encoder.py (the checkout's encoder.py): OpenAI's ``encoder.py``, its algorithm (``get_pairs``,
``bpe`` over ``bpe_ranks``, ``cache``) running, checked against tiktoken's GPT-2 (OpenAI's ids: the oracle),
:func:`tokenizer.bpe.merge_reference` and the fast core."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings, strategies as st

from gpt2_numpy import encoder
from conftest import CORPUS_FILES, FUZZ_EXAMPLES, corpus_text
from tokenizer import get_encoding, merge_reference
from tokenizer.pretokenize import GPT2_PATTERN, compile_pattern
from tokenizer.vocab_files import token_to_gpt2_str


@pytest.fixture(scope="module")
def gpt2_encoder():
    return encoder.get_encoder("124M", "models")


@pytest.fixture(scope="module")
def oracle():
    return tiktoken.get_encoding("gpt2")


def test_openai_interface(tmp_path):
    enc = encoder.get_encoder("124M", tmp_path)  # no files there: falls back to the packaged GPT-2 files
    assert enc.encode("Not all heroes wear capes.") == [3673, 477, 10281, 5806, 1451, 274, 13]
    assert enc.decode([3673, 477, 10281, 5806, 1451, 274, 13]) == "Not all heroes wear capes."
    assert enc.encoder["Ġworld"] == 995 and enc.decoder[995] == "Ġworld"
    assert enc.byte_encoder[ord(" ")] == "Ġ" and enc.byte_decoder["Ġ"] == ord(" ")
    assert enc.bpe_ranks[("Ġ", "t")] == 0 and enc.bpe_ranks[("Ġ", "c")] == 13  # the 0-based merge index
    assert enc.encoder["Ġc"] == 269 == 256 + enc.bpe_ranks[("Ġ", "c")]  # the token that merge makes
    assert enc.pat.findall("Not all heroes") == ["Not", " all", " heroes"]
    assert enc.errors == "replace"
    assert enc.encode("<|endoftext|>") == [27, 91, 437, 1659, 5239, 91, 29]  # plain text, as in OpenAI's encoder
    assert enc.decode([50256]) == "<|endoftext|>"


def with_empty_cache(enc):
    """A copy of ``enc`` sharing its tables, with a cache of its own (building one from the files takes a second)."""
    fresh = copy.copy(enc)
    fresh.cache = {}
    return fresh


def test_bpe_is_openais_loop_and_fills_the_cache(gpt2_encoder):
    enc = with_empty_cache(gpt2_encoder)
    assert encoder.get_pairs(("Ġ", "h", "e", "h")) == {("Ġ", "h"), ("h", "e"), ("e", "h")}
    assert encoder.get_pairs(("a",)) == set()
    assert enc.cache == {}
    assert enc.bpe("Ġcapes") == "Ġcap es" and enc.bpe("Ġheroes") == "Ġheroes"
    assert enc.cache == {"Ġcapes": "Ġcap es", "Ġheroes": "Ġheroes"}
    enc.cache["Ġcapes"] = "Ġc apes"  # a cached answer is returned as it is: bpe() looks there first
    assert enc.bpe("Ġcapes") == "Ġc apes"
    assert enc.bpe("a") == "a" and enc.bpe("") == ""
    # every occurrence of the best pair is joined in one pass, left to right: "aaa" -> "aa a"
    assert enc.bpe("zzz") == "zz z"  # as merge_reference: the leftmost pair of equal rank first
    assert merge_reference(b"zzz", get_encoding("gpt2").merge_ranks) == [b"zz", b"z"]
    # encode() runs bpe(): what is in the cache is what it encodes
    fresh = with_empty_cache(gpt2_encoder)
    fresh.cache["Ġheroes"] = "Ġhero es"
    assert fresh.encode(" heroes") == [fresh.encoder["Ġhero"], fresh.encoder["es"]]


def expected_bpe(oracle, piece: str) -> str:
    """OpenAI's ``bpe()`` answer for a pre-token, from tiktoken's GPT-2: the piece's tokens, written as in its files."""
    return " ".join(token_to_gpt2_str(oracle.decode_single_token_bytes(i)) for i in oracle.encode_ordinary(piece))


def check_against_oracles(enc, oracle, text: str) -> None:
    """``enc.encode(text)`` is tiktoken's, the fast core's and merge_reference's; each pre-token's ``bpe()`` string
    is tiktoken's tokens written through the byte map."""
    ids = enc.encode(text)
    assert ids == oracle.encode_ordinary(text)
    assert ids == enc.encoding.encode_ordinary(text)
    gpt2 = get_encoding("gpt2")
    reference = []
    for piece in compile_pattern(GPT2_PATTERN).split(text):
        data = piece.encode("utf-8", errors="surrogatepass")
        word = token_to_gpt2_str(data)
        tokens = merge_reference(data, gpt2.merge_ranks)
        assert enc.bpe(word) == " ".join(map(token_to_gpt2_str, tokens)) == expected_bpe(oracle, piece)
        reference += [gpt2.token_ids[t] for t in tokens]
    assert ids == reference


def test_same_as_openai_on_a_sample_of_each_corpus(gpt2_encoder, oracle):
    for name in CORPUS_FILES:
        text = corpus_text(name, 6_000)
        check_against_oracles(gpt2_encoder, oracle, text)


def test_same_as_openai_on_every_corpus(gpt2_encoder, oracle):
    enc = with_empty_cache(gpt2_encoder)
    for name in CORPUS_FILES:
        text = corpus_text(name, 1_000_000)
        assert enc.encode(text) == oracle.encode_ordinary(text) == enc.encoding.encode_ordinary(text), name
        sample = corpus_text(name, 200_000)
        check_against_oracles(enc, oracle, sample)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.text(max_size=100))
def test_same_as_openai_on_any_text(gpt2_encoder, oracle, text):
    check_against_oracles(gpt2_encoder, oracle, text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    assert gpt2_encoder.encode(text) == oracle.encode_ordinary(text)  # lone surrogates too: U+FFFD, as tiktoken
    assert gpt2_encoder.decode(oracle.encode_ordinary(text)) == oracle.decode(oracle.encode_ordinary(text))


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
    # a token no merge makes ("hehe" is listed, but only "h e" is a merge): bpe() and the fast face agree
    vocab["hehe"] = 258
    (folder / "encoder.json").write_text(json.dumps(vocab))
    enc = encoder.get_encoder("tiny", tmp_path)
    assert enc.encode("hehe") == enc.encoding.encode_ordinary("hehe") == [256, 256]


def test_any_table_makes_an_encoder_as_in_openais(tmp_path, oracle):
    """OpenAI's Encoder(encoder, bpe_merges) takes any token table, and a learner builds a toy one to watch bpe();
    ours built the fast core's Encoding in the constructor, which refused it (ValueError: vocab lacks 254
    single-byte tokens) before bpe() could run. That Encoding is now built when first asked for."""
    toy = encoder.Encoder({"a": 0, "b": 1, "ab": 2}, [("a", "b")])
    assert toy.bpe("abab") == "ab ab" and toy.cache == {"abab": "ab ab"}
    assert toy.encode("abab") == [2, 2] and toy.decode([2, 0]) == "aba"
    with pytest.raises(KeyError):
        toy.encode("abc")  # as OpenAI's: the table has no "c"
    with pytest.raises(ValueError, match="lacks 254 single-byte tokens"):
        toy.encoding  # the fast core needs all 256 bytes, and says so when it is asked for
    # GPT-2's files read as OpenAI's get_encoder reads them: the Encoding built on demand gives tiktoken's ids
    table = json.loads((Path(encoder.PACKAGED) / "encoder.json").read_text(encoding="utf-8"))
    lines = (Path(encoder.PACKAGED) / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    openai_style = encoder.Encoder(table, [tuple(line.split()) for line in lines[1:-1]])
    text = corpus_text(CORPUS_FILES[0], 5_000)
    assert openai_style.encoding.encode_ordinary(text) == openai_style.encode(text) == oracle.encode_ordinary(text)
    # files in a model folder are still checked by get_encoder itself, not at a later encode
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "encoder.json").write_text(json.dumps({"a": 0, "b": 1, "ab": 2}))
    (folder / "vocab.bpe").write_text("#version: 0.2\na b\n")
    with pytest.raises(ValueError, match="lacks 254 single-byte tokens"):
        encoder.get_encoder("toy", tmp_path)


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
    # each JSON error says where: "Unterminated string starting at" used to end the message, its place lost
    for damaged, place in [('{"a": 1,\n "b: 2}', "line 2, column 2: Unterminated string starting at;"),
                           ('{"a": 1,\n', "line 2, column 1: Expecting property name enclosed in double quotes;"),
                           ('{"a": 1 "b": 2}', "line 1, column 9: Expecting ',' delimiter;")]:
        (folder / "encoder.json").write_text(damaged, encoding="utf-8")
        with pytest.raises(ValueError) as refused:
            encoder.get_encoder("broken", tmp_path)
        assert str(refused.value) == (f"{folder / 'encoder.json'}: not valid JSON at {place} the file is damaged or "
                                      f"cut short: replace it with a good copy")
    (folder / "encoder.json").write_text(text, encoding="utf-8")
    for content in ["", "#version: 0.2\n", "#version: 0.2\n\n"]:
        (folder / "vocab.bpe").write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=r"broken[/\\]vocab\.bpe: no merges"):
            encoder.get_encoder("broken", tmp_path)
    (folder / "vocab.bpe").write_bytes(b"#version: 0.2\n\xff\xfe e\n")
    with pytest.raises(ValueError, match=r"vocab\.bpe is not valid UTF-8: byte 14"):
        encoder.get_encoder("broken", tmp_path)


def test_docstring_examples():
    import doctest

    result = doctest.testmod(encoder)
    assert result.failed == 0 and result.attempted >= 4
