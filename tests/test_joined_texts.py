"""Several texts through one run of the array path (the stretches between special tokens, a batch): each text
split as it would be alone, the ids of each put back in its place. Against tiktoken and the reference core."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CORPUS_FILES, FUZZ_SHARE, corpus_text
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.core as fast_core
from tokenizer import Encoding, get_encoding
from tokenizer.fast.array_split import piece_starts, piece_starts_of_texts
from tokenizer.fast.piece_arrays import code_points
from tokenizer.fast.stdlib_patterns import compile_fast
from tokenizer.patterns import CL100K_PATTERN, GPT2_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, R50K_PATTERN

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>", "<|endofprompt|>"]


@pytest.fixture(scope="module")
def tiktoken_encodings():
    import tiktoken

    return {name: tiktoken.get_encoding(name) for name in ENCODINGS}


def joined_path(enc, call):
    """``call()`` with every call of more than one text taking the joined array path, however short."""
    saved = fast_core.ARRAY_MIN_CHARS
    fast_core.ARRAY_MIN_CHARS = 0  # hypothesis: no fixtures per example
    try:
        return call()
    finally:
        fast_core.ARRAY_MIN_CHARS = saved


# what ends and begins a text decides how it splits: whitespace, runs, contractions, digits, marks, line breaks
edges = st.lists(
    st.one_of(
        st.sampled_from(["hello", " world", "'s", "'", "s", "LL", "  ", " ", "\n", "\r", "\r\n", "\t", "123", "4",
                         "中文", "日本語", "Привет", "e\u0301", "\u0301", "!", "?!", "/", " /", "$", "\xa0", "\u3000",
                         "😀", "ſ", "ǅ", "AB", "aB", "\ud800", "\udc00", "\ud83d"]),
        st.text(max_size=6),
    ),
    max_size=12,
).map("".join)


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(st.lists(edges.filter(bool), min_size=1, max_size=8),
       st.sampled_from([GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN]))
def test_starts_of_texts_laid_end_to_end_are_each_texts_own(texts, pattern):
    texts = [text.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for text in texts]
    text = "".join(texts)
    lengths = np.array([len(t) for t in texts])
    firsts = np.cumsum(lengths) - lengths
    expected = []
    for first, one in zip(firsts, texts):
        expected += (first + piece_starts(code_points(one), pattern)).tolist()
    assert piece_starts_of_texts(text, code_points(text), firsts, pattern).tolist() == expected
    split = compile_fast(pattern).split
    assert [len(piece) for one in texts for piece in split(one)] == np.diff(expected + [len(text)]).tolist()


# What may end a text and what may begin the next: the separator the array split puts between them must cut
# every pair (a letter before whitespace; a letter and a line break before anything else)
MEETING = ["a", "ab", "A", "'", "'s", "s", "'ll", " ", "  ", "\t", "\n", "\n\n", "\r", "\r\n", " \n", "\n ", "1",
           "1234", "!", ".\n", "/", "\n/", " /", "$", "\u0301", "e\u0301", "\xa0", "\u3000", "中", "ʰB", "ǅ", "😀",
           "x.", "a\n", ". ", " a", " '", "\u0301\u0301"]


@pytest.mark.parametrize("pattern", [GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN, LLAMA3_PATTERN],
                         ids=["gpt2", "r50k", "cl100k", "o200k", "llama3"])
def test_every_end_before_every_start_splits_as_each_text_alone(pattern):
    # each text with a safe cut inside ("d|,"): what is before a text's last cut is not split again by the regex
    texts = [one for end in MEETING for start in MEETING for one in (f"and, {end}", f"{start}and, so")]
    text = "".join(texts)
    lengths = np.array([len(t) for t in texts])
    firsts = np.cumsum(lengths) - lengths
    expected = [int(first + start) for first, one in zip(firsts, texts)
                for start in piece_starts(code_points(one), pattern)]
    assert piece_starts_of_texts(text, code_points(text), firsts, pattern).tolist() == expected
    split = compile_fast(pattern).split
    assert [len(piece) for one in texts for piece in split(one)] == np.diff(expected + [len(text)]).tolist()


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(st.lists(edges, max_size=8), st.lists(st.sampled_from(SPECIALS), max_size=8), st.sampled_from(ENCODINGS))
def test_fuzz_special_tokens_spliced_in(stretches, specials, name):
    import tiktoken

    text = "".join(s + t for s, t in zip(stretches, specials + [""] * len(stretches)))
    ours, oracle = get_encoding(name), tiktoken.get_encoding(name)
    reference = get_encoding(name, core="reference")
    expected = oracle.encode(text, allowed_special="all")
    assert joined_path(ours, lambda: ours.encode(text, allowed_special="all")) == expected
    assert reference.encode(text, allowed_special="all") == expected
    allowed = {"<|endoftext|>"}
    assert joined_path(ours, lambda: ours.encode(text, allowed_special=allowed, disallowed_special=())) == (
        oracle.encode(text, allowed_special=allowed, disallowed_special=())
    )
    assert joined_path(ours, lambda: ours.encode_ordinary_batch(stretches)) == oracle.encode_ordinary_batch(stretches)


@pytest.mark.parametrize("filename", CORPUS_FILES)
def test_documents_joined_by_special_tokens_on_every_corpus(filename, tiktoken_encodings):
    text = corpus_text(filename, 300_000)
    if "<|endoftext|>" not in text:
        text = "<|endoftext|>".join(text.split("\n\n"))
    for name in ENCODINGS:
        ours, oracle = get_encoding(name), tiktoken_encodings[name]
        expected = oracle.encode(text, allowed_special="all")
        assert ours.encode(text, allowed_special="all") == expected, name
        assert ours.encode(text, allowed_special={"<|endoftext|>"}) == expected, name
        # the reference core, on a sample (it is slow)
        sample = text[:30_000]
        assert get_encoding(name, core="reference").encode(sample, allowed_special="all") == (
            oracle.encode(sample, allowed_special="all")
        ), name


@pytest.mark.parametrize("name", ENCODINGS)
def test_special_tokens_at_the_edges_and_side_by_side(name, tiktoken_encodings):
    ours, oracle = get_encoding(name), tiktoken_encodings[name]
    body = corpus_text("fr_manpages.txt", 20_000)
    for text in [
        f"<|endoftext|>{body}", f"{body}<|endoftext|>", f"<|endoftext|><|endoftext|>{body}<|endoftext|><|endoftext|>",
        f"{body}  <|endoftext|>  {body}", f"{body}\ud83d<|endoftext|>\ude00{body}", f"{body}'<|endoftext|>s{body}",
        f"{body}12<|endoftext|>345{body}", f"{body}\r<|endoftext|>\n{body}", "<|endoftext|>" * 3000,
        f"{body}<|endofprompt|>{body}<|fim_prefix|><|endoftext|>",
    ]:
        for allowed in ("all", {"<|endoftext|>"}, {"<|endoftext|>", "<|endofprompt|>"}):
            expected = oracle.encode(text, allowed_special=allowed, disallowed_special=())
            assert ours.encode(text, allowed_special=allowed, disallowed_special=()) == expected, (text[:40], allowed)


@pytest.mark.parametrize("name", ENCODINGS)
def test_batches_of_mixed_lengths(name, tiktoken_encodings):
    ours, oracle = get_encoding(name), tiktoken_encodings[name]
    text = corpus_text("ru_manpages.txt", 200_000)
    batch = [text[i : i + n] for i, n in zip(range(0, 200_000, 7_919), [0, 1, 30, 500, 20_000, 3, 9_000] * 9)]
    assert ours.encode_ordinary_batch(batch) == oracle.encode_ordinary_batch(batch)
    assert ours.encode_batch(batch, disallowed_special=()) == oracle.encode_batch(batch, disallowed_special=())


def test_a_call_of_many_short_texts_runs_the_array_path_once(monkeypatch, tiktoken_encodings):
    # a new Encoding: the shared one's piece cache, filled by other tests, could hold these texts' pieces, and
    # then the cache takes them (tests/test_cores.py)
    base = get_encoding("gpt2")
    enc = Encoding("gpt2", pat_str=base.pat_str, mergeable_ranks=dict(base.token_ids), special_tokens=base.special_tokens)
    calls = []
    import tokenizer.fast.array_encode as array_encode

    real = array_encode.encode_split_pieces
    monkeypatch.setattr(array_encode, "encode_split_pieces", lambda *a: calls.append(1) or real(*a))
    text = "<|endoftext|>".join(corpus_text("en_docs.txt", 100_000).split("<|endoftext|>"))
    expected = tiktoken_encodings["gpt2"].encode(text, allowed_special="all")
    for call in (1, 2):  # and again: each call runs it once, none is answered from what the one before left
        assert enc.encode(text, allowed_special="all") == expected
        assert len(calls) == call


@pytest.mark.parametrize("weights", ["hashed", "every row one hash"])
def test_repeated_edges_are_split_once_each_and_exactly(monkeypatch, weights):
    # many texts whose edges repeat (and one longer than a row of the grouping), split as each would be alone;
    # with every hash equal, the grouping falls back to comparing whole rows and gives the same starts
    from tokenizer.fast import array_split

    if weights != "hashed":
        monkeypatch.setattr(array_split, "_ROW_WEIGHTS", np.zeros_like(array_split._ROW_WEIGHTS))
    parts = ["\nThe end.\n", "\nthe start \n\n", "'s it\n", "x" * 40 + "\n", "\n\u0301a 12345\t", "😀 b\r\n"]
    texts = [parts[i % len(parts)] + parts[(i * 7) % len(parts)] for i in range(60)]
    text = "".join(texts)
    lengths = np.array([len(t) for t in texts])
    firsts = np.cumsum(lengths) - lengths
    calls = []
    split = compile_fast(O200K_PATTERN)
    counted = type(split).piece_lengths_between
    monkeypatch.setattr(type(split), "piece_lengths_between",
                        lambda self, text, a, b, **told: calls.append(len(a)) or counted(self, text, a, b, **told))
    for pattern in (GPT2_PATTERN, CL100K_PATTERN, O200K_PATTERN):
        expected = [int(first + start) for first, one in zip(firsts, texts)
                    for start in piece_starts(code_points(one), pattern)]
        assert piece_starts_of_texts(text, code_points(text), firsts, pattern).tolist() == expected
    assert calls and max(calls) < 2 * len(parts) ** 2  # each distinct edge once, not one per text


def test_distinct_segments_against_a_dict():
    from tokenizer.fast.array_split import DISTINCT_ROW_CHARS, _distinct_segments

    text = "ab\x00a\x00ab" + "y" * (DISTINCT_ROW_CHARS + 3) + "ab\U0010ffff"
    points = code_points(text)
    firsts = np.array([0, 3, 0, 5, 7, 7, 8, 9, 7 + DISTINCT_ROW_CHARS + 3, 0, 2, 4])
    lengths = np.array([2, 1, 1, 2, DISTINCT_ROW_CHARS + 3, DISTINCT_ROW_CHARS + 3, 1, DISTINCT_ROW_CHARS, 3, 3, 1, 1])
    kept, copy_of = _distinct_segments(points, firsts, lengths)
    segments = [text[a : a + n] for a, n in zip(firsts, lengths)]
    assert [segments[kept[c]] for c in copy_of] == segments  # each segment's kept one equals it
    short = {s for s in segments if len(s) <= DISTINCT_ROW_CHARS}
    assert len([k for k in kept if lengths[k] <= DISTINCT_ROW_CHARS]) == len(short)  # and once each


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(text=st.lists(st.sampled_from(["a", "Z", "1", " ", "  ", "\n", "\t", ",", "'", "\u0301", "中", "😀", "-"]),
                     min_size=1, max_size=60).map("".join),
       bounds=st.lists(st.tuples(st.integers(0, 70), st.integers(0, 70)), min_size=1, max_size=12))
def test_safe_cuts_within_is_the_first_cut_a_plain_scan_finds(text, bounds):
    # the windowed search (8 wide, then doubling, each class read once) against a scan place by place with the
    # same two-character rule, forward and backward, with limits anywhere (an empty range gives the limit)
    from tokenizer.fast.array_split import _cut_rule, _safe_cuts_within, o200k_class_table

    points = code_points(text)
    classes = o200k_class_table()[points]
    n = len(points)
    for step in (1, -1):
        if step > 0:  # from begin (at least 1) up to limit (at most n), exclusive
            pairs = [(1 + a % n, 1 + b % n) for a, b in bounds]
        else:  # from begin (at most n - 1) down to limit (at least 0), exclusive
            pairs = [(a % n, b % n) for a, b in bounds]
        begin, limit = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        expected = []
        for at, end in pairs:
            while at * step < end * step and not _cut_rule(classes[at - 1], classes[at]):
                at += step
            expected.append(at if at * step < end * step else end)
        assert _safe_cuts_within(points, begin, limit, step).tolist() == expected
