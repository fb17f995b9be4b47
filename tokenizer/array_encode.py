"""A long text's ids by array operations: from where its pieces start to every piece's token ids, at once.

The readable encoder makes each pre-token a string, looks it up, and joins the ids of all pieces in Python;
for a long text met for the first time, those per-piece steps are the cost. Here the text stays in arrays:

1. its UTF-8 bytes, and each piece as a ``(start, length)`` in them (the pieces come from
   :mod:`tokenizer.array_split`);
2. every piece that is itself a token is that token (tiktoken's rule): found for all pieces at once in a
   :class:`tokenizer.piece_arrays.PieceTable` of the vocabulary;
3. the other pieces are grouped into distinct ones (:func:`tokenizer.piece_arrays.distinct_pieces`), and each
   distinct piece is BPE-encoded once, all together (:func:`tokenizer.batch_bpe.encode_blob`);
4. the ids are laid out in order: one slot for a token piece, as many as its BPE gives for another.

    >>> from tokenizer import get_encoding
    >>> from tokenizer.batch_bpe import build_pair_table
    >>> enc = get_encoding("gpt2")
    >>> tables = TokenTables.of(enc.token_ids, build_pair_table(enc.merge_ranks, enc.token_ids))
    >>> encode_split_text("Hello qqqq world", np.array([0, 5, 10]), tables).tolist()   # "Hello", " qqqq", " world"
    [15496, 10662, 38227, 80, 995]

Every step is exact (the look-ups compare bytes; batch BPE is tested against ``bpe.merge``), so the ids are
those of the per-piece path, which stays the reference. What this module does not do: find the pieces,
special tokens, caching between calls, or short texts (their fixed cost in NumPy calls is not repaid: the
caller keeps the per-piece path for them).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

import numpy as np

from .batch_bpe import PairTable, encode_blob
from .piece_arrays import PieceTable, distinct_pieces, utf8_blob


class TokenTables(NamedTuple):
    """What encoding needs of a vocabulary: its tokens by bytes, and batch BPE's pair table."""

    tokens: PieceTable
    pairs: PairTable

    @classmethod
    def of(cls, token_ids: Mapping[bytes, int], pairs: PairTable) -> TokenTables:
        return cls(PieceTable(token_ids), pairs)


def _positions_within(sizes: np.ndarray) -> np.ndarray:
    """0, 1, ..., sizes[0] - 1, 0, 1, ..., sizes[1] - 1, ...: each item's position within its run."""
    return np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def encode_split_text(text: str, starts: np.ndarray, tables: TokenTables) -> np.ndarray:
    """The token ids (int64) of ``text``, whose pre-tokens start at the code point positions ``starts``
    (ascending, from 0; the last piece runs to the end). UnicodeEncodeError on a lone surrogate."""
    blob, offsets = utf8_blob(text)
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    byte_starts = offsets[starts]
    byte_lengths = np.diff(byte_starts, append=offsets[-1])
    ids = tables.tokens.find(blob, byte_starts, byte_lengths)
    others = np.flatnonzero(ids < 0)
    if not len(others):
        return ids
    # The pieces that are not tokens: each distinct one BPE-encoded once.
    representatives, group = distinct_pieces(blob, byte_starts[others], byte_lengths[others])
    distinct_starts = byte_starts[others[representatives]]
    distinct_lengths = byte_lengths[others[representatives]]
    laid_end_to_end = blob[np.repeat(distinct_starts, distinct_lengths) + _positions_within(distinct_lengths)]
    bpe_ids, bpe_sizes = encode_blob(laid_end_to_end, distinct_lengths, tables.pairs)
    # Out: a token piece takes one slot, another piece as many as its BPE ids.
    sizes = np.ones(len(ids), dtype=np.int64)
    sizes[others] = other_sizes = bpe_sizes[group]
    out_starts = np.cumsum(sizes) - sizes
    out = np.empty(int(out_starts[-1] + sizes[-1]), dtype=np.int64)
    tokens = ids >= 0
    out[out_starts[tokens]] = ids[tokens]
    within = _positions_within(other_sizes)
    bpe_starts = np.cumsum(bpe_sizes) - bpe_sizes
    out[np.repeat(out_starts[others], other_sizes) + within] = bpe_ids[np.repeat(bpe_starts[group], other_sizes) + within]
    return out
