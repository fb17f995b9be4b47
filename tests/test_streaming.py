"""encode_iterable must give exactly encode()'s ids for every way of cutting the text into chunks.

The oracle is ``enc.encode`` on the joined text (itself checked against tiktoken elsewhere, and here on a few
cases). Cuts are chosen by hypothesis, on real corpus text and on strings built from the fragments where a
streaming encoder goes wrong: whitespace runs, "\\r\\n", contractions, special tokens, combining marks.
"""

from __future__ import annotations

import doctest
import functools
import gc
import itertools

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import corpus_text
from tokenizer import Encoding, get_encoding, streaming
from tokenizer.patterns import NEWER_THAN_TIKTOKEN
from tokenizer.streaming import EMIT_MIN_CHARS, encode_iterable

ENCODINGS = ["gpt2", "r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
FRAGMENTS = [
    "a", "Z", "word", " word", "9", "12345", "'", "'s", "'S", "'ll", "'ve", "n't", " ", "  ", "   ", "\t",
    "\n", "\n\n", "\r", "\r\n", "!", "?!", "...", "/", "-", "é", "e\u0301", "\u0301", "中文", "\u00a0", "\u3000",
    "😀", "ǅ", "ʰ", "½", "CamelCase", "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|", "|>", "<",
    # newer than tiktoken's Unicode tables, when pretokenize corrects for that (Armenian letter by default)
    *[chr(a) for a, _ in NEWER_THAN_TIKTOKEN[:3]], "\u0558",
]
settings.register_profile("streaming", deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.lru_cache(maxsize=1)
def corpus_sample() -> str:
    """English with <|endoftext|> separators, then code-like reST, then Japanese and Russian man pages.
    (A function, not a fixture: pytest would print all of it with every failure.)"""
    parts = [corpus_text("en_docs.txt", 400_000), corpus_text("ja_manpages.txt", 180_000),
             corpus_text("ru_manpages.txt", 120_000)]
    return "".join(parts)


def cut(text: str, positions) -> list[str]:
    points = sorted({p % (len(text) + 1) for p in positions})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def stream(enc, chunks, emit_min_chars: int = 0, **kwargs) -> list[int]:
    """encode_iterable's ids, by default encoding at every safe cut there is (``emit_min_chars=0``), so short
    test strings exercise the cutting as much as megabytes would with the default."""
    return list(encode_iterable(enc, iter(chunks), emit_min_chars=emit_min_chars, **kwargs))


def test_docstring_examples():
    result = doctest.testmod(streaming)
    assert result.failed == 0 and result.attempted > 0


SPECIAL_MODES = [
    {"allowed_special": "all"},
    {"disallowed_special": ()},
    {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
]


@settings(settings.get_profile("streaming"), max_examples=60)
@given(data=st.data())
@pytest.mark.parametrize("name", ENCODINGS)
def test_corpus_slices_any_cuts(name, data):
    enc = get_encoding(name)
    start = data.draw(st.integers(0, len(corpus_sample()) - 1), label="start")
    text = corpus_sample()[start : start + data.draw(st.integers(0, 3000), label="length")]
    positions = data.draw(st.lists(st.integers(0, 10**9), max_size=40), label="cuts")
    kwargs = data.draw(st.sampled_from(SPECIAL_MODES), label="specials")
    emit_min = data.draw(st.sampled_from([0, 1, 50, EMIT_MIN_CHARS]), label="emit_min")
    assert stream(enc, cut(text, positions), emit_min, **kwargs) == enc.encode(text, **kwargs)


adversarial_text = st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@settings(settings.get_profile("streaming"), max_examples=150)
@given(text=adversarial_text, positions=st.lists(st.integers(0, 10**9), max_size=20), data=st.data())
@pytest.mark.parametrize("name", ENCODINGS)
def test_adversarial_strings_any_cuts(name, text, positions, data):
    enc = get_encoding(name)
    kwargs = data.draw(st.sampled_from(SPECIAL_MODES), label="specials")
    assert stream(enc, cut(text, positions), **kwargs) == enc.encode(text, **kwargs)


@pytest.mark.parametrize("name", ENCODINGS)
def test_one_character_per_chunk(name):
    enc = get_encoding(name)
    text = corpus_sample()[:20_000] + "".join(FRAGMENTS) * 3
    assert stream(enc, list(text), allowed_special="all") == enc.encode(text, allowed_special="all")


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_matches_tiktoken(name):
    import tiktoken  # the oracle: a test dependency only
    oracle = tiktoken.get_encoding(name)
    text = corpus_sample()[100_000:130_000] + "".join(FRAGMENTS)
    chunks = cut(text, range(0, len(text), 7))
    assert stream(get_encoding(name), chunks, allowed_special="all") == oracle.encode(text, allowed_special="all")


# ---- where text is cut (the rule itself is tested in test_cuts.py) ---------------------------------------


def test_a_pattern_of_ones_own_is_never_cut():
    # With this pattern "x," | "ab" merges to one token, but "x" | ",a" | "b" would not: a cut after "x" (safe
    # for OpenAI's patterns) would change the ids, so the stream must hold the text to the end.
    enc = Encoding.from_vocab_merges(
        {**{i: bytes([i]) for i in range(256)}, 256: b"ab"}, [(b"a", b"b")], name="pairs", pat_str=r"(?s).{1,2}"
    )
    text = "x,ab" * 50
    assert enc.encode(text) == [120, 44, 256] * 50
    assert stream(enc, list(text)) == enc.encode(text)


def test_emit_min_chars_must_not_be_negative():
    with pytest.raises(ValueError, match="emit_min_chars"):
        encode_iterable(get_encoding("gpt2"), ["x"], emit_min_chars=-1)


# ---- special tokens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("split_at", range(1, len("<|endoftext|>")))
def test_disallowed_special_split_across_chunks_raises_like_encode(split_at):
    enc = get_encoding("gpt2")
    text = "Some text before. <|endoftext|> and after."
    i = text.index("<|") + split_at
    with pytest.raises(ValueError) as expected:
        enc.encode(text)
    produced = []
    with pytest.raises(ValueError) as got:
        for token in encode_iterable(enc, [text[:i], text[i:]]):
            produced.append(token)
    assert str(got.value) == str(expected.value)
    # nothing from the special token on was encoded before the error
    before = enc.encode(text[: text.index("<|")])
    assert produced == before[: len(produced)]


def test_disallowed_special_found_at_the_very_end():
    enc = get_encoding("cl100k_base")
    with pytest.raises(ValueError, match="<\\|endofprompt\\|>"):
        list(encode_iterable(enc, ["x <|endof", "prompt|>"], allowed_special={"<|endoftext|>"}))


def test_special_token_split_into_single_characters_is_one_id():
    enc = get_encoding("o200k_base")
    text = "a<|endoftext|>b<|endofprompt|>"
    assert stream(enc, list(text), allowed_special="all") == [64, 199999, 65, 200018]


def test_bad_arguments_fail_at_the_call_not_later():
    enc = get_encoding("gpt2")
    with pytest.raises(TypeError, match="allowed_special"):
        encode_iterable(enc, ["x"], allowed_special="none")
    with pytest.raises(TypeError, match="disallowed_special"):
        encode_iterable(enc, ["x"], disallowed_special="none")


def test_chunks_must_be_str():
    with pytest.raises(TypeError, match="chunks of str, got bytes"):
        list(encode_iterable(get_encoding("gpt2"), ["ok", b"bytes"]))


# ---- laziness and memory ----------------------------------------------------------------------------------


def test_a_single_string_and_a_text_file_work(tmp_path):
    enc = get_encoding("gpt2")
    text = corpus_sample()[:50_000]
    assert list(enc.encode_iterable(text, allowed_special="all")) == enc.encode(text, allowed_special="all")
    path = tmp_path / "t.txt"
    path.write_text(text, encoding="utf-8", newline="")
    with open(path, encoding="utf-8", newline="") as f:
        assert list(enc.encode_iterable(f, allowed_special="all")) == enc.encode(text, allowed_special="all")


def test_ids_come_out_before_the_input_ends():
    enc = get_encoding("gpt2")
    text = corpus_sample()[:100_000].replace("<|endoftext|>", "")
    consumed = 0

    def lines():
        nonlocal consumed
        for line in text.splitlines(keepends=True):
            consumed += len(line)
            yield line

    first = next(iter(encode_iterable(enc, lines())))
    assert first == enc.encode(text[:100])[0]
    assert consumed <= EMIT_MIN_CHARS + 1000  # a few KB of pending text, not the whole input


def test_text_without_any_safe_cut_is_flushed_at_the_end():
    enc = get_encoding("cl100k_base")
    text = "-" * 10_000 + "\n\n\n" + " " * 5_000 + "!\r\n" * 1000
    assert stream(enc, list(text)) == enc.encode(text)


def repeated_lines(total_bytes: int):
    lines = corpus_sample()[:2_000_000].splitlines(keepends=True)
    produced = 0
    for line in itertools.cycle(lines):
        yield line
        produced += len(line)
        if produced >= total_bytes:
            return


def test_memory_stays_bounded_on_a_20_mb_stream():
    enc = get_encoding("gpt2")
    process = psutil.Process()
    # warm up: the piece cache fills with this text's pieces once; what follows must not grow with the input
    for _ in encode_iterable(enc, repeated_lines(2_000_000), allowed_special="all"):
        pass
    gc.collect()
    before = process.memory_info().rss
    n_tokens = 0
    peak = before
    for i, _ in enumerate(encode_iterable(enc, repeated_lines(20_000_000), allowed_special="all")):
        n_tokens += 1
        if i % 200_000 == 0:
            peak = max(peak, process.memory_info().rss)
    peak = max(peak, process.memory_info().rss)
    assert n_tokens > 4_000_000  # the stream really was ~20 MB of text
    # holding the text would take ~20 MB (str) and the ids ~40 MB (list of ints); allow well under that
    assert peak - before < 15_000_000, f"RSS grew by {(peak - before) / 1e6:.1f} MB"
