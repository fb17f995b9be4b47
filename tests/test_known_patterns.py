"""The known patterns' table (tokenizer.patterns.KNOWN_PATTERNS) and the fast core's routes (FastCore.route).

Llama 3's pattern is said to be cl100k's in another spelling. It is not: a whitespace run that ends the text, with
a line break before other whitespace, is one piece to cl100k (``\\s++$``) and two to Llama 3. The tests pin that
corner down (everywhere else the two split alike: fuzz, a corpus sample; the whole corpora under exhaustive), so
Llama 3 is declared as a pattern of its own, with cl100k's array rules but that one. GPT-OSS's tokenizer.json
spells o200k's pattern exactly as tiktoken does: it is o200k's, nothing to declare.

The split of each known pattern by its array rules and by ``re`` is tested against ``regex`` with the others, in
test_fast_split.py, test_array_split.py, test_every_code_point.py and test_cuts.py (they run over the table).
"""

from __future__ import annotations

import json
import re

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import tokenizer
import tokenizer.fast.core as fast_core
from tokenizer import Encoding, get_encoding
from tokenizer.fast.core import Route
from tokenizer.patterns import CL100K_PATTERN, KNOWN_PATTERNS, LLAMA3_PATTERN, O200K_PATTERN

from conftest import CORPUS_FILES, SHARED, corpus_text

HF = SHARED / "encodings" / "hf"

# Text made of what the two patterns treat with care: apostrophes and contractions in both cases (and the long s
# that (?i) folds to s), digits of several scripts, every kind of whitespace and line break, letters, marks.
TRICKY = st.text(
    st.sampled_from(list("aZ1٣'’sStTlLdDmMvVrReEſ .,!?/$-_\t\n\r\x0b\x0c\x85\xa0\u2028\u3000\u0301中ʰǅ😀")),
    max_size=40,
)


def split(pattern: str, text: str) -> list[str]:
    return regex.findall(pattern, text)


def in_the_corner(text: str) -> bool:
    """Does ``text`` end in whitespace after a line break, the one place Llama 3 and cl100k part?"""
    return re.search(r"[\r\n\x0b\x0c\x85\u2028\u2029 \t\xa0\u1680\u2000-\u200a\u202f\u205f\u3000]*[\r\n]"
                     r"[\t\x0b\x0c\x85 \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+\Z", text) is not None


def test_llama3_is_not_cl100k_at_a_final_whitespace_run_after_a_line_break():
    assert split(LLAMA3_PATTERN, "a\n ") == ["a", "\n", " "]
    assert split(CL100K_PATTERN, "a\n ") == ["a", "\n "]
    assert split(LLAMA3_PATTERN, "a\n \n") == split(CL100K_PATTERN, "a\n \n") == ["a", "\n \n"]
    assert LLAMA3_PATTERN in KNOWN_PATTERNS and KNOWN_PATTERNS[LLAMA3_PATTERN].array_rules == "llama3"


def test_hf_tokenizers_splits_the_corner_as_llama3s_pattern():
    tokenizers = pytest.importorskip("tokenizers")
    split_step = tokenizers.pre_tokenizers.Split(tokenizers.Regex(LLAMA3_PATTERN), behavior="isolated")
    assert [piece for piece, _ in split_step.pre_tokenize_str("a\n ")] == ["a", "\n", " "]


@given(TRICKY)
def test_fuzz_llama3_and_cl100k_part_only_in_the_corner(text):
    llama3, cl100k = split(LLAMA3_PATTERN, text), split(CL100K_PATTERN, text)
    if llama3 != cl100k:
        assert in_the_corner(text), text
        # cl100k's last piece is Llama 3's last two
        assert llama3[:-2] == cl100k[:-1] and "".join(llama3[-2:]) == cl100k[-1]


def test_a_corpus_sample_splits_alike_line_by_line():
    for name in CORPUS_FILES:
        lines = corpus_text(name, 20_000).splitlines(keepends=True)
        assert lines and all(split(LLAMA3_PATTERN, line) == split(CL100K_PATTERN, line) for line in lines), name


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpora_split_alike_but_in_the_corner(name):
    text = corpus_text(name, 4_000_000)  # every corpus, up to 4 M characters (the two English ones are longer)
    assert split(LLAMA3_PATTERN, text) == split(CL100K_PATTERN, text)
    for document in re.split(r"<\|endoftext\|>|\n\n", text):
        if not in_the_corner(document):
            assert split(LLAMA3_PATTERN, document) == split(CL100K_PATTERN, document)


def hf_regex_of(family: str) -> str:
    """The regex of the (first) Split step of a family's tokenizer.json (its pre-tokenizer comes before the model,
    in the first megabyte: only that is read)."""
    with open(HF / family / "tokenizer.json", "rb") as file:
        head = file.read(1 << 20).decode("utf-8", errors="ignore")
    at = head.index('"pre_tokenizer"')
    pre_tokenizer, _ = json.JSONDecoder().raw_decode(head, head.index("{", at))
    return pre_tokenizer["pretokenizers"][0]["pattern"]["Regex"]


def test_the_families_regexes_are_known_patterns():
    assert hf_regex_of("llama3") == LLAMA3_PATTERN  # exactly as the file writes it: no spelling to map
    assert hf_regex_of("gpt_oss") == O200K_PATTERN  # o200k's, as tiktoken writes it


# ---- the routes -----------------------------------------------------------------------------------------------

def fresh(name: str, pat_str: str | None = None) -> Encoding:
    """A new Encoding of ``name``'s vocabulary (empty piece cache), with its pattern or ``pat_str``."""
    enc = get_encoding(name)
    copy = Encoding(enc.name, pat_str=pat_str or enc.pat_str, mergeable_ranks=dict(enc.token_ids),
                    special_tokens=enc.special_tokens)
    copy.core.vocabulary_source = enc.core.vocabulary_source
    return copy


def test_every_entry_point_takes_the_route_the_dispatcher_names(monkeypatch):
    text = corpus_text("en_docs.txt", 3 * fast_core.ARRAY_MIN_CHARS).replace("<|endoftext|>", "")
    enc = fresh("gpt2")
    core = enc.core
    assert core.route(["hello"]) is Route.ONE_PASS and core.route([]) is Route.ONE_PASS
    expected = get_encoding("gpt2").encode_ordinary(text)
    assert core.route([text]) is Route.CHECKPOINT  # (gpt2's pattern has safe cuts)
    assert enc.encode_ordinary(text) == expected and core.last_route is Route.CHECKPOINT
    thirds = [text[: len(text) // 3], text[len(text) // 3 :]]
    assert core.route(thirds) is Route.ARRAY
    assert enc.encode_ordinary_batch(thirds) == get_encoding("gpt2").encode_ordinary_batch(thirds)
    assert core.last_route is Route.ARRAY
    joined = "<|endoftext|>".join(thirds)
    assert enc.encode(joined, allowed_special="all") == get_encoding("gpt2").encode(joined, allowed_special="all")
    assert core.last_route is Route.ARRAY  # encode_ordinary_joined
    monkeypatch.setattr(fast_core, "PREFIX_MAX_CHARS", 1)
    assert core.route([text]) is Route.ARRAY
    assert enc.encode_ordinary("hello world") == [31373, 995] and core.last_route is Route.ONE_PASS
    assert core.route([text], array=False) is Route.PIECE_CACHE


def test_a_pattern_of_ones_own_splits_by_regex_then_takes_array_bpe():
    pattern = r"""\p{L}+|\p{N}+|[^\p{L}\p{N}]"""
    text = corpus_text("de_manpages.txt", 2 * fast_core.ARRAY_MIN_CHARS)
    enc = fresh("gpt2", pattern)
    assert enc.core.route([text]) is Route.REGEX_SPLIT_ARRAY  # (no safe cuts: no checkpoint either)
    assert enc.encode_ordinary(text) == enc.core._encode_through_cache([text])[0]
    assert enc.core.last_route is Route.REGEX_SPLIT_ARRAY


def test_llama3s_pattern_takes_the_array_route():
    text = corpus_text("fr_manpages.txt", 2 * fast_core.ARRAY_MIN_CHARS) + "\n "  # (ends in the corner)
    enc = fresh("cl100k_base", LLAMA3_PATTERN)
    assert enc.core.route([text], checkpoint=False) is Route.ARRAY
    ids = enc.core._encode_one(text)
    assert enc.core.last_route is Route.ARRAY
    reference = Encoding("llama3-reference", pat_str=LLAMA3_PATTERN, mergeable_ranks=dict(enc.token_ids),
                         special_tokens={}, core="reference")
    assert ids == reference.encode_ordinary(text)


@pytest.mark.exhaustive
def test_the_llama3_file_takes_the_array_route():
    enc = tokenizer.load(HF / "llama3")
    text = corpus_text("ja_manpages.txt", 4 * fast_core.ARRAY_MIN_CHARS)
    assert enc.pat_str == LLAMA3_PATTERN
    assert enc.core.route([text]) is Route.CHECKPOINT  # (its safe cuts are cl100k's: the rule holds for it)
    ids = enc.encode_ordinary(text)
    assert enc.core.last_route is Route.CHECKPOINT
    assert enc.core.route([text], checkpoint=False) is Route.ARRAY
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(HF / "llama3" / "tokenizer.json"))
    assert ids == hf.encode(text, add_special_tokens=False).ids
