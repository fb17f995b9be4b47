"""The safe-cut rule: ``split(a + b) == split(a) + split(b)`` at every cut it offers, for every pattern.

The oracle is the plain ``regex`` split (``split_reference``, with tiktoken's Unicode tables), run on the
whole text and on the two sides of each cut. Texts come from hypothesis, built from the fragments where a cut
goes wrong (whitespace runs, ``"\\r\\n"``, contractions, marks, letters newer than tiktoken's tables), and
from every corpus file. The bytes form must offer the same cuts as the text form, wherever a window starts or
ends, and never one inside a character or a special token.
"""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.cuts as cuts
from conftest import CORPUS_FILES, FUZZ_EXAMPLES, corpus_text
from tokenizer import get_encoding
from tokenizer.cuts import has_safe_cuts, last_newline_cut, next_newline_cut, safe_byte_cuts, safe_cuts
from tokenizer.patterns import KNOWN_PATTERNS, NEWER_THAN_TIKTOKEN, OPENAI_PATTERNS
from tokenizer.pretokenize import compile_pattern

KNOWN = tuple(KNOWN_PATTERNS)  # OpenAI's, and Llama 3's
IDS = ["gpt2", "r50k", "cl100k", "o200k", "llama3"]
FRAGMENTS = [
    "a", "Z", "word", " word", "9", "12345", "'", "'s", "'S", "'ll", "n't", " ", "  ", "\t", "\n", "\n\n", "\r",
    "\r\n", "\x0b", "\x85", "\u2028", "!", "?!", "...", "/", "$", "é", "e\u0301", "\u0301", "中文", "。", "\xa0",
    "\u3000", "😀", "ǅ", "ʰ", "½", "٣", "CamelCase", "<|endoftext|>", "<|fim_prefix|>", "<|", "|>",
    *[chr(a) for a, _ in NEWER_THAN_TIKTOKEN[:4]], "\U000323b0",  # letters to `regex`, "other" to tiktoken
]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=3)), max_size=30).map("".join)


def pieces_between(split, text: str, points) -> list[str]:
    """The pieces of ``text`` split separately between consecutive ``points``."""
    bounds = [0, *points, len(text)]
    return [p for a, b in zip(bounds, bounds[1:]) for p in split(text[a:b])]


def test_docstring_examples():
    result = doctest.testmod(cuts)
    assert result.failed == 0 and result.attempted > 0


# ---- the rule ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", KNOWN, ids=IDS)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=texts)
def test_every_cut_splits_like_the_whole(pattern, text):
    split = compile_pattern(pattern).split_reference
    whole = split(text)
    offered = list(safe_cuts(text, pattern=pattern))
    for c in offered:
        assert split(text[:c]) + split(text[c:]) == whole, c
    assert pieces_between(split, text, offered) == whole  # all at once, too
    for start in range(len(text) + 2):
        later = [c for c in offered if c >= start]
        assert list(safe_cuts(text, start, pattern=pattern)) == later
        assert list(safe_cuts(text, start, pattern=pattern, reverse=True)) == later[::-1]


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_cut_at_every_cut(name):
    text = corpus_text(name, 60_000)
    for pattern in KNOWN:
        split = compile_pattern(pattern).split_reference
        offered = list(safe_cuts(text, pattern=pattern))
        assert len(offered) > len(text) / 40, "too few cuts: the test would prove little"
        assert pieces_between(split, text, offered) == split(text)


@pytest.mark.parametrize(
    "text, c",
    [("a  \n", 3), ("x!\n", 2), ("\r\n", 1), ("hello", 3), ("don't", 3), ("e\u0301x", 1), ("1234", 2),
     ("a\u0558\n", 2), ("a \n", 2), ("$word", 1)],  # U+0558: a letter to `regex`, not yet to tiktoken
)
def test_unsafe_cuts_are_not_offered(text, c):
    """Each of these changes some pattern's pieces; the rule must not offer it."""
    for pattern in KNOWN:
        assert c not in set(safe_cuts(text, pattern=pattern))
    changed = [
        p for p in KNOWN
        if compile_pattern(p).split_reference(text[:c]) + compile_pattern(p).split_reference(text[c:])
        != compile_pattern(p).split_reference(text)
    ]
    assert changed


def test_other_patterns_get_no_cuts():
    pattern = r"(?s).{1,2}"  # here every cut could move the pieces
    assert not has_safe_cuts(pattern)
    assert list(safe_cuts("ab, cd", pattern=pattern)) == []
    assert list(safe_byte_cuts(b"ab<|e|>, cd", pattern=pattern, split_at=[b"<|e|>"], ends_whole=True)) == [2]


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=texts, start=st.integers(0, 200))
def test_newline_cuts_are_safe_cuts(text, start):
    offered = set(safe_cuts(text, pattern=OPENAI_PATTERNS[0]))
    c = next_newline_cut(text, start)
    assert c == len(text) or (c in offered and text[c] == "\n" and c > start)
    end = min(start, len(text) - 1)
    lo = end // 2
    c = last_newline_cut(text, end, lo)
    assert c == lo or (c in offered and lo < c <= end and text[c] == "\n")


# ---- the bytes form ---------------------------------------------------------------------------------------


def char_offsets(text: str) -> dict[int, int]:
    """byte offset -> character offset, at every character boundary of ``text``'s UTF-8."""
    out, b = {0: 0}, 0
    for i, ch in enumerate(text):
        b += len(ch.encode("utf-8"))
        out[b] = i + 1
    return out


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=texts, window=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), start=st.integers(0, 30))
def test_bytes_form_offers_the_text_forms_cuts(text, window, start):
    pattern = OPENAI_PATTERNS[2]
    data = text.encode("utf-8")
    at_char = char_offsets(text)
    text_cuts = {c for c in safe_cuts(text, pattern=pattern)}
    # the whole text: exactly the text form's cuts
    assert [at_char[c] for c in safe_byte_cuts(data, pattern=pattern, ends_whole=True)] == sorted(text_cuts)
    # any window, possibly starting or ending inside a character: a subset, in both directions
    lo, hi = sorted(w % (len(data) + 1) for w in window)
    part = data[lo:hi]
    kw = dict(pattern=pattern, starts_whole=lo == 0, ends_whole=hi == len(data))
    forward = list(safe_byte_cuts(part, start, **kw))
    assert forward == list(safe_byte_cuts(part, start, reverse=True, **kw))[::-1]
    for c in forward:
        assert start <= c and lo + c in at_char and at_char[lo + c] in text_cuts


SPECIAL_FRAGMENTS = st.sampled_from(
    ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|", "|>", "<|endof", "text|>", "x", " ", "!", "\n"]
)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
@settings(max_examples=FUZZ_EXAMPLES // 3, deadline=None)
@given(
    text=st.lists(st.one_of(SPECIAL_FRAGMENTS, st.sampled_from(FRAGMENTS)), max_size=30).map("".join),
    allowed=st.sampled_from(["all", "eot"]),
    window=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
)
def test_byte_cuts_keep_special_tokens_whole(name, text, allowed, window):
    """encode(a) + encode(b) == encode(a + b) at every byte cut, with special tokens allowed or not."""
    enc = get_encoding(name)
    specials = [s.encode() for s in enc.special_tokens_set]
    allowed_special = enc.special_tokens_set if allowed == "all" else {"<|endoftext|>"}
    data = text.encode("utf-8")
    lo, hi = sorted(w % (len(data) + 1) for w in window)
    offered = safe_byte_cuts(
        data[lo:hi], pattern=enc.pat_str, special_tokens=specials, split_at=[s.encode() for s in allowed_special],
        starts_whole=lo == 0, ends_whole=hi == len(data),
    )

    def encode(b: bytes) -> list[int]:
        return enc.encode(b.decode("utf-8"), allowed_special=allowed_special, disallowed_special=())

    whole = encode(data)
    for c in offered:
        assert encode(data[: lo + c]) + encode(data[lo + c :]) == whole, lo + c


def test_byte_cuts_at_and_around_special_tokens():
    data = b"<|e|><|e|>x<|e|>"
    tokens = [b"<|e|>", b"<|e|><|e|>"]  # overlapping: never cut inside the longer one
    kw = dict(pattern="not OpenAI's: no cuts from the rule", special_tokens=tokens, ends_whole=True)
    assert list(safe_byte_cuts(data, split_at=tokens, **kw)) == [11]
    assert list(safe_byte_cuts(data, split_at=[b"<|e|>"], **kw)) == [11]
    assert list(safe_byte_cuts(data, **kw)) == []
    # "e|" is a cut of the rule, unless it lies in a special token, which a window's end may hide
    kw = dict(pattern=OPENAI_PATTERNS[0], special_tokens=[b"<|e|>"])
    assert list(safe_byte_cuts(b"ab, x<|e|", **kw, ends_whole=True)) == [2, 3, 5, 8]
    assert list(safe_byte_cuts(b"ab, x<|e|", **kw)) == [2, 3, 5]
    assert list(safe_byte_cuts(b"ab, x<|e|>", **kw, ends_whole=True)) == [2, 3, 5]
    assert list(safe_byte_cuts(b"|>ab, x", **kw, starts_whole=False, ends_whole=True)) == [4, 5]
    assert list(safe_byte_cuts(b"e|>ab, x", **kw, ends_whole=True)) == [1, 5, 6]
