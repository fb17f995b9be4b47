"""Tests for tokenizer.training.train: BPE training with CS336 assignment 1 semantics.

The reference is ``oracle_train`` below: pre-tokens counted with plain ``re.split`` + ``regex.findall``,
then the product's readable trainer ``learn_merges_reference`` (it recounts every pair after every merge and
picks ``max`` by ``(count, (left_bytes, right_bytes))``). The real trainer must give the same merges and vocab
on random (tie-heavy) texts and on slices of real corpora, whatever the number of workers and the chunk size.
"""

from __future__ import annotations

import doctest
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, FUZZ_EXAMPLES, REPO
from tokenizer.training import train as train_mod
from tokenizer import numba_cache
from tokenizer.training import (compile_merge_loop, compiled_merges, fast_merges, merge_loop_cache, merge_tables,
                                reference)
from tokenizer.training.compiled_loop_loader import CompiledLoopLoader
from tokenizer.encoding import Encoding
from tokenizer.jobs import inputs
from tokenizer.jobs.inputs import find_inputs
from tokenizer.loading import load_encoding
from tokenizer.pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN
from tokenizer.saving import save_encoding
from tokenizer.training.train import count_pretokens, find_chunk_boundaries, learn_merges, learn_merges_reference, train_bpe

GPT2_PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
EOT = "<|endoftext|>"

# ---------------------------------------------------------------------------------------------------------
# The oracle


def oracle_pretokens(text: str, specials=(), pattern: str = GPT2_PAT) -> Counter:
    """Pre-token counts: cut at special tokens (longest first), then GPT-2's regex on each piece."""
    pieces = [text]
    if specials:
        by_length = sorted(specials, key=len, reverse=True)
        pieces = re.split("|".join(re.escape(s) for s in by_length), text)
    counts: Counter = Counter()
    for piece in pieces:
        counts.update(regex.findall(pattern, piece))
    return counts


def oracle_train(text: str, vocab_size: int, specials=(), pattern: str = GPT2_PAT):
    """Obviously-correct BPE training: plain pre-token counts, then the readable merge loop."""
    merges = learn_merges_reference(oracle_pretokens(text, specials, pattern), vocab_size - 256 - len(specials))
    vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for s in specials:
        vocab[len(vocab)] = s.encode("utf-8")
    return vocab, merges


def write(text: str | bytes, directory: str | Path | None = None) -> str:
    fd, path = tempfile.mkstemp(suffix=".txt", dir=directory)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def train_text(text: str, vocab_size: int, specials=(), **kw):
    path = write(text)
    try:
        kw.setdefault("num_workers", 1)
        return train_bpe(path, vocab_size, specials, progress=False, **kw)
    finally:
        os.unlink(path)


def test_train_bpe_is_imported_lazily_through_one_rule(monkeypatch):
    """``from tokenizer import train_bpe`` and ``from tokenizer.training import train_bpe`` give the trainer, and
    ``import tokenizer`` does not import it (nor NumPy). The rule was written twice, in two ``__getattr__`` that
    each imported the trainer; tokenizer's now asks tokenizer.training, where the rule is kept once: a name
    tokenizer.training gives is what tokenizer gives."""
    import tokenizer
    import tokenizer.training

    stand_in = object()
    monkeypatch.setitem(vars(tokenizer.training), "train_bpe", stand_in)
    assert tokenizer.train_bpe is stand_in
    assert "train_bpe" in dir(tokenizer) and "train_bpe" in dir(tokenizer.training)
    with pytest.raises(AttributeError, match="module 'tokenizer' has no attribute 'trian_bpe'"):
        tokenizer.trian_bpe  # noqa: B018
    check = (
        "import sys, tokenizer\n"
        "assert 'numpy' not in sys.modules and 'tokenizer.training.train' not in sys.modules, sorted(sys.modules)\n"
        "from tokenizer import train_bpe\n"
        "from tokenizer.training import train_bpe as from_training\n"
        "import tokenizer.training.train\n"
        "assert train_bpe is from_training is tokenizer.train_bpe is tokenizer.training.train.train_bpe\n"
    )
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


# ---------------------------------------------------------------------------------------------------------
# Hand-checked examples

def test_wikipedia_example():
    # "aaabdaaabac" is one pre-token (all letters). Pairs: aa x4 (two in each "aaa"), ab x2, bd, da, ba, ac.
    # 1. (a, a) wins with 4. Left to right, "aaa" -> [aa, a]: word = aa a b d aa a b a c.
    # 2. (aa, a) and (a, b) both have 2; b"aa" > b"a", so (aa, a) wins: aaa b d aaa b a c.
    # 3. (aaa, b) has 2, everything else 1: aaab d aaab a c.
    # 4. All four pairs have 1: (aaab,d) (d,aaab) (aaab,a) (a,c); the greatest left part is b"d": (d, aaab).
    # 5. aaab daaab a c: pairs (aaab, daaab) (daaab, a) (a, c); greatest is (daaab, a).
    # 6. aaab daaaba c: (daaaba, c) beats (aaab, daaaba).
    # 7. aaab daaabac: the only pair. Then one token, nothing left: training stops early.
    expected = [
        (b"a", b"a"),
        (b"aa", b"a"),
        (b"aaa", b"b"),
        (b"d", b"aaab"),
        (b"daaab", b"a"),
        (b"daaaba", b"c"),
        (b"aaab", b"daaabac"),
    ]
    vocab, merges = train_text("aaabdaaabac", 259)
    assert merges == expected[:3]
    assert len(vocab) == 259 and vocab[256] == b"aa" and vocab[258] == b"aaab"
    vocab, merges = train_text("aaabdaaabac", 1000, [EOT])
    assert merges == expected
    assert len(vocab) == 256 + 7 + 1
    assert vocab[263] == EOT.encode()


def test_ties_compare_bytes_not_gpt2_unicode_strings():
    # Pre-tokens "ax" and " x": pairs (a, x) and (" ", x) tie at 1. As bytes b"a" (0x61) > b" " (0x20), so
    # (a, x) wins; GPT-2's printable stand-in for the space is "Ġ" (U+0120), which would sort the other way.
    _, merges = train_text("ax x", 257)
    assert merges == [(b"a", b"x")]
    # A proper prefix sorts first: (b"ab", b"c") vs (b"a", b"bc") -> b"ab" > b"a" wins.
    _, merges = train_text("ab c", 300)
    assert merges[0] == (b"a", b"b")  # tie (a,b)=1 (" ",c)=1: b"a" > b" "
    assert merges == oracle_train("ab c", 300)[1]


def test_long_words_with_many_occurrences():
    # One pre-token with the merged pair many times (runs, repeats, overlaps like "aaa"), as in CJK text where a
    # run of letters is a single pre-token.
    text = " ".join(["ab" * 50, "a" * 37, "aab" * 20, "abba" * 15, "a" * 36, "ba" * 9 + "b"]) + " 中文字符" * 30
    text += " " + "日本語のテキストです" * 12
    assert train_text(text, 400) == oracle_train(text, 400)


def test_vocab_layout_and_early_stop():
    text = "the cat sat on the mat; the hat. " * 5
    vocab, merges = train_text(text, 10_000, ["<|a|>", "<|b|>", "<|a|>"])
    assert sorted(vocab) == list(range(len(vocab)))
    assert all(vocab[i] == bytes([i]) for i in range(256))
    for k, (left, right) in enumerate(merges):
        assert vocab[256 + k] == left + right
    assert vocab[len(vocab) - 2] == b"<|a|>" and vocab[len(vocab) - 1] == b"<|b|>"  # duplicates dropped
    assert len(vocab) < 10_000  # ran out of pairs
    # Every pre-token is a single token at the end, so no pair is left.
    assert {vocab[256 + k] for k in range(len(merges))} >= {t.encode() for t in oracle_pretokens(text) if len(t) > 1}


def test_exact_vocab_size():
    text = (CORPUS / "en_docs.txt").read_text(encoding="utf-8")[:20_000]
    vocab, merges = train_text(text, 300, [EOT])
    assert len(vocab) == 300 and len(merges) == 300 - 256 - 1


def test_special_tokens_are_hard_boundaries():
    # The special token is by far the most frequent string; none of its bytes may be merged, and no pair may
    # cross it ("x" + "<" or ">" + "y").
    text = ("x" + EOT + "y " + EOT) * 200 + "plain text here"
    vocab, merges = train_text(text, 400, [EOT])
    for k, (left, right) in enumerate(merges):
        token = left + right
        assert not set(token) & set(b"<|>"), token
        assert EOT.encode() not in token
    assert list(vocab.values()).count(EOT.encode()) == 1
    assert (vocab, merges) == oracle_train(text, 400, [EOT])


def test_overlapping_special_tokens_longest_first():
    # "<|a|><|b|>" must be cut as the longer token, not as "<|a|>" then leftovers.
    specials = ["<|a|>", "<|a|><|b|>", "b|>"]
    text = "q<|a|><|b|>r <|a|>s b|>t " * 30 + "qq rr ss"
    assert train_text(text, 320, specials) == oracle_train(text, 320, specials)
    # Without the long token the text around it would be different: the test can tell.
    assert oracle_pretokens(text, specials) != oracle_pretokens(text, specials[:1] + specials[2:])


# ---------------------------------------------------------------------------------------------------------
# Against the oracle


def corpus_slice(name: str, start: int, nchars: int) -> str:
    with open(CORPUS / name, encoding="utf-8") as f:
        text = f.read(start + nchars)
    return text[start:]


@pytest.mark.parametrize(
    "name, start, nchars, vocab_size, specials",
    [
        ("en_docs.txt", 0, 25_000, 400, (EOT,)),
        ("en_docs.txt", 5_000_000, 15_000, 350, ()),
        ("en_dictionary.txt", 1_000_000, 15_000, 350, ()),
        ("de_manpages.txt", 100_000, 15_000, 350, ("\n.TH", ".SH")),
        ("ru_manpages.txt", 100_000, 10_000, 350, (".SH",)),
        ("zh_manpages.txt", 100_000, 8_000, 330, ()),
        ("ja_manpages.txt", 100_000, 8_000, 330, ("\n.",)),
    ],
)
def test_matches_oracle_on_real_text(name, start, nchars, vocab_size, specials):
    text = corpus_slice(name, start, nchars)
    expected = oracle_train(text, vocab_size, specials)
    assert len(expected[1]) == vocab_size - 256 - len(specials)
    assert train_text(text, vocab_size, specials, chunk_size=1024) == expected


tie_heavy_text = st.text(alphabet=st.sampled_from("ab a\n'sX1"), max_size=120)
special_text = st.lists(
    st.one_of(st.text(alphabet="ab c<|>\n", max_size=12), st.sampled_from(["<|e|>", "<|e|><|e|>", "|>"])),
    max_size=20,
).map("".join)


# The trainer against its oracle on random texts: FUZZ_EXAMPLES each (100 in the everyday tier; 1,000, as these
# always had, in CI's exhaustive run)
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=tie_heavy_text, extra=st.integers(0, 40), chunk=st.integers(1, 50))
def test_matches_oracle_random_small_alphabet(text, extra, chunk):
    assume(text)
    assert train_text(text, 256 + extra, chunk_size=chunk) == oracle_train(text, 256 + extra)


@settings(max_examples=FUZZ_EXAMPLES * 3 // 5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=special_text, extra=st.integers(0, 30), chunk=st.integers(1, 50))
def test_matches_oracle_random_with_special_tokens(text, extra, chunk):
    assume(text)
    specials = ["<|e|>", "<|e|><|e|>"]
    got = train_text(text, 258 + extra, specials, chunk_size=chunk)
    assert got == oracle_train(text, 258 + extra, specials)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.lists(
        st.sampled_from(["a", "é", "中", "1", "١", " ", "  ", "\n", "\r\n", "\t", "\xa0", "\u3000",
                         "\x1c", "\x85", "'s", "'", "!", "..", "😀"]),
        max_size=40,
    ).map("".join),
    extra=st.integers(0, 30),
)
def test_matches_oracle_random_unicode(text, extra):
    assume(text)
    assert train_text(text, 256 + extra, chunk_size=3) == oracle_train(text, 256 + extra)


def test_other_patterns_match_oracle():
    # cl100k's pattern joins "  \n" into one piece (GPT-2's does not), so a cut before that "\n" would change
    # its counts: the chunks must end at cuts that are safe for the pattern in use.
    text = ("Some text,  \n\tindented  \nmore 12345 words!\n" * 40) + EOT + "tail  \nend"
    for pattern in (CL100K_PATTERN, O200K_PATTERN):
        expected = oracle_train(text, 330, [EOT], pattern)
        assert train_text(text, 330, [EOT], pattern=pattern, chunk_size=7) == expected
    assert oracle_pretokens(text, [EOT], CL100K_PATTERN) != oracle_pretokens(text, [EOT])


# ---------------------------------------------------------------------------------------------------------
# Chunking and workers


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(
        st.sampled_from(["a", "bc", "中", "7", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\xa0", "\x1c", "\x85",
                         "\u2028", "'s", "!", "é", EOT, "<|x|>"]),
        max_size=60,
    ),
    chunk=st.integers(1, 20),
    with_specials=st.booleans(),
)
def test_pretoken_counts_do_not_depend_on_chunking(pieces, chunk, with_specials):
    text = "".join(pieces)
    assume(text)
    specials = [EOT, "<|x|>"] if with_specials else []
    path = write(text)
    try:
        for pattern in (GPT2_PAT, CL100K_PATTERN, O200K_PATTERN):
            got = count_pretokens(path, specials, pattern=pattern, num_workers=1, chunk_size=chunk)
            assert got == oracle_pretokens(text, specials, pattern)
        bounds = find_chunk_boundaries(path, chunk, [s.encode() for s in specials], pattern=CL100K_PATTERN)
    finally:
        os.unlink(path)
    data = text.encode()
    assert bounds[0] == 0 and bounds[-1] == len(data) and bounds == sorted(set(bounds))
    for b in bounds[1:-1]:  # every inner boundary is between two characters, outside any special token
        data[:b].decode("utf-8")
        assert not any(data.find(s.encode(), max(b - len(s) + 1, 0), b + len(s) - 1) >= 0 for s in specials)


@pytest.mark.parametrize("pattern", [GPT2_PAT, R50K_PATTERN, CL100K_PATTERN, O200K_PATTERN])
def test_counts_match_plain_regex_on_corpus_slices(pattern):
    for name in ("en_docs.txt", "ru_manpages.txt", "ja_manpages.txt"):
        text = corpus_slice(name, 0, 200_000)
        path = write(text)
        try:
            expected = oracle_pretokens(text, [EOT], pattern)
            for chunk in (997, 65_536):
                assert count_pretokens(path, [EOT], pattern=pattern, num_workers=1, chunk_size=chunk) == expected
        finally:
            os.unlink(path)


@pytest.mark.parametrize("name", ["en_docs.txt", "zh_manpages.txt"])
def test_chunk_boundaries_really_cut(name):
    # Without this, the chunking tests above could pass with one chunk.
    text = corpus_slice(name, 0, 100_000).replace(EOT, "")
    path = write(text)
    try:
        for pattern in (GPT2_PAT, CL100K_PATTERN, O200K_PATTERN):
            assert len(find_chunk_boundaries(path, 1000, [EOT.encode()], pattern=pattern)) > 50
        # a pattern of one's own: only special tokens are cut at
        assert find_chunk_boundaries(path, 1000, [EOT.encode()], pattern=r"\S+|\s") == [0, os.path.getsize(path)]
    finally:
        os.unlink(path)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.dictionaries(st.text(alphabet="ab é\n", min_size=1, max_size=8), st.integers(1, 5), max_size=12),
    num_merges=st.integers(0, 30),
)
def test_fast_merges_equal_the_reference(counts, num_merges):
    assert learned_by_every_loop(counts, num_merges) == [learn_merges_reference(counts, num_merges)] * 3


@settings(max_examples=300, deadline=None)
@given(
    counts=st.dictionaries(st.text(alphabet="aab", min_size=1, max_size=40), st.integers(1, 3), max_size=6),
    num_merges=st.integers(0, 40),
)
def test_fast_merges_equal_the_reference_on_long_runs(counts, num_merges):
    # long words of two letters: runs like "aaaa" (overlapping pairs), "abab" (one occurrence's right half is
    # the next one's left neighbour) and many equal counts
    assert learned_by_every_loop(counts, num_merges) == [learn_merges_reference(counts, num_merges)] * 3


def test_the_numpy_loop_breaks_a_tie_among_thousands_of_pairs_quickly():
    # Every two-character word of 94 printable characters, once each: 8,836 pairs tie at a count of 1 and every
    # merge takes the greatest of those left, as late merges on a small corpus do (walkthrough 01's 100 KB and
    # 10,000 tokens). Comparing the tied pairs' bytes in Python at every merge took 7 s here (and most of that
    # walkthrough command's 20 s); in array operations it takes under a second. CPU seconds, not wall-clock ones:
    # a test run shares the cores with others
    alphabet = [chr(c) for c in range(33, 127)]
    counts = {a + b: 1 for a in alphabet for b in alphabet}
    started = time.process_time()
    merges = learn_merges(counts, len(counts), compiled=False)
    took = time.process_time() - started
    assert merges == sorted(((a.encode(), b.encode()) for a in alphabet for b in alphabet), reverse=True)
    assert took < 3, f"the NumPy merge loop took {took:.1f} CPU s to break ties among {len(counts):,} pairs"


def test_ties_between_tokens_made_by_merges_compare_their_bytes():
    # the tie-break keeps every token's place in byte order as merges make tokens: b"ab", made first, sorts
    # between older tokens (b"a" < b"ab" < b"b"), so of the pairs tied at 2 (b, a) comes before (ab, y) and
    # (ab, x) before (a, z)
    counts = {"ab": 9, "abx": 2, "aby": 2, "ba": 2, "az": 2, "bz": 2}
    expected = [(b"a", b"b"), (b"b", b"z"), (b"b", b"a"), (b"ab", b"y"), (b"ab", b"x"), (b"a", b"z")]
    assert learn_merges_reference(counts, 6) == expected
    assert learn_merges(counts, 6, compiled=False) == expected


class StubLoader:
    """Stands in for the process's CompiledLoopLoader: the compiled loop (loaded in this process) from the
    ``ready_at``-th question on (1: before the first merge, 2: after it), or never (None: as without numba)."""

    def __init__(self, ready_at: int | None):
        self.ready_at, self.asked = ready_at, 0
        self.unavailable = None if ready_at else "a stub without numba"

    def start_compiling(self):  # learn_merges asks this first: the questions are counted from here
        self.asked = 0

    def start_loading(self):
        pass

    def kernel(self):
        self.asked += 1
        return compiled_merges.load_kernel() if self.ready_at and self.asked >= self.ready_at else None

    def activity(self):
        return None

    def compiling_pid(self):
        return None


def learned_by_every_loop(counts, num_merges: int) -> list:
    """The merges of each loop learn_merges can run: NumPy, compiled, and NumPy switching to compiled after
    the first merge (the job counted as large, so that the switch is tried)."""
    results = [learn_merges(counts, num_merges, compiled=False), learn_merges(counts, num_merges, compiled=True)]
    with mock.patch.object(fast_merges, "COMPILED_LOOP_MIN_WORK", 0):
        results.append(learn_merges(counts, num_merges, loader=StubLoader(ready_at=2)))
    return results


def merges_of(merger: compiled_merges.CompiledMerger, done: int) -> list[tuple[bytes, bytes]]:
    tokens = [bytes([i]) for i in range(256)]
    for a, b in merger.merges[:done].tolist():
        tokens.append(tokens[a] + tokens[b])
    return [(tokens[a], tokens[b]) for a, b in merger.merges[:done].tolist()]


@settings(max_examples=100, deadline=None)
@given(
    counts=st.dictionaries(st.text(alphabet="abcé", min_size=1, max_size=30), st.integers(1, 4), max_size=10),
    num_merges=st.integers(0, 40),
)
def test_compiled_merges_equal_the_reference_when_its_arrays_grow(counts, num_merges):
    # no room beyond the start: the compiled loop grows its arrays before (almost) every merge
    words = merge_tables.FlatWords(counts)
    merger = compiled_merges.CompiledMerger(compiled_merges.load_kernel(), words.tok, words.nxt, words.prv,
                                            words.weight, 256 + num_merges, headroom=0)
    done = merger.merge(num_merges, np.zeros((0, 2), np.int32))
    assert merges_of(merger, done) == learn_merges_reference(counts, num_merges)


@pytest.mark.parametrize("name", ["en_docs.txt", "ja_manpages.txt", "ru_manpages.txt"])
def test_compiled_and_numpy_merges_equal_on_real_text(name):
    counts = oracle_pretokens(corpus_slice(name, 0, 200_000), [EOT])
    numpy, compiled, switching = learned_by_every_loop(counts, 1000)
    assert numpy == compiled == switching
    assert compiled[:80] == learn_merges_reference(counts, 80)


def test_compiled_merges_with_64_bit_weights_equal_numpys():
    counts = oracle_pretokens(corpus_slice("de_manpages.txt", 0, 300_000), [EOT])
    counts = {piece: n * 2**32 + i for i, (piece, n) in enumerate(counts.items())}
    assert merge_tables.FlatWords(counts).weight.dtype == np.int64
    numpy, compiled, switching = learned_by_every_loop(counts, 800)
    assert len(numpy) == 800 and numpy == compiled == switching


def run_python(code: str, env: dict | None = None) -> str:
    """Run ``code`` in a fresh interpreter from the checkout; its stdout (it must succeed)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_small_job_imports_no_numba_and_compiles_nothing(tmp_path):
    (tmp_path / "corpus.txt").write_text(corpus_slice("en_docs.txt", 0, 50_000), encoding="utf-8")
    cache = tmp_path / "cache"
    env = dict(os.environ, TOKENIZER_CACHE_DIR=str(cache), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    child = ("import sys; from tokenizer.training.train import train_bpe, learn_merges_reference, count_pretokens\n"
             f"path = {str(tmp_path / 'corpus.txt')!r}\n"
             "vocab, merges = train_bpe(path, 500, num_workers=1, progress=False)\n"
             "assert merges == learn_merges_reference(count_pretokens(path), 500 - 256)\n"
             "print('numba' in sys.modules)")
    assert run_python(child, env).split() == ["False"]
    assert not cache.exists() and not (tmp_path / "numba").exists()


def test_a_large_job_compiles_in_the_background_and_a_later_one_loads_it(tmp_path):
    # The whole way in, in fresh processes sharing this session's cache folder: a job counted as large starts
    # the compile program (unless a test before it left the folder marked) and merges meanwhile; then, the
    # folder marked, a later process loads the loop from numba's cache without compiling anything.
    (tmp_path / "corpus.txt").write_text(corpus_slice("en_docs.txt", 0, 100_000), encoding="utf-8")
    first = ("import time; from tokenizer.training import fast_merges, train, merge_loop_cache\n"
             "fast_merges.COMPILED_LOOP_MIN_WORK = 0\n"
             f"path = {str(tmp_path / 'corpus.txt')!r}\n"
             "counts = train.count_pretokens(path)\n"
             "expected = train.learn_merges(counts, 700, compiled=False)\n"
             "assert train.train_bpe(path, 956, num_workers=1, progress=False)[1] == expected\n"
             "while train.LOADER.kernel() is None and not train.LOADER.unavailable:\n"
             "    time.sleep(0.5)\n"
             "assert train.LOADER.unavailable is None, train.LOADER.unavailable\n"
             "assert merge_loop_cache.is_marked()\n"
             "print(train.learn_merges(counts, 700) == expected)")
    assert run_python(first).split() == ["True"]
    later = ("import time; from tokenizer.training import fast_merges, train, train_kernel\n"
             "fast_merges.COMPILED_LOOP_MIN_WORK = 0\n"
             "train.LOADER.start_loading()\n"
             "while train.LOADER.kernel() is None:\n"
             "    time.sleep(0.05)\n"
             f"path = {str(tmp_path / 'corpus.txt')!r}\n"
             "counts = train.count_pretokens(path)\n"
             "assert train.learn_merges(counts, 700) == train.learn_merges(counts, 700, compiled=False)\n"
             "functions = (train_kernel.start, train_kernel.merge_until, train_kernel.compact)\n"
             "print(sum(sum(f.stats.cache_hits.values()) for f in functions) > 0,\n"
             "      sum(sum(f.stats.cache_misses.values()) for f in functions))")
    assert run_python(later).split() == ["True", "0"]


def test_when_the_compile_program_fails_its_log_is_shown_and_numpy_merges(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKENIZER_CACHE_DIR", str(tmp_path))  # no mark there
    log = numba_cache.log_path(merge_loop_cache.folder())

    def failing_program(module, cache_folder):
        assert (module, cache_folder) == (compile_merge_loop.__name__, merge_loop_cache.folder())
        log.parent.mkdir(parents=True)
        log.write_text("numba said no")
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])

    monkeypatch.setattr(numba_cache, "start_program", failing_program)
    monkeypatch.setattr(compiled_merges, "loaded_kernel", lambda: None)  # as in a process that has not loaded it
    loader = CompiledLoopLoader()
    loader.start_compiling()
    assert "compiling" in loader.activity()
    while loader.activity():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert loader.kernel() is None
        time.sleep(0.05)
    assert "compiling the merge loop failed (exit status 1)" in loader.unavailable
    assert "numba said no" in str(caught[0].message)
    counts = {"aaabdaaabac": 1, " ab": 3, "dab": 2}
    monkeypatch.setattr(fast_merges, "COMPILED_LOOP_MIN_WORK", 0)
    assert learn_merges(counts, 20, loader=loader) == learn_merges_reference(counts, 20)


def test_without_numba_the_numpy_merge_loop_runs(monkeypatch):
    compiled_merges.load_kernel()  # loaded: still, numba is what the compiled loop is promised with
    monkeypatch.setitem(sys.modules, "numba", None)  # as if not installed: find_spec and import see nothing
    assert compiled_merges.load_kernel() is None
    loader = CompiledLoopLoader()
    loader.start_compiling()
    assert "numba is not installed" in loader.unavailable and loader.kernel() is None
    counts = {"aaabdaaabac": 1, " ab": 3, "dab": 2}
    monkeypatch.setattr(fast_merges, "COMPILED_LOOP_MIN_WORK", 0)
    assert learn_merges(counts, 20, loader=loader) == learn_merges_reference(counts, 20)
    with pytest.raises(ImportError, match=r"needs numba: pip install 'numba>=0.59'"):
        learn_merges(counts, 20, compiled=True)


@pytest.mark.parametrize("compiled", [True, False])
def test_counts_beyond_32_bits(compiled):
    counts = {"abc": 2**40, "bcd": 2**40 + 1, "abcd": 2**33, "dd": 3 * 2**31}
    assert learn_merges(counts, 5, compiled=compiled) == learn_merges_reference(counts, 5) == [
        (b"b", b"c"), (b"bc", b"d"), (b"a", b"bc"), (b"a", b"bcd"), (b"d", b"d")]


def test_a_vocab_size_beyond_what_the_text_holds_learns_every_merge_there_is():
    # More merges asked for than the pre-tokens could ever give (a vocab_size typed with too many digits):
    # every loop stops when no pair is left, without first making room for all the merges asked for.
    counts = {"hello": 3, " world": 2, " help": 1}
    every_merge = learn_merges_reference(counts, 100)
    assert len(every_merge) < 100
    assert learned_by_every_loop(counts, 10**14) == [every_merge] * 3


def test_same_result_for_any_workers_and_chunk_size():
    text = corpus_slice("en_docs.txt", 2_000_000, 120_000) + corpus_slice("de_manpages.txt", 0, 40_000)
    path = write(text)
    try:
        results = []
        for workers, chunk in [(1, 1 << 22), (2, 4097), (4, 1), (1, 12_345), (4, 50_003), (None, 77_777)]:
            results.append(train_bpe(path, 600, [EOT], num_workers=workers, chunk_size=chunk, progress=False))
    finally:
        os.unlink(path)
    assert all(r == results[0] for r in results[1:])
    assert len(results[0][1]) == 600 - 257


def test_progress_bars(capsys):
    text = "hello world " * 100
    path = write(text)
    try:
        assert train_bpe(path, 270, progress=True, num_workers=1) == train_bpe(path, 270, progress=False)
    finally:
        os.unlink(path)
    err = capsys.readouterr().err
    assert "MB" in err and "merges" in err


# ---------------------------------------------------------------------------------------------------------
# Bad input


def test_vocab_size_below_minimum(tmp_path):
    path = write("hello", tmp_path)
    with pytest.raises(ValueError, match="minimum is 258"):
        train_bpe(path, 257, ["<a>", "<b>"], progress=False)
    with pytest.raises(ValueError, match="minimum is 256"):
        train_bpe(path, 10, progress=False)
    assert len(train_bpe(path, 258, ["<a>", "<b>"], progress=False)[0]) == 258


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.txt"
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        train_bpe(missing, 300, progress=False)


def test_empty_file(tmp_path):
    path = write("", tmp_path)
    with pytest.raises(ValueError, match="empty"):
        train_bpe(path, 300, progress=False)


@pytest.mark.parametrize("workers, chunk", [(1, 1 << 20), (2, 100)])
def test_invalid_utf8_names_file_and_offset(tmp_path, workers, chunk):
    good = ("word after word\n" * 200).encode()
    path = write(good + b"\xff\xfe" + good, tmp_path)
    with pytest.raises(ValueError, match=rf"{re.escape(os.path.basename(path))} is not valid UTF-8: byte {len(good)} is b'\\xff'"):
        train_bpe(path, 300, num_workers=workers, chunk_size=chunk, progress=False)


def test_bad_special_tokens(tmp_path):
    path = write("hello", tmp_path)
    with pytest.raises(TypeError):
        train_bpe(path, 300, EOT, progress=False)  # a string, not a list of strings
    with pytest.raises(ValueError, match="empty"):
        train_bpe(path, 300, [""], progress=False)
    with pytest.raises(TypeError):
        train_bpe(path, 300, [b"<|x|>"], progress=False)


def test_no_special_tokens_may_be_said_with_none(tmp_path):
    """tokenizer.Tokenizer (CS336's class) reads special_tokens=None as none; train_bpe(path, n, None), a student's
    same value for the same argument, failed inside with TypeError: 'NoneType' object is not iterable."""
    path = write("low lower lowest newest " * 20, tmp_path)
    vocab, merges = train_bpe(path, 264, None, progress=False)
    assert (vocab, merges) == train_bpe(path, 264, [], progress=False) and len(vocab) == 264


def test_bad_workers_and_chunk_size(tmp_path):
    path = write("hello", tmp_path)
    with pytest.raises(ValueError, match="num_workers"):
        train_bpe(path, 300, num_workers=0, progress=False)
    with pytest.raises(ValueError, match="chunk_size"):
        train_bpe(path, 300, chunk_size=0, progress=False)


# ---------------------------------------------------------------------------------------------------------
# Saving trained tokenizers (tokenizer/saving.py, tokenizer/loading.py)


SHARED_GPT2 = CORPUS.parent / "encodings" / "gpt2"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    text = corpus_slice("en_docs.txt", 0, 300_000)
    path = write(text, tmp_path_factory.mktemp("train"))
    vocab, merges = train_bpe(path, 1200, [EOT], num_workers=1, progress=False)
    enc = Encoding.from_vocab_merges(vocab, merges, [EOT], name="trained")
    sample = (
        corpus_slice("en_docs.txt", 9_000_000, 30_000)
        + EOT
        + corpus_slice("de_manpages.txt", 0, 20_000)
        + corpus_slice("ru_manpages.txt", 0, 10_000)
        + corpus_slice("zh_manpages.txt", 0, 5_000)
    )
    return vocab, merges, enc, sample


def test_trained_encoding_round_trips_through_every_format(trained, tmp_path):
    vocab, merges, enc, sample = trained
    ids = enc.encode(sample, allowed_special="all")
    assert enc.decode(ids) == sample
    assert enc.merges == merges
    for fmt in ("gpt2", "tiktoken", "hf"):
        save_encoding(enc, tmp_path / fmt, fmt)
        loaded = load_encoding(tmp_path / fmt)
        assert loaded.encode(sample, allowed_special="all") == ids, fmt
        assert loaded.special_tokens == {EOT: 1199}


def test_a_learned_token_written_like_a_special_token_survives_the_gpt2_format(tmp_path):
    """Haskell's <|> (or ASCII art's <||>) in the training text: BPE learns b"<|>", encoder.json writes it "<|>",
    and its readers took every entry written <|...|> for a special token. Loading the saved tokenizer (the train
    command's default format) then failed: merge #1 b'<' + b'|>' makes b'<|>', which is not in the vocab; and
    encoder.py's Encoding made "<|>" a special token that encode() refused. A token a merge makes is BPE's."""
    from gpt2_numpy import encoder
    from tokenizer import Tokenizer

    path = write("<|> q\n<|> r\n" * 40 + "<||> art\n" * 20, tmp_path)  # each line's first pre-token: <|>, <||>
    vocab, merges = train_bpe(path, 300, [EOT], num_workers=1, progress=False)
    assert b"<|>" in vocab.values() and b"<||>" in vocab.values()
    enc = Encoding.from_vocab_merges(vocab, merges, [EOT], name="haskell")
    text = "f <|> g <||> h"
    ids = enc.encode(text + EOT, allowed_special="all")
    save_encoding(enc, tmp_path / "saved", "gpt2")
    loaded = load_encoding(tmp_path / "saved")
    assert loaded.special_tokens == {EOT: len(vocab) - 1}
    assert loaded.encode(text + EOT, allowed_special="all") == ids
    files = [tmp_path / "saved" / name for name in ("encoder.json", "vocab.bpe")]
    assert Tokenizer.from_files(*files, special_tokens=[EOT]).encode(text + EOT) == ids
    openai_style = encoder.get_encoder("saved", tmp_path)
    assert openai_style.encoding.special_tokens == {EOT: len(vocab) - 1}
    assert openai_style.encode(text) == openai_style.encoding.encode(text) == ids[:-1]
    assert openai_style.decode(ids) == text + EOT


def test_a_special_token_not_written_like_one_is_refused_by_the_gpt2_format(trained, tmp_path):
    """encoder.json has no mark for special tokens: its readers tell them by the form <|...|>. A tokenizer with the
    special token [SEP] (or <pad>) saved in the gpt2 format loaded back with no special tokens at all, [SEP]
    encoded as five bytes of text: lost without a word. The gpt2 format now refuses it; hf and tiktoken keep it."""
    vocab, merges, _, _ = trained
    base = {i: token for i, token in vocab.items() if i < len(vocab) - 1}  # without <|endoftext|>
    enc = Encoding.from_vocab_merges(base | {len(base): b"[SEP]"}, merges, ["[SEP]"], name="sep")
    with pytest.raises(ValueError, match=r"tells special tokens only by their form <\|\.\.\.\|>, so '\[SEP\]' would "
                                         r"load back as ordinary text: save as 'hf' or 'tiktoken'"):
        save_encoding(enc, tmp_path / "gpt2", "gpt2")
    assert not (tmp_path / "gpt2").exists()  # refused before anything is written
    for fmt in ("hf", "tiktoken"):
        save_encoding(enc, tmp_path / fmt, fmt)
        assert load_encoding(tmp_path / fmt).special_tokens == {"[SEP]": len(base)}, fmt


def test_saved_files_give_the_same_ids_in_hf_tiktoken_and_encoder_py(trained, tmp_path):
    import tiktoken
    import tokenizers
    from tiktoken.load import load_tiktoken_bpe

    from gpt2_numpy import encoder

    vocab, merges, enc, sample = trained
    ids = enc.encode(sample, allowed_special="all")
    plain = sample.replace(EOT, "")
    plain_ids = enc.encode_ordinary(plain)
    for fmt in ("gpt2", "tiktoken", "hf"):
        enc.save(tmp_path / fmt, format=fmt)
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    assert hf.encode(sample).ids == ids
    assert hf.decode(ids, skip_special_tokens=False) == sample
    ranks = load_tiktoken_bpe(str(tmp_path / "tiktoken" / "encoding.tiktoken"))
    tt = tiktoken.Encoding("t", pat_str=enc.pat_str, mergeable_ranks=ranks, special_tokens=enc.special_tokens)
    assert tt.encode(sample, allowed_special="all") == ids
    gpt2_dir = tmp_path / "gpt2"
    model = tokenizers.models.BPE.from_file(str(gpt2_dir / "encoder.json"), str(gpt2_dir / "vocab.bpe"))
    hf_gpt2 = tokenizers.Tokenizer(model)
    hf_gpt2.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    assert hf_gpt2.encode(plain).ids == plain_ids
    assert encoder.get_encoder("gpt2", tmp_path).encode(plain) == plain_ids


def test_hf_format_with_another_pattern(tmp_path):
    import tokenizers

    text = corpus_slice("en_docs.txt", 0, 60_000)
    vocab, merges = train_text(text, 500, [EOT], pattern=CL100K_PATTERN)
    enc = Encoding.from_vocab_merges(vocab, merges, [EOT], pat_str=CL100K_PATTERN)
    sample = corpus_slice("en_docs.txt", 7_000_000, 20_000) + "  \n\n  x = 12345678\n"
    save_encoding(enc, tmp_path / "hf", "hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    ids = enc.encode(sample, allowed_special="all")
    assert EOT in sample and hf.encode(sample).ids == ids
    assert load_encoding(tmp_path / "hf").encode(sample, allowed_special="all") == ids
    with pytest.raises(ValueError, match="pattern"):
        save_encoding(enc, tmp_path / "g", "gpt2")  # vocab.bpe cannot say which pattern


def test_gpt2_vocab_and_merges_reproduce_gpt2(tmp_path):
    import tiktoken

    from tokenizer import get_encoding
    from tokenizer.vocab_files import read_gpt2_encoder_json, read_gpt2_vocab_bpe

    token_ids, specials = read_gpt2_encoder_json(SHARED_GPT2 / "encoder.json")
    merges = read_gpt2_vocab_bpe(SHARED_GPT2 / "vocab.bpe")
    vocab = {i: t for t, i in token_ids.items()} | {i: s.encode() for s, i in specials.items()}
    ours = Encoding.from_vocab_merges(vocab, merges, list(specials), name="gpt2-from-files")
    reference = get_encoding("gpt2")
    oracle = tiktoken.get_encoding("gpt2")
    for name in ("en_docs.txt", "de_manpages.txt", "ru_manpages.txt", "ja_manpages.txt"):
        text = corpus_slice(name, 50_000, 40_000)
        expected = oracle.encode(text, allowed_special="all")
        assert ours.encode(text, allowed_special="all") == expected
        assert reference.encode(text, allowed_special="all") == expected
    # Merge recovery from ranks (tiktoken's files hold no merges) gives back vocab.bpe, and saving gives
    # byte-identical GPT-2 files.
    assert ours.merges == merges and reference.merges == merges
    save_encoding(reference, tmp_path / "gpt2", "gpt2")
    assert (tmp_path / "gpt2" / "vocab.bpe").read_bytes().split(b"\n")[1:] == (
        (SHARED_GPT2 / "vocab.bpe").read_bytes().split(b"\n")[1:]
    )
    assert json_load(tmp_path / "gpt2" / "encoder.json") == json_load(SHARED_GPT2 / "encoder.json")


def json_load(path):
    import json

    return json.loads(Path(path).read_text(encoding="utf-8"))


def test_malformed_saved_files_name_file_and_line(trained, tmp_path):
    _, _, enc, _ = trained
    for fmt in ("gpt2", "tiktoken", "hf"):
        save_encoding(enc, tmp_path / fmt, fmt)
    bpe = tmp_path / "gpt2" / "vocab.bpe"
    lines = bpe.read_text(encoding="utf-8").split("\n")
    lines[5] = "three fields here"
    bpe.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.bpe, line 6"):
        load_encoding(tmp_path / "gpt2")
    lines[5] = "Ġzzq Ġqzz"  # tokens that are not in encoder.json
    bpe.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab\.bpe: line 6"):
        load_encoding(tmp_path / "gpt2")
    (tmp_path / "gpt2" / "encoder.json").write_text('{"a": 1,\n "b": }', encoding="utf-8")
    with pytest.raises(ValueError, match=r"encoder\.json.*line 2"):
        load_encoding(tmp_path / "gpt2")
    ranks = tmp_path / "tiktoken" / "encoding.tiktoken"
    rows = ranks.read_bytes().split(b"\n")
    rows[9] = b"not-base64!! 9"
    ranks.write_bytes(b"\n".join(rows))
    with pytest.raises(ValueError, match=r"encoding\.tiktoken, line 10"):
        load_encoding(tmp_path / "tiktoken")
    tok = tmp_path / "hf" / "tokenizer.json"
    data = json_load(tok)
    data["model"]["merges"][3] = ["Ġ", "b", "c"]
    import json

    tok.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer\.json: model\.merges\[3\]"):
        load_encoding(tok)
    tok.write_text("{\n\n oops", encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer\.json.*line 3"):
        load_encoding(tmp_path / "hf")
    with pytest.raises(ValueError, match="unknown format"):
        save_encoding(enc, tmp_path / "x", "sentencepiece")
    with pytest.raises(FileNotFoundError):
        load_encoding(tmp_path / "nothing-here")


def test_saving_writes_the_merges_it_was_given(trained, tmp_path, monkeypatch):
    import tokenizer.bpe

    vocab, merges, enc, sample = trained

    def no_recovery(ranks):
        raise AssertionError("an encoding made from vocab + merges must not re-derive its merges")

    monkeypatch.setattr(tokenizer.bpe, "recover_merges", no_recovery)
    for fmt in ("gpt2", "hf"):
        save_encoding(enc, tmp_path / fmt, fmt)
        assert load_encoding(tmp_path / fmt).merges == merges


def test_empty_vocab_bpe_is_refused(trained, tmp_path):
    _, _, enc, _ = trained
    save_encoding(enc, tmp_path / "gpt2", "gpt2")
    for content in ["", "#version: 0.2\n"]:
        (tmp_path / "gpt2" / "vocab.bpe").write_text(content, encoding="utf-8")
        with pytest.raises(ValueError, match=r"gpt2[/\\]vocab\.bpe: no merges"):
            load_encoding(tmp_path / "gpt2")
    bytes_only = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)}, [])
    with pytest.raises(ValueError, match="no merges.*'hf' or 'tiktoken'"):
        save_encoding(bytes_only, tmp_path / "bytes-only", "gpt2")
    assert not (tmp_path / "bytes-only").exists()  # checked before anything is written
    save_encoding(bytes_only, tmp_path / "bytes-only", "hf")
    assert load_encoding(tmp_path / "bytes-only").encode("hi") == [104, 105]


# ---------------------------------------------------------------------------------------------------------
# Several inputs: files, globs, .jsonl


@pytest.fixture(scope="module")
def documents():
    text = corpus_slice("en_docs.txt", 3_000_000, 60_000) + corpus_slice("ru_manpages.txt", 0, 20_000)
    return [d for d in text.split("\n\n") if d]


def test_any_file_split_of_the_documents_gives_the_same_merges(documents, tmp_path):
    import gzip
    import json

    whole = tmp_path / "whole.txt"
    whole.write_text(EOT.join(documents), encoding="utf-8")
    expected = train_bpe(whole, 700, [EOT], num_workers=1, progress=False)
    # the documents cut into files at document boundaries, plain and JSON lines, one worker or two
    for n_files, workers in [(2, 1), (5, 2), (len(documents) // 3, 2)]:
        folder = tmp_path / f"split{n_files}"
        folder.mkdir()
        for k in range(n_files):
            part = documents[k::n_files]
            (folder / f"part{k:04d}.txt").write_text(EOT.join(part), encoding="utf-8")
        got = train_bpe(str(folder / "*.txt"), 700, [EOT], num_workers=workers, chunk_size=5000, progress=False)
        assert got == expected
    lines = "".join(json.dumps({"id": i, "text": d}) + "\n" for i, d in enumerate(documents))
    (tmp_path / "docs.jsonl").write_text(lines, encoding="utf-8")
    with gzip.open(tmp_path / "docs.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write(lines)
    for name, workers, chunk in [("docs.jsonl", 1, 1 << 20), ("docs.jsonl", 2, 3000), ("docs.jsonl.gz", 2, 100)]:
        assert train_bpe(tmp_path / name, 700, [EOT], num_workers=workers, chunk_size=chunk,
                         progress=False) == expected
    # a mix of both kinds, listed
    half = len(documents) // 2
    (tmp_path / "first.txt").write_text(EOT.join(documents[:half]), encoding="utf-8")
    (tmp_path / "second.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in documents[half:]))
    assert train_bpe([tmp_path / "first.txt", tmp_path / "second.jsonl"], 700, [EOT], text_field="body",
                     num_workers=2, chunk_size=7000, progress=False) == expected


def test_the_package_gives_train_bpe_itself_with_its_signature_and_help():
    import pydoc

    import tokenizer

    assert tokenizer.train_bpe is train_bpe and "train_bpe" in dir(tokenizer)
    assert inspect.signature(tokenizer.train_bpe) == inspect.signature(train_bpe)
    assert tokenizer.train_bpe.__doc__ == train_bpe.__doc__
    assert "train_bpe(inputs: 'str | os.PathLike" in pydoc.render_doc(tokenizer.train_bpe, renderer=pydoc.plaintext)
    # imported on first use: `import tokenizer` alone does not import the trainer
    assert run_python("import sys, tokenizer; print('tokenizer.training.train' in sys.modules)").split() == ["False"]


def test_the_training_package_gives_its_driver_imported_on_first_use():
    from tokenizer import training
    from tokenizer.training import train_bpe as from_the_package

    assert from_the_package is train_bpe and "train_bpe" in dir(training)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        training.no_such_name
    # a light module of the package (the reference, the compiling process) does not import the driver nor NumPy
    loaded = run_python("import sys, tokenizer.training.reference, tokenizer.training.compile_merge_loop; "
                        "print('tokenizer.training.train' in sys.modules, 'numpy' in sys.modules)")
    assert loaded.split() == ["False", "False"]


def test_docstring_examples():
    for module in (train_mod, reference):
        assert doctest.testmod(module).failed == 0


def test_files_are_separate_documents(tmp_path):
    # "ab" + "ab" in one file would give the pair (b, a); two files never do
    (tmp_path / "1.txt").write_text("ab")
    (tmp_path / "2.txt").write_text("ab")
    vocab, merges = train_bpe(str(tmp_path / "*.txt"), 300, progress=False, num_workers=1)
    assert merges == [(b"a", b"b")]
    assert find_inputs([str(tmp_path / "*.txt"), tmp_path / "1.txt"]) == [
        tmp_path / "1.txt", tmp_path / "2.txt"]  # sorted matches, each file once


def test_bad_inputs_name_file_and_line(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"no file matches '.*nothing-\*\.txt'"):
        train_bpe(str(tmp_path / "nothing-*.txt"), 300, progress=False)
    (tmp_path / "ok.txt").write_text("fine")
    with pytest.raises(FileNotFoundError, match="input file not found: .*gone.txt"):
        train_bpe([tmp_path / "ok.txt", tmp_path / "gone.txt"], 300, progress=False)
    (tmp_path / "sub").mkdir()
    with pytest.raises(FileNotFoundError, match="sub is a directory without .txt, .jsonl"):
        train_bpe(tmp_path / "sub", 300, progress=False)
    good = '{"text": "one"}\n\n{"text": "two"}\n'
    cases = [
        (good + "{not json}\n", r"bad.jsonl line 4: not JSON \(Expecting property name"),
        (good + '{"txt": "x"}\n', r'bad.jsonl line 4: no "text" field \(its fields: "txt"\); name the text'),
        (good + "[1, 2]\n", r'bad.jsonl line 4: a JSON list, not an object with a "text" field'),
        (good + '{"text": 3}\n', r'bad.jsonl line 4: "text" holds a number, not text; name the text'),
        (good * 50 + "{\n", r"bad.jsonl line 151: not JSON"),
    ]
    for content, message in cases:
        (tmp_path / "bad.jsonl").write_text(content)
        for workers, chunk in [(1, 1 << 20), (2, 40)]:
            with pytest.raises(ValueError, match=message):
                train_bpe(tmp_path / "bad.jsonl", 300, progress=False, num_workers=workers, chunk_size=chunk)

    def refuse(path, *args, **kw):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(inputs, "open", refuse, raising=False)
    with pytest.raises(PermissionError, match="cannot read .*ok.txt: Permission denied"):
        train_bpe(tmp_path / "ok.txt", 300, progress=False)


@pytest.mark.parametrize("ready_at", [1, 2, None], ids=["compiled", "switching", "numpy"])
def test_resume_from_a_checkpoint_gives_the_uninterrupted_merges(documents, tmp_path, monkeypatch, ready_at):
    # the job counted as large, with the compiled loop there from the start, after the first merge, or never
    monkeypatch.setattr(fast_merges, "COMPILED_LOOP_MIN_WORK", 0)
    monkeypatch.setattr(train_mod, "LOADER", StubLoader(ready_at))
    (tmp_path / "corpus.txt").write_text("\n\n".join(documents), encoding="utf-8")
    path, state = tmp_path / "corpus.txt", tmp_path / "state"
    expected = train_bpe(path, 900, [EOT], num_workers=1, progress=False)
    assert train_bpe(path, 900, [EOT], num_workers=1, progress=False, checkpoint=state) == expected
    merges_file = state / "merges.json"
    all_ids = json.loads(merges_file.read_text())
    assert len(all_ids) == 900 - 257
    for done in (0, 1, 100, len(all_ids)):  # as if killed after `done` merges
        merges_file.write_text(json.dumps(all_ids[:done]))
        assert train_bpe(path, 900, [EOT], num_workers=2, progress=False, checkpoint=state, resume=True) == expected
    # a bigger vocab goes on from the state; a smaller one stops early
    bigger = train_bpe(path, 1000, [EOT], num_workers=1, progress=False)
    assert train_bpe(path, 1000, [EOT], progress=False, checkpoint=state, resume=True) == bigger
    assert train_bpe(path, 500, [EOT], progress=False, checkpoint=state, resume=True)[1] == expected[1][: 500 - 257]
    with pytest.raises(ValueError, match="made with other special_tokens"):
        train_bpe(path, 900, [], progress=False, checkpoint=state, resume=True)
    merges_file.write_text(json.dumps([[300, 301]]))
    with pytest.raises(ValueError, match=r"merge 0 of the checkpoint, ids \(300, 301\), is not a pair"):
        train_bpe(path, 900, [EOT], progress=False, checkpoint=state, resume=True)
    with pytest.raises(FileNotFoundError, match="no training state to resume in"):
        train_bpe(path, 900, [EOT], progress=False, checkpoint=tmp_path / "elsewhere", resume=True)


def test_the_earliest_bad_jsonl_line_is_reported_whatever_the_workers(tmp_path):
    # bad lines in several chunks: each worker stops at its own first one; the earliest in the file is named
    lines = ['{"text": "one two"}'] * 400
    for k in (57, 133, 260, 399):
        lines[k] = "{not json"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    for workers, chunk in [(1, 1 << 20), (2, 100), (3, 555), (4, 2000)]:
        with pytest.raises(ValueError, match=r"bad.jsonl line 58: not JSON"):
            train_bpe(path, 300, progress=False, num_workers=workers, chunk_size=chunk)
    with pytest.raises(ValueError, match=r"b.jsonl line 2: not JSON"):  # files in the order given
        (tmp_path / "a.jsonl").write_text('{"text": "x"}\n')
        (tmp_path / "b.jsonl").write_text('{"text": "x"}\n{no\n')
        train_bpe([tmp_path / "b.jsonl", tmp_path / "a.jsonl", path], 300, progress=False, num_workers=2,
                  chunk_size=10)


def _count_or_fail(task, report):
    """A map task of the test below: task 0 is bad input; any other waits until it has failed, then says it ran."""
    number, failed, ran = task
    if number == 0:
        Path(failed).touch()
        raise ValueError("task 0 is bad input")
    for _ in range(3000):  # (at most 30 s: a task runs after the failure, which is what is counted)
        if os.path.exists(failed):
            break
        time.sleep(0.01)
    if number == 1:
        time.sleep(0.2)  # the first task after the failure is still running as it is told: it finishes
    with open(ran, "a", encoding="utf-8") as f:
        f.write(f"{number}\n")
    return Counter({number: 1})


def test_a_bad_task_stops_the_other_workers_from_starting_their_later_tasks(tmp_path):
    # train on several files, one of them bad: the worker that met it stopped, but the others counted their whole
    # share of the other files before the error was told (tasks whose counts were then thrown away)
    from tokenizer.jobs.engines import LocalEngine, ProgressBar

    failed, ran = tmp_path / "failed", tmp_path / "ran"
    tasks = [(number, str(failed), str(ran)) for number in range(20)]  # worker 0: tasks 0, 2, ...; worker 1: 1, 3, ...
    bar = ProgressBar([1] * len(tasks), desc="", enabled=False)
    with pytest.raises(ValueError, match="task 0 is bad input"):
        LocalEngine(2).map_reduce(_count_or_fail, tasks, _add_counters, bar)
    ran_after_failure = ran.read_text(encoding="utf-8").split() if ran.exists() else []
    # at most the one that was running when task 0 failed (none, if its worker started late); none started after
    assert ran_after_failure in ([], ["1"]), ran_after_failure


def _add_counters(left: Counter, right: Counter) -> Counter:
    return left + right


def test_a_one_byte_special_token_is_refused_before_training_and_named_by_from_vocab_merges(tmp_path):
    """A special token of one byte ("|") was trained with, then refused by Encoding.from_vocab_merges as "vocab
    lacks 1 single-byte tokens (e.g. b'|')": a vocab the caller never wrote, and "1 ... tokens". train_bpe
    refuses it first; from_vocab_merges names the special token; a vocab that does lack one byte says "1 ...
    token"."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello | world\n", encoding="utf-8")
    with mock.patch.object(train_mod, "count_pretokens", side_effect=AssertionError("counted")):
        with pytest.raises(ValueError, match=r"^special token '\|' is one byte, b'\|', which ordinary text needs"):
            train_mod.train_bpe([corpus], 258, ["<|endoftext|>", "|"])
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"|"}
    with pytest.raises(ValueError, match=r"^special token '\|' is one byte, which ordinary text needs as its own"):
        Encoding.from_vocab_merges(vocab, [], ["|"])
    del vocab[256], vocab[5]
    with pytest.raises(ValueError, match=r"^vocab lacks 1 single-byte token \(e\.g\. b'\\x05'\); byte-level"):
        Encoding.from_vocab_merges(vocab, [], [])
    assert train_mod.is_single_byte("|") and not train_mod.is_single_byte("é") and not train_mod.is_single_byte("<|")
