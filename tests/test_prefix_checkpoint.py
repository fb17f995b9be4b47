"""The fast core's checkpoint: a long text that begins with the part of the last long text up to its last safe cut
reuses that part's ids (tokenizer.fast.core.PREFIX_MIN_CHARS). Each text's ids against tiktoken's, as the texts
grow, shrink and change after the checkpoint."""

from __future__ import annotations

import pytest
from conftest import FUZZ_SHARE, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.core as fast_core
from tokenizer import get_encoding

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]


@pytest.fixture(scope="module")
def tiktoken_encodings():
    import tiktoken

    return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def fresh(name):
    """An Encoding of its own (so that its core's checkpoint is this test's alone)."""
    enc = get_encoding(name)
    return enc.__class__(enc.name, pat_str=enc._pat_str, mergeable_ranks=enc._mergeable_ranks,
                         special_tokens=enc._special_tokens)


@pytest.mark.parametrize("name", ENCODINGS)
def test_a_conversation_encoded_at_every_turn_equals_tiktoken(name, tiktoken_encodings):
    paragraphs = [p for p in corpus_text("en_docs.txt", 300_000).split("\n\n") if p.strip()]
    turns = ["\n\n".join(paragraphs[: i + 1]) for i in range(60)]
    assert len(turns[-1]) > 2 * fast_core.PREFIX_MIN_CHARS
    enc, oracle = fresh(name), tiktoken_encodings[name]
    reused = 0
    for turn in turns:
        part = enc.core._checkpoint[0]
        reused += len(turn) >= fast_core.PREFIX_MIN_CHARS and bool(part) and turn.startswith(part)
        assert enc.encode_ordinary(turn) == oracle.encode_ordinary(turn)
    assert reused > 40  # the checkpoint was there to reuse at (nearly) every long turn


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_character_after_the_checkpoint_decides(name, tiktoken_encodings):
    # The last safe cut of the first text is before " next"; the second text goes on with "'s" there instead,
    # which joins the word before it (o200k) or is its own piece ("'s": gpt2, cl100k): either way the ids must be
    # those of the whole text, not of the checkpoint's part and the rest split apart.
    base = corpus_text("en_docs.txt", 20_000).rsplit(" ", 1)[0] + " word"
    enc, oracle = fresh(name), tiktoken_encodings[name]
    for text in [base + " next", base + "'s end", base + "'s end", base + "\u0301x", base, base[:-1], base + " next"]:
        assert enc.encode_ordinary(text) == oracle.encode_ordinary(text), repr(text[-12:])
    assert enc.encode_ordinary(base) == enc.encode_ordinary(base)  # the same text twice: the same ids


def test_lone_surrogates_on_either_side_of_the_checkpoint(tiktoken_encodings):
    base = corpus_text("de_manpages.txt", 20_000)
    enc, oracle = fresh("cl100k_base"), tiktoken_encodings["cl100k_base"]
    for text in [base + " \ud800 a", base + " \ud800 a \udc00", "\ud83d" + base, base + "\ud83d\ude00 b"]:
        assert enc.encode_ordinary(text) == oracle.encode(text, disallowed_special=())


# A text's beginning, then edits: what ends a part and begins the rest decides how they split.
pieces_of_text = st.sampled_from(["hello", " world", "'s", "'", "s", "LL", "  ", " ", "\n", "\r\n", "\t", "123",
                                  "4", "中文", "Привет", "e\u0301", "\u0301", "!", "?!", "/", " /", "\xa0", "😀",
                                  "\ud800", "ſ", "AB"])
edits = st.lists(st.tuples(st.integers(0, 40), st.lists(pieces_of_text, max_size=8).map("".join)), min_size=1,
                 max_size=6)


@pytest.mark.parametrize("name", ENCODINGS)
@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(start=st.lists(pieces_of_text, min_size=1, max_size=30).map("".join), edits=edits)
def test_fuzz_growing_and_edited_texts_equal_tiktoken(name, start, edits, tiktoken_encodings):
    saved = fast_core.PREFIX_MIN_CHARS
    fast_core.PREFIX_MIN_CHARS = 1  # every text leaves and tries a checkpoint (hypothesis: no fixtures)
    try:
        enc, oracle = fresh(name), tiktoken_encodings[name]
        text = start
        for drop, added in edits:  # drop up to 40 characters from the end, then add some
            text = text[: max(len(text) - drop, 0)] + added
            assert enc.encode_ordinary(text) == oracle.encode(text, disallowed_special=())
    finally:
        fast_core.PREFIX_MIN_CHARS = saved
