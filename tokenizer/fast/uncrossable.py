"""Byte pairs that no token holds: where a long piece can be cut into short parts BPE treats alone.

If no mergeable token contains the bytes ``a, b`` next to each other, no merge can ever join across that
pair (every merge makes a token, which would contain it). So BPE of a piece is BPE of the two sides,
concatenated. Byte-level vocabularies with few tokens for a script (GPT-2 and Chinese) have many such pairs:
a long Chinese sentence, one unique piece, falls apart into short parts that repeat and can be cached.

The same scan gives, for every byte pair, the lowest rank of a token that holds it (:func:`lowest_pair_ranks`):
no merge below that rank can join across the pair, which :mod:`tokenizer.fast.characters_first` relies on.

This is a speed rule, not a BPE rule: :func:`tokenizer.bpe.merge_reference` on the whole piece is the oracle
the tests hold it to.
"""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import lshift, or_
from typing import Mapping


def uncrossable_pairs(merge_ranks: Mapping[bytes, int]) -> bytearray:
    """A 65536-entry table: ``table[a << 8 | b]`` is 1 when no mergeable token contains the bytes ``a, b``
    next to each other.

    Where a piece has such a pair, no merge can ever join across it (every merge makes a token, and the token
    would contain that pair), so BPE of the piece is BPE of the two sides, concatenated: see
    :func:`split_uncrossable`. Byte-level vocabularies with few tokens for a script (GPT-2 and Chinese) have many
    such pairs, which turns one long, unique piece into short, cacheable ones.
    """
    return pair_tables(merge_ranks)[1]


# The rank lowest_pair_ranks gives a byte pair that no token contains: above every real rank.
NO_PAIR = 1 << 62


def lowest_pair_ranks(merge_ranks: Mapping[bytes, int]) -> list[int]:
    """A 65536-entry table: ``table[a << 8 | b]`` is the lowest rank of any token that contains the bytes
    ``a, b`` next to each other, ``NO_PAIR`` where none does.

    A merge that joins across a place where bytes ``a, b`` meet makes a token containing them, so no merge of a
    lower rank than this can ever join there (:mod:`tokenizer.fast.characters_first` relies on it).
    """
    return pair_tables(merge_ranks)[0]


def pair_tables(merge_ranks: Mapping[bytes, int]) -> tuple[list[int], bytearray]:
    """:func:`lowest_pair_ranks` and :func:`uncrossable_pairs` (its ``NO_PAIR`` entries) from one scan."""
    import numpy as np  # only here: a scan of a 200k vocabulary in pure Python takes ~0.4 s

    # every token's bytes end to end; a pair starting at a token's last byte spans two tokens (a token of one
    # byte has no pair inside)
    blob = np.frombuffer(b"".join(merge_ranks), dtype=np.uint8)
    lengths = np.fromiter(map(len, merge_ranks), dtype=np.int64, count=len(merge_ranks))
    ranks = np.fromiter(merge_ranks.values(), dtype=np.int64, count=len(merge_ranks))
    pairs = (blob[:-1].astype(np.int32) << 8) | blob[1:]
    inside = np.ones(len(pairs), dtype=bool)
    inside[np.cumsum(lengths)[:-1] - 1] = False
    table = np.full(65536, NO_PAIR, dtype=np.int64)
    np.minimum.at(table, pairs[inside], np.repeat(ranks, lengths)[:-1][inside])
    return table.tolist(), bytearray((table == NO_PAIR).astype(np.uint8).tobytes())


def split_uncrossable(piece: bytes, table: bytearray) -> list[bytes]:
    """Cut ``piece`` between every two bytes that no token contains together (``table`` from
    :func:`uncrossable_pairs`): ``merge(piece)`` is the concatenation of ``merge`` of each part."""
    # flags[i] = 1 when piece[i], piece[i+1] never meet in a token; the maps run in C
    flags = bytes(map(table.__getitem__, map(or_, map(lshift, piece, repeat(8)), piece[1:])))
    if 1 not in flags:
        return [piece]
    cuts = list(compress(count(1), flags))
    return list(map(piece.__getitem__, map(slice, [0, *cuts], [*cuts, len(piece)])))
