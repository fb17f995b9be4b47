"""The trainer against merges worked out by hand: an oracle that is not the package's own reference trainer.

Every other trainer test compares the fast trainer with ``learn_merges_reference``; a change made to both (the
tie rule flipped, ties broken by token id, pairs compared as joined strings) would pass them. Here each small
corpus comes with its merges written down as data, step by step, with the count that decides each merge and
the pairs it ties with. The first is Stanford CS336's own example (assignment 1's handout, pre-tokens split at
whitespace); the others are built so that a wrong tie rule learns other merges.

``test_the_written_counts_are_the_corpus_counts`` checks the data itself (the counts and ties are right, the
winner of every tie is the lexicographically greater pair); the other tests check every trainer learns exactly
the written merges.
"""

from __future__ import annotations

from collections import Counter

import pytest
import regex

from tokenizer.pretokenize import GPT2_PATTERN
from tokenizer.training.fast_merges import learn_merges
from tokenizer.training.reference import learn_merges_reference
from tokenizer.training.train import train_bpe

EOT = "<|endoftext|>"
CS336_TEXT = "low low low low low lower lower widest widest widest newest newest newest newest newest newest"
WHITESPACE_SPLIT = r"\S+"  # pre-tokens as CS336's example takes them: the words, without their spaces

# name -> (text, pre-tokenization pattern, steps). A step is (merged pair, its count, the pairs with the same
# count it won against); after the last step no pair is left.
HAND_WORKED = {
    # low 5, lower 2, widest 3, newest 6. Before any merge: es 9, st 9, we 8, lo 7, ow 7, ne 6, ew 6, ...
    "cs336_handout": (CS336_TEXT, WHITESPACE_SPLIT, [
        (("s", "t"), 9, [("e", "s")]),
        (("e", "st"), 9, []),
        (("o", "w"), 7, [("l", "o")]),
        (("l", "ow"), 7, []),
        (("w", "est"), 6, [("n", "e"), ("e", "w")]),
        (("n", "e"), 6, [("e", "west")]),
        (("ne", "west"), 6, []),
        (("w", "i"), 3, [("i", "d"), ("d", "est")]),
        (("wi", "d"), 3, [("d", "est")]),
        (("wid", "est"), 3, []),
        (("low", "e"), 2, [("e", "r")]),
        (("lowe", "r"), 2, []),
    ]),
    # The same text cut by GPT-2's pattern: "low" once, then " low" 4, " lower" 2, " widest" 3, " newest" 6.
    # The space is a byte like any other (0x20, below every letter): at the end (e, r) now beats (" low", e).
    "cs336_text_gpt2_pattern": (CS336_TEXT, GPT2_PATTERN, [
        (("s", "t"), 9, [("e", "s")]),
        (("e", "st"), 9, []),
        (("o", "w"), 7, [("l", "o")]),
        (("l", "ow"), 7, []),
        (("w", "est"), 6, [(" ", "low"), (" ", "n"), ("n", "e"), ("e", "w")]),
        (("n", "e"), 6, [(" ", "low"), (" ", "n"), ("e", "west")]),
        (("ne", "west"), 6, [(" ", "low"), (" ", "ne")]),
        ((" ", "newest"), 6, [(" ", "low")]),
        ((" ", "low"), 6, []),
        (("w", "i"), 3, [(" ", "w"), ("i", "d"), ("d", "est")]),
        (("wi", "d"), 3, [(" ", "wi"), ("d", "est")]),
        (("wid", "est"), 3, [(" ", "wid")]),
        ((" ", "widest"), 3, []),
        (("e", "r"), 2, [(" low", "e")]),
        ((" low", "er"), 2, []),
    ]),
    # Ties are decided by the pairs' bytes, not by token ids: after (a, b), the pair (ab, x) has the greater
    # left id (256 against 98) but (b, y) the greater left bytes (b"b" > b"ab").
    "bytes_not_ids": ("ab ab ab abx abx by by", WHITESPACE_SPLIT, [
        (("a", "b"), 5, []),
        (("b", "y"), 2, [("ab", "x")]),
        (("ab", "x"), 2, []),
    ]),
    # Pairs are compared as (left, right), not as the joined bytes: (ab, c) beats (a, bd) because b"ab" > b"a",
    # though b"abc" < b"abd".
    "left_then_right_not_joined": ("abd abd abc abc bd bd bd ab", WHITESPACE_SPLIT, [
        (("b", "d"), 5, [("a", "b")]),
        (("a", "b"), 3, []),
        (("ab", "c"), 2, [("a", "bd")]),
        (("a", "bd"), 2, []),
    ]),
}


def as_bytes(pair: tuple[str, str]) -> tuple[bytes, bytes]:
    return pair[0].encode(), pair[1].encode()


def expected_merges(name: str) -> list[tuple[bytes, bytes]]:
    return [as_bytes(pair) for pair, _, _ in HAND_WORKED[name][2]]


def pretoken_counts(name: str) -> Counter:
    text, pattern, _ = HAND_WORKED[name]
    return Counter(regex.findall(pattern, text))


@pytest.mark.parametrize("name", HAND_WORKED)
def test_the_written_counts_are_the_corpus_counts(name):
    # Each pre-token spelled with the merges written before a step: the pair counts then must be the step's.
    words = {tuple(bytes([b]) for b in word.encode()): n for word, n in pretoken_counts(name).items()}
    for pair, count, ties in HAND_WORKED[name][2]:
        pairs: Counter = Counter()
        for word, n in words.items():
            for adjacent in zip(word, word[1:]):
                pairs[adjacent] += n
        top = max(pairs.values())
        assert (top, {p for p, c in pairs.items() if c == top}) == (count, {as_bytes(p) for p in [pair, *ties]})
        assert as_bytes(pair) == max(map(as_bytes, [pair, *ties]))  # CS336's rule: the greater pair wins a tie
        words = {spelled_with(word, as_bytes(pair)): n for word, n in words.items()}
    assert all(len(word) == 1 for word in words)  # nothing left to merge


def spelled_with(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    out: list[bytes] = []
    for token in word:  # left to right, without overlap: a token just made (left + right) is never the left
        if out and (out[-1], token) == pair:
            out[-1] += token
        else:
            out.append(token)
    return tuple(out)


def test_the_hand_worked_corpora_need_the_tie_rule():
    # Without ties the data above would not test the rule: most of the merges are decided by it.
    assert sum(bool(ties) for _, _, ties in HAND_WORKED["cs336_handout"][2]) == 7
    assert all(any(ties for _, _, ties in steps) for _, _, steps in HAND_WORKED.values())


@pytest.mark.parametrize("name", HAND_WORKED)
def test_the_reference_and_the_numpy_loop_learn_the_hand_worked_merges(name):
    counts = pretoken_counts(name)
    expected = expected_merges(name)
    assert learn_merges_reference(counts, 100) == expected
    assert learn_merges(counts, 100, compiled=False) == expected
    assert learn_merges_reference(counts, 4) == expected[:4]


@pytest.mark.parametrize("name", HAND_WORKED)
def test_train_bpe_learns_the_hand_worked_merges_from_a_file(name, tmp_path):
    text, pattern, _ = HAND_WORKED[name]
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    expected = expected_merges(name)
    vocab, merges = train_bpe(path, 1000, [EOT], pattern=pattern, num_workers=1, progress=False)
    assert merges == expected  # ran out of pairs: fewer merges than asked
    assert vocab[256 + len(expected)] == EOT.encode() and len(vocab) == 256 + len(expected) + 1


def test_the_compiled_loop_learns_the_hand_worked_merges():
    # exhaustive tier (tests/conftest.py): compiling the loop takes 20-40 s on a fresh machine
    for name in HAND_WORKED:
        assert learn_merges(pretoken_counts(name), 100, compiled=True) == expected_merges(name), name
