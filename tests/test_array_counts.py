"""array_counts: pre-token counts of many texts by array operations equal those of splitting each text alone.

The reference is ``Counter`` over ``compile_pattern(pattern).split_reference(text)`` for each text. The array
split comes from :mod:`tokenizer.fast.array_split` when it is there, and always also from a stand-in that takes the
piece starts from the reference split's lengths: so the joining, the cuts at the texts' edges, the byte
offsets, the distinct counting and the strings made at the end are tested whichever split is used.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections import Counter

import numpy as np
import pytest
from conftest import FUZZ_SHARE, corpus_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenizer.training import array_counts
from tokenizer.training import train as train_mod
from tokenizer.training.array_counts import count_texts, edge_cuts, is_safe_ascii_cut
from tokenizer.cuts import safe_cuts
from tokenizer.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, OPENAI_PATTERNS, R50K_PATTERN
from tokenizer.fast.piece_arrays import code_points
from tokenizer.pretokenize import compile_pattern
from tokenizer.training.train import count_pretokens

EOT = "<|endoftext|>"


def starts_from_reference_split(points: np.ndarray, pat_str: str) -> np.ndarray:
    """A stand-in for ``array_split.piece_starts``: where the reference split's pieces start."""
    lengths = np.array([len(p) for p in compile_pattern(pat_str).split_reference(points.tobytes().decode("utf-32-le"))],
                       dtype=np.int64)
    return np.cumsum(lengths) - lengths


SPLITS = ["stand-in"] + (["array_split"] if importlib.util.find_spec("tokenizer.fast.array_split") else [])


@pytest.fixture(params=SPLITS, scope="module")
def split_patterns(request):
    """The patterns counted by arrays, with the array split in use (the stand-in: OpenAI's four)."""
    with pytest.MonkeyPatch.context() as patched:
        if request.param == "stand-in":
            patched.setattr(array_counts, "piece_starts", starts_from_reference_split)
            patched.setattr(array_counts, "has_array_split", lambda pat_str: pat_str in OPENAI_PATTERNS)
        patterns = [p for p in OPENAI_PATTERNS if array_counts.has_array_counts(p)]
        assert patterns  # the array path is really taken
        yield patterns


def reference_counts(texts: list[str], pattern: str) -> Counter:
    split = compile_pattern(pattern).split_reference
    return Counter(piece for text in texts for piece in split(text))


def array_and_edge_counts(texts: list[str], pattern: str) -> tuple[Counter, int]:
    """The counts of count_texts with its edges split alone, and how many pre-tokens the arrays counted."""
    counts, edges = count_texts(texts, pattern)
    total = Counter(counts)
    total.update(reference_counts(edges, pattern))
    return total, sum(counts.values())


# Ties, seams and every class the patterns test: letters of several scripts, digits, apostrophes, spaces of
# every kind, line breaks, marks, astral characters, a NUL.
PARTS = ["a", "b", "ab", "é", "中文", "д", "١", "7", "12", " ", "  ", "\n", "\r\n", "\r", "\t", "\xa0", "\u3000",
         "\x0b", "\x1c", "\x85", "\u2028", "'", "'s", "'LL", "!", "..", ",", "😀", "\U00010400", "e\u0301", "\x00",
         "$x", "/", "'t "]
texts_strategy = st.lists(st.lists(st.sampled_from(PARTS), max_size=25).map("".join), max_size=12)


@settings(max_examples=FUZZ_SHARE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=texts_strategy)
def test_fuzz_counts_equal_the_reference(split_patterns, texts):
    for pattern in split_patterns:
        assert array_and_edge_counts(texts, pattern)[0] == reference_counts(texts, pattern)


@pytest.mark.parametrize("filename", ["en_docs.txt", "de_manpages.txt", "ru_manpages.txt", "ja_manpages.txt"])
def test_corpus_counts_equal_the_reference(split_patterns, filename):
    texts = corpus_text(filename, 200_000).split(EOT)
    # also cut into texts at arbitrary places, so that seams fall anywhere
    rng = np.random.default_rng(0)
    whole = "".join(texts)
    cuts = np.sort(rng.integers(0, len(whole), 300)).tolist()
    pieces = [whole[a:b] for a, b in zip([0] + cuts, cuts + [len(whole)])]
    for pattern in split_patterns:
        for batch in (texts, pieces):
            counts, by_arrays = array_and_edge_counts(batch, pattern)
            assert counts == reference_counts(batch, pattern)
            assert by_arrays > 0.9 * sum(counts.values())  # nearly all of it counted by arrays


def test_ascii_cuts_are_safe_cuts():
    # every pair of ASCII characters the rule here calls safe is a safe cut of tokenizer.cuts, for each pattern
    ascii = np.arange(128, dtype=np.uint32)
    x, y = np.repeat(ascii, 128), np.tile(ascii, 128)
    safe = is_safe_ascii_cut(x, y)
    assert 0 < safe.sum() < len(safe)
    for pattern in OPENAI_PATTERNS:
        for a, b in zip(x[safe].tolist(), y[safe].tolist()):
            assert 1 in safe_cuts(chr(a) + chr(b), pattern=pattern), (chr(a), chr(b))
    assert not is_safe_ascii_cut(np.array([ord("a"), 0x4E2D, ord(" ")]), np.array([0x4E2D, ord(" "), ord(" ")])).any()


@settings(max_examples=FUZZ_SHARE, deadline=None)
@given(texts=st.lists(st.text(alphabet="ab ,'\n中", max_size=80), max_size=6))
def test_edge_cuts_are_each_texts_first_and_last(texts):
    points = code_points("".join(texts))
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    ends = np.cumsum(lengths)
    begins = ends - lengths
    first, last, found = edge_cuts(points, begins, ends)
    for i, text in enumerate(texts):
        cuts = [c for c in range(1, len(text)) if is_safe_ascii_cut(np.array([ord(text[c - 1])]), np.array([ord(text[c])]))[0]]
        assert bool(found[i]) == bool(cuts)
        if cuts:
            assert (first[i] - begins[i], last[i] - begins[i]) == (cuts[0], cuts[-1])


def test_lone_surrogates_are_left_to_the_regex_path(split_patterns):
    texts = ["ab \ud800 cd", "plain text here"]
    counts, edges = count_texts(texts, split_patterns[0])
    assert counts == {} and edges == texts


def write(text: str, suffix: str = ".txt") -> str:
    fd, path = tempfile.mkstemp(suffix=suffix)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode("utf-8", "surrogatepass"))
    return path


@pytest.mark.parametrize("workers, chunk", [(1, 1 << 22), (2, 30_011), (4, 4_099), (1, 997)])
def test_count_pretokens_equals_the_reference_for_any_workers_and_chunks(split_patterns, workers, chunk):
    text = corpus_text("en_docs.txt", 60_000) + corpus_text("zh_manpages.txt", 20_000) + EOT + EOT + "x  "
    path = write(text)
    try:
        for pattern in split_patterns:
            expected = reference_counts(text.split(EOT), pattern)
            assert count_pretokens(path, [EOT], pattern=pattern, num_workers=workers, chunk_size=chunk) == expected
    finally:
        os.unlink(path)


def test_jsonl_documents_with_lone_surrogates_count_as_before(split_patterns):
    # JSON may escape a lone surrogate: such a document is split as a string, like any before
    lines = [json.dumps({"text": t}) for t in ["Hello world \ud800 there", "Good day, world", "x" * 50 + " y"]]
    path = write("\n".join(lines) + "\n", suffix=".jsonl")
    try:
        got = count_pretokens(path, pattern=GPT2_PATTERN, num_workers=1)
    finally:
        os.unlink(path)
    split = compile_pattern(GPT2_PATTERN).split
    assert got == Counter(p for t in ["Hello world \ud800 there", "Good day, world", "x" * 50 + " y"] for p in split(t))


def test_texts_are_counted_in_bounded_batches(monkeypatch, split_patterns):
    # many documents are counted a batch at a time, and the counts do not depend on where the batches end
    monkeypatch.setattr(train_mod, "_BATCH_CHARS", 100)
    docs = [f"Document {i}: some words, some more words.\n" for i in range(200)]
    path = write("\n".join(json.dumps({"text": d}) for d in docs), suffix=".jsonl")
    try:
        for pattern in (GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN):
            assert count_pretokens(path, pattern=pattern, num_workers=1) == reference_counts(docs, pattern)
    finally:
        os.unlink(path)
