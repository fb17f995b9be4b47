"""Pre-tokenization: the stdlib-`re` fast path against the plain `regex` split (more in test_fast_split.py)."""

from __future__ import annotations

import doctest

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.patterns as patterns
import tokenizer.pretokenize as pretokenize
from tokenizer.fast.stdlib_patterns import compile_fast
from conftest import FUZZ_EXAMPLES, corpus_text
from tokenizer.patterns import CS336_PATTERN, OPENAI_PATTERNS
from tokenizer.pretokenize import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    O200K_PATTERN,
    R50K_PATTERN,
    compile_pattern,
    special_token_regex,
)

PATTERNS = [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN]
IDS = ["gpt2", "r50k", "cl100k", "o200k"]

ascii_texts = st.text(st.characters(max_codepoint=127), max_size=60)
# ASCII with a sprinkling of other characters, and many newlines after letters (the safe cuts)
MIXED = ["a\n", "Z\n", "9\n", "\n", "\r\n", " ", "  ", "'s", "'LL", "é", "中文", "\u3000", "\xa0", "\u0301", "Ǆ", "x"]
mixed_texts = st.lists(st.one_of(st.sampled_from(MIXED), ascii_texts, st.text(max_size=3)), max_size=30).map("".join)


def test_docstring_examples():
    for module in (pretokenize, patterns):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


@pytest.mark.parametrize("pat", PATTERNS, ids=IDS)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=ascii_texts)
def test_ascii_equals_regex(pat, text):
    pre = both_splits(pat)
    assert pre.split(text) == regex.findall(pat, text)


@pytest.mark.parametrize("pat", PATTERNS, ids=IDS)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=mixed_texts)
def test_mixed_text_equals_reference(pat, text):
    pre = both_splits(pat)
    assert pre.split(text) == pre.split_reference(text)


def test_every_ascii_pair_and_triple():
    chars = [chr(c) for c in range(128)]
    texts = [a + b for a in chars for b in chars] + [a + b + c for a in "a '\n\r\t1." for b in chars for c in chars]
    for pat in PATTERNS:
        pre = both_splits(pat)
        for text in texts:
            assert pre.split(text) == regex.findall(pat, text), (pat, text)


def test_gpt2_pattern_forms_agree():
    # encoder.py's original pattern and tiktoken's possessive rewrite split identically
    text = corpus_text("en_docs.txt", 300_000) + corpus_text("de_manpages.txt", 100_000)
    assert regex.findall(GPT2_PATTERN, text) == regex.findall(R50K_PATTERN, text)


# Stanford CS336's handout (assignment 1) spells GPT-2's pattern with the contractions grouped (CS336_PATTERN); the
# package uses encoder.py's spelling (GPT2_PATTERN) for training, which is only right if the two split alike.


def test_cs336_handout_spelling_splits_as_gpt2_pattern():
    contractions = "It's, isn't, we're, they've, I'm, you'll, he'd; IT'S 'll 'x ''s '\n"
    text = contractions + corpus_text("en_docs.txt", 200_000) + corpus_text("fr_manpages.txt", 100_000)
    pieces = regex.findall(CS336_PATTERN, text)
    assert pieces == regex.findall(GPT2_PATTERN, text)
    assert {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"} <= set(pieces)  # every contraction was met


@pytest.mark.parametrize("filename", ["en_docs.txt", "de_manpages.txt", "zh_manpages.txt", "ja_manpages.txt"])
def test_corpus_fast_equals_reference(filename):
    text = corpus_text(filename, 400_000)
    for pat in PATTERNS:
        pre = both_splits(pat)
        assert pre.split(text) == pre.split_reference(text)


def test_unicode_17_letters_split_as_tiktoken_does():
    # U+323B0 is a letter only since Unicode 17.0; tiktoken (Unicode 16.0) treats it as punctuation
    text = "\U000323b0's"
    assert both_splits(GPT2_PATTERN).split(text) == ["\U000323b0'", "s"]
    assert both_splits(GPT2_PATTERN).split_reference(text) == ["\U000323b0'", "s"]


def test_custom_pattern_has_no_fast_path_but_works():
    pre = both_splits(r"\w+|\W")
    assert pre.split("ab, c") == ["ab", ",", " ", "c"]


def test_bad_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="pat_str"):
        both_splits("(unclosed")


def test_special_token_regex_prefers_longest():
    pat = special_token_regex(frozenset({"<|a|>", "<|a|><|a|>", "<|a"}))
    assert pat.findall("<|a|><|a|><|a|> <|a") == ["<|a|><|a|>", "<|a|>", "<|a"]


def test_fast_path_for_every_openai_pattern():
    # the stdlib spelling knows the escapes of OpenAI's patterns; any other pattern stays on `regex`
    assert all(compile_fast(p).uses_stdlib for p in OPENAI_PATTERNS)
    assert not compile_fast(r"\w+|\W").uses_stdlib


class both_splits:  # noqa: N801 - read as a function
    """The fast split (``split``, :mod:`tokenizer.fast`) beside the readable one (``split_reference``)."""

    def __init__(self, pat_str: str):
        self.split_reference = compile_pattern(pat_str).split  # first: a bad pattern's error is the reader's
        self.split = compile_fast(pat_str).split


# Patterns of the user's own (not OpenAI's): one with letters and digits apart, one with a capturing group, one
# naming the letter categories (U+0295 ʕ moved from Ll to Lo in Unicode 17.0), one that skips what it does not name.
OWN_PATTERNS = [r"\p{L}+|\p{N}+|[^\p{L}\p{N}]+", r"('s|'t)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|\s+|.",
                r"\p{Ll}+|\p{Lu}+|\p{Lo}+|[^\p{L}]+", r"\p{L}+|\p{N}"]
# Letters and digits new in Unicode 17.0 (a CJK ideograph of extension J, a Tolong Siki letter, U+0558), among
# older letters, digits, marks and ʕ.
NEWER_TEXT = "a\U000323b0b's 1\U0001e6c0x ʕʖ \u0558z 7\U00011de09 \U000323b0\U000323b1 Ab"


@pytest.mark.parametrize("pat", OWN_PATTERNS)
def test_an_own_pattern_splits_and_encodes_as_tiktoken_with_its_unicode_16_classes(pat):
    """Only OpenAI's patterns met Unicode 17.0's new letters and digits as tiktoken (Unicode 16.0) does; any other
    pattern, in both cores and the trainer, split "a\\U000323b0b" as one letter run where tiktoken sees three
    pieces; and a pattern with a capturing group gave its group instead of the match (regex.findall), so
    Encoding(pat_str="(a)b|...").encode("ab") lost the b. Ids are compared with tiktoken's under a vocabulary
    holding every piece of either split as a token, so that a different split shows as different ids."""
    import tiktoken

    from tokenizer import Encoding
    from tokenizer.training.counting import _splitter

    ours = compile_pattern(pat).split(NEWER_TEXT)
    unicode_17 = [match.group() for match in regex.finditer(pat, NEWER_TEXT)]  # (what the pattern alone gives)
    assert ours != unicode_17
    assert compile_fast(pat).split(NEWER_TEXT) == ours == _splitter(pat)(NEWER_TEXT)
    ranks = {bytes([b]): b for b in range(256)}
    for piece in ours + unicode_17:
        ranks.setdefault(piece.encode("utf-8"), len(ranks))
    theirs = tiktoken.Encoding("own", pat_str=pat, mergeable_ranks=ranks, special_tokens={})
    expected = theirs.encode_ordinary(NEWER_TEXT)
    for core in ("fast", "reference"):
        mine = Encoding("own", pat_str=pat, mergeable_ranks=ranks, special_tokens={}, core=core)
        assert mine.encode_ordinary(NEWER_TEXT) == expected, core
        assert mine._encode_only_native_bpe(NEWER_TEXT) == expected, core
    assert [theirs.decode_single_token_bytes(i) for i in expected] == [piece.encode("utf-8") for piece in ours]


def test_a_pattern_with_a_capturing_group_gives_whole_matches():
    assert both_splits(r"(a)b|\s+|\w").split("ab abc") == ["ab", " ", "ab", "c"]
    assert compile_pattern(r"(?:(a)|(b))+").split("abba") == ["abba"]
