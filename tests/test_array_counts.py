"""array_counts: pre-token counts of many texts by array operations equal those of splitting each text alone.

The reference is ``Counter`` over ``compile_pattern(pattern).split_reference(text)`` for each text. The texts' piece
starts come from :func:`tokenizer.fast.array_split.piece_starts_of_texts`, and also from a stand-in that takes them
from the reference split of each text: so the byte offsets, the distinct counting and the strings made at the end
are tested whichever split is used.
"""

from __future__ import annotations

import contextlib
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
from tokenizer.training import counting
from tokenizer.training.array_counts import count_texts
from tokenizer.patterns import CL100K_PATTERN, GPT2_PATTERN, O200K_PATTERN, OPENAI_PATTERNS, R50K_PATTERN
from tokenizer.pretokenize import compile_pattern
from tokenizer.training.train import count_pretokens

EOT = "<|endoftext|>"


def starts_from_reference_split(text: str, points: np.ndarray, firsts: np.ndarray, pat_str: str) -> np.ndarray:
    """A stand-in for ``array_split.piece_starts_of_texts``: where the reference split of each text starts its
    pieces."""
    split = compile_pattern(pat_str).split_reference
    bounds = [*firsts.tolist(), len(text)]
    lengths = [len(piece) for begin, end in zip(bounds, bounds[1:]) for piece in split(text[begin:end])]
    return np.cumsum(lengths, dtype=np.int64) - lengths


@pytest.fixture(params=["stand-in", "array_split"], scope="module")
def split_patterns(request):
    """The patterns counted by arrays, with the split in use."""
    with pytest.MonkeyPatch.context() as patched:
        if request.param == "stand-in":
            patched.setattr(array_counts, "piece_starts_of_texts", starts_from_reference_split)
        patterns = [p for p in OPENAI_PATTERNS if array_counts.has_array_counts(p)]
        assert len(patterns) == len(OPENAI_PATTERNS)  # the array path is really taken, for each
        yield patterns


def reference_counts(texts: list[str], pattern: str) -> Counter:
    split = compile_pattern(pattern).split_reference
    return Counter(piece for text in texts for piece in split(text))


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
        assert count_texts(texts, pattern) == reference_counts(texts, pattern)


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
            assert count_texts(batch, pattern) == reference_counts(batch, pattern)


def test_lone_surrogates_are_left_to_the_regex_path(split_patterns):
    assert count_texts(["ab \ud800 cd", "plain text here"], split_patterns[0]) is None
    assert count_texts(["", ""], split_patterns[0]) == {}


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


def test_many_workers_asked_for_never_cut_a_small_input_into_crumbs(monkeypatch):
    # Each worker gets a share of a small input, but no share below SMALLEST_SHARE: --num_workers 100000 on a
    # 200 KB file once cut it into 100,000 ranges of 2 bytes, and started a process for each.
    text = corpus_text("en_docs.txt", 200_000)
    path = write(text)
    engine_workers, task_counts = [], []
    real_open_engine = counting.open_engine

    def recording_engine(engine, *, address=None, workers=None):
        engine_workers.append(workers)
        with real_open_engine(engine, address=address, workers=1) as runner:  # the tasks run here, one by one
            real_map_reduce = runner.map_reduce

            def map_reduce(map_fn, tasks, *args, **options):
                task_counts.append(len(tasks))
                return real_map_reduce(map_fn, tasks, *args, **options)

            runner.map_reduce = map_reduce
            yield runner

    monkeypatch.setattr(counting, "open_engine", contextlib.contextmanager(recording_engine))
    try:
        counts = count_pretokens(path, pattern=GPT2_PATTERN, num_workers=1000)
    finally:
        os.unlink(path)
    assert engine_workers == [1000]
    assert len(task_counts) == 1 and task_counts[0] < 10  # a few ranges of tens of KB, not 1,000 of 200 bytes
    assert counts == reference_counts([text], GPT2_PATTERN)


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
    monkeypatch.setattr(counting, "_BATCH_CHARS", 100)
    docs = [f"Document {i}: some words, some more words.\n" for i in range(200)]
    path = write("\n".join(json.dumps({"text": d}) for d in docs), suffix=".jsonl")
    try:
        for pattern in (GPT2_PATTERN, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN):
            assert count_pretokens(path, pattern=pattern, num_workers=1) == reference_counts(docs, pattern)
    finally:
        os.unlink(path)
