"""The characters-first rule (tokenizer/fast/characters_first.py): BPE started from characters merged alone is
BPE of the bytes, held to bpe.merge_reference on real vocabularies, on random ones built so that merges cross
characters' edges at every rank, and on the corpora; its pair table against a plain scan of the vocabulary."""

from __future__ import annotations

import functools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.bpe as bpe
from conftest import CORPUS_FILES, FUZZ_EXAMPLES, corpus_text
from tokenizer import get_encoding
from tokenizer.fast.characters_first import CharactersFirst
from tokenizer.fast.uncrossable import NO_PAIR, lowest_pair_ranks, uncrossable_pairs

NAMES = ["gpt2", "cl100k_base", "o200k_base"]


@functools.lru_cache(maxsize=None)
def rule_for(name: str) -> CharactersFirst:
    return CharactersFirst(get_encoding(name).merge_ranks)


def test_docstring_example_and_the_rule_by_hand():
    import doctest

    import tokenizer.fast.characters_first as module

    assert doctest.testmod(module).failed == 0
    bytes_ = {bytes([b]): b for b in range(256)}
    zhong = "中".encode()  # e4 b8 ad
    # "中" is made by ranks 256 and 257; nothing crosses its edges: it starts whole
    ranks = bytes_ | {zhong[:2]: 256, zhong: 257}
    assert CharactersFirst(ranks).start("a中") == [b"a", zhong]
    # a token "a" + e4 (rank 300, above 257) ends with its beginning: still safe
    assert CharactersFirst(ranks | {b"a" + zhong[:1]: 300}).start("a中") == [b"a", zhong]
    # ... but at rank 100, below the merges that make "中", it could come first: "中" starts as bytes, and BPE
    # joins "a" + e4 first, as the reference does
    low = ranks | {b"a" + zhong[:1]: 100}
    assert CharactersFirst(low).start("a中") == [b"a", *[bytes([b]) for b in zhong]]
    expected = [b"a\xe4", b"\xb8", b"\xad"]
    assert CharactersFirst(low).merge("a中") == bpe.merge_reference("a中".encode(), low) == expected
    # a token holding all of "中" and the byte before it, ranked below the merges that make "中": "中" finished
    # first would let it join that byte before the byte's own merge (c3 a9: "é") comes; so it starts as bytes
    feng = "é中".encode()  # c3 a9 e4 b8 ad
    wide = bytes_ | {zhong[:2]: 256, feng[1:]: 257, feng[:2]: 258, zhong: 259}
    assert CharactersFirst(wide).start("é中") == [bytes([b]) for b in feng]
    assert CharactersFirst(wide).merge("é中") == bpe.merge_reference(feng, wide) == [feng[:2], zhong]
    # the same from the right: ad + "b" at rank 100
    right = ranks | {zhong[2:] + b"b": 100}
    assert CharactersFirst(right).merge("中b") == bpe.merge_reference("中b".encode(), right)
    assert CharactersFirst(right).start("中b") == [*[bytes([b]) for b in zhong], b"b"]


def plain_pair_ranks(ranks: dict[bytes, int]) -> list[int]:
    """lowest_pair_ranks by a plain scan of every token."""
    lowest = [NO_PAIR] * 65536
    for token, rank in ranks.items():
        for a, b in zip(token, token[1:]):
            lowest[a << 8 | b] = min(lowest[a << 8 | b], rank)
    return lowest


@settings(max_examples=max(FUZZ_EXAMPLES // 2, 50), deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=6), max_size=40), st.randoms(use_true_random=False))
def test_the_pair_table_equals_a_plain_scan(tokens, rnd):
    # random byte strings (partial characters, lone continuation bytes, bytes that are no UTF-8) at random ranks
    ranks = {bytes([b]): b for b in range(256)}
    for token in tokens:
        ranks.setdefault(token, rnd.randrange(256, 400))
    lowest = plain_pair_ranks(ranks)
    assert lowest_pair_ranks(ranks) == lowest
    assert uncrossable_pairs(ranks) == bytearray(r == NO_PAIR for r in lowest)


def test_the_pair_table_of_a_real_vocabulary_equals_a_plain_scan():
    assert rule_for("cl100k_base").pair_guard == plain_pair_ranks(get_encoding("cl100k_base").merge_ranks)


# Characters of 1 to 4 bytes, some sharing their first bytes (so merges inside them and across their edges
# overlap), for random vocabularies made of the bytes of random texts of them.
ALPHABET = "a é中丰丹ЖЗ😀😁"
texts = st.text(alphabet=ALPHABET, max_size=24)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(texts, st.lists(texts, min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_equals_the_reference_on_random_vocabularies_that_cross_characters(text, sources, rnd):
    # every token a random slice of the sources' bytes: inside characters, across their edges, ending or
    # beginning inside one, at random ranks (ties included); merge_reference is the oracle
    ranks = {bytes([b]): b for b in range(256)}
    for source in sources:
        data = source.encode()
        for _ in range(12):
            if len(data) > 1:
                start = rnd.randrange(len(data) - 1)
                end = rnd.randrange(start + 2, min(len(data), start + 8) + 1)
                ranks.setdefault(data[start:end], rnd.randrange(256, 300))
    rule = CharactersFirst(ranks)
    assert b"".join(rule.start(text)) == text.encode()
    assert rule.merge(text) == bpe.merge_reference(text.encode(), ranks)


@settings(max_examples=max(FUZZ_EXAMPLES // 4, 50), deadline=None)
@given(st.text(max_size=60).filter(lambda t: not any(0xD800 <= ord(c) < 0xE000 for c in t)), st.sampled_from(NAMES))
def test_equals_the_reference_on_openai_vocabularies(text, name):
    assert rule_for(name).merge(text) == bpe.merge_reference(text.encode(), get_encoding(name).merge_ranks)


def test_equals_bpe_on_the_corpora_pieces():
    # the distinct non-ASCII pieces of every corpus (a sample of each), under the three vocabularies
    rng = random.Random(5)
    for name in NAMES:
        enc = get_encoding(name)
        rule = rule_for(name)
        checked = 0
        for file in CORPUS_FILES:
            pieces = sorted({p for p in enc.core._pretokenizer.split(corpus_text(file, 200_000)) if not p.isascii()})
            for piece in rng.sample(pieces, min(len(pieces), 150)):
                assert rule.merge(piece) == bpe.merge(piece.encode(), enc.merge_ranks), (name, piece)
                checked += 1
        assert checked > 300


def test_the_cache_of_characters_stays_bounded(monkeypatch):
    import tokenizer.fast.characters_first as module

    monkeypatch.setattr(module, "CHARACTER_CACHE_LIMIT", 8)
    rule = CharactersFirst(get_encoding("o200k_base").merge_ranks)
    text = "".join(map(chr, range(0x4E00, 0x4E40)))  # 64 new characters in one piece
    assert rule.merge(text) == bpe.merge_reference(text.encode(), get_encoding("o200k_base").merge_ranks)
    assert 0 < len(rule._characters) <= 8
