"""Every one of the 1,114,112 code points (surrogates too) through each fast path, against its oracle.

Each sweep builds its texts and its oracle's answer once and holds every fast path that must give that answer to
it: in context, the stdlib-``re`` split (:mod:`tokenizer.fast.stdlib_patterns`) and the array split
(:mod:`tokenizer.fast.array_split`) against the `regex` reference; alone, a call of its own per character and the
batch path against tiktoken. (The everyday tier checks the same paths on samples; these sweeps are exhaustive.)
"""

from __future__ import annotations

import numpy as np
import pytest
import tiktoken

import tokenizer.fast.array_split as array_split
import tokenizer.fast.core as fast_core
from test_batch_bpe import fresh_encoding
from test_pretokenize import both_splits
from tokenizer import get_encoding
from tokenizer.fast.array_split import piece_starts
from tokenizer.patterns import GPT2_PATTERN, KNOWN_PATTERNS, R50K_PATTERN

PATTERN_IDS = ["gpt2", "r50k", "cl100k", "o200k", "llama3"]
# One text per code point with the neighbours that tell the classes apart most (letter or not, number, case,
# a contraction after it); all whitespace is in the BMP, where test_fast_split and test_array_split try more.
EVERY_CONTEXT = "a{}b1{}2{}Ab{}'s"
EVERY_CHARACTER = "".join(map(chr, range(0x110000)))
BLOCK = 1 << 16  # code points per text split at once


def starts_of(pieces: list[str]) -> np.ndarray:
    lengths = np.fromiter(map(len, pieces), np.int64, len(pieces))
    return np.cumsum(lengths) - lengths


def differing_characters(starts: np.ndarray, expected: np.ndarray, characters: str) -> list[str]:
    """The code points (as hex) of the first few copies of the context where two lists of piece starts part:
    each copy, with the "\\n\\n" after it, is as long as the context with one character in each "{}"."""
    period = len(EVERY_CONTEXT.replace("{}", "x")) + 2
    shared = min(len(starts), len(expected))
    apart = np.flatnonzero(starts[:shared] != expected[:shared])[:5]
    if len(apart):
        places = np.minimum(starts[apart], expected[apart])
    else:  # one list goes on where the other ends
        places = (starts if len(starts) > shared else expected)[shared : shared + 1]
    return [hex(ord(characters[place // period])) for place in places.tolist()]


def split_differences(pattern: str, characters: str) -> list[str]:
    """Where the stdlib split, and the array split, of every character of ``characters`` in context part from
    the reference: one line each that names the split and the first few such code points."""
    splits = both_splits(pattern)
    # "\n\n" between the copies: a split may join them across it, but every split alike
    text = "\n\n".join(EVERY_CONTEXT.replace("{}", c) for c in characters)
    reference = splits.split_reference(text)
    expected = starts_of(reference)
    found = []
    pieces = splits.split(text)
    if pieces != reference:
        found.append(f"the stdlib split at {differing_characters(starts_of(pieces), expected, characters)}")
    # gpt2's and r50k's patterns have two stdlib spellings but one array form (the same rules): r50k's tries it
    if pattern != GPT2_PATTERN:
        starts = piece_starts(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32), pattern)
        if not np.array_equal(starts, expected):
            found.append(f"the array split at {differing_characters(starts, expected, characters)}")
    return found


@pytest.mark.parametrize("pattern", tuple(KNOWN_PATTERNS), ids=PATTERN_IDS)
def test_every_code_point_in_context_splits_as_the_reference(pattern):
    for start in range(0, len(EVERY_CHARACTER), BLOCK):
        assert split_differences(pattern, EVERY_CHARACTER[start : start + BLOCK]) == []


def test_every_code_point_sweep_names_a_wrong_class(monkeypatch):
    # U+2028 (line separator) taken for "other" by the array split's table
    wrong = array_split.class_table().copy()
    wrong[0x2028] = 0
    monkeypatch.setattr(array_split, "class_table", lambda: wrong)
    assert split_differences(R50K_PATTERN, EVERY_CHARACTER[0x2000:0x2100]) == ["the array split at ['0x2028']"]


# r50k_base and p50k_base split as gpt2 does and hold its tokens under the same ids (p50k adds runs of 2 to 25
# spaces, which no single character is): a character alone is encoded alike by all three
@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_every_code_point_alone_equals_tiktoken(name):
    oracle = tiktoken.get_encoding(name)
    one_call_each = get_encoding(name)
    batches = fresh_encoding(name)
    for start in range(0, len(EVERY_CHARACTER), BLOCK):
        texts = list(EVERY_CHARACTER[start : start + BLOCK])
        expected = [oracle.encode_ordinary(t) for t in texts]  # (tiktoken's batch method starts threads: slower)
        mismatches = [hex(ord(t)) for t, ids in zip(texts, expected) if one_call_each.encode_ordinary(t) != ids]
        assert mismatches[:5] == [], "a call of its own"
        with pytest.MonkeyPatch.context() as patch:  # every new piece through the batch, however few or short
            patch.setattr(fast_core, "BATCH_MIN_CHARS", 1)
            patch.setattr(fast_core, "BATCH_MIN_BYTES", 1)
            got = batches.encode_ordinary_batch(texts)
        assert [hex(ord(t)) for t, a, b in zip(texts, got, expected) if a != b][:5] == [], "the batch"
        batches.core._cache.clear()
