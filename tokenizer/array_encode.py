"""A long text's ids by array operations: from where its pieces start to every piece's token ids, at once.

The readable encoder makes each pre-token a string, looks it up, and joins the ids of all pieces in Python;
for a long text met for the first time, those per-piece steps are the cost. Here the text stays in arrays:

1. its UTF-8 bytes, and each piece as a ``(start, length)`` in them (the pieces come from
   :mod:`tokenizer.array_split`, their byte offsets from the code points: :func:`tokenizer.piece_arrays.byte_offsets`);
2. the pieces are grouped into distinct ones (:func:`tokenizer.piece_arrays.distinct_pieces`): text repeats
   its pieces, so what follows is done once per distinct piece;
3. a piece that is itself a token is that token (tiktoken's rule): found for all at once in a
   :class:`tokenizer.piece_arrays.PieceTable` of the vocabulary;
4. the others are cut into segments where no merge can cross, and each distinct segment is BPE-encoded once,
   all together (:func:`tokenizer.batch_bpe.encode_blob`);
5. the ids are laid out in text order: each piece takes its distinct piece's ids.

    >>> from tokenizer import get_encoding
    >>> from tokenizer.batch_bpe import build_pair_table
    >>> enc = get_encoding("gpt2")
    >>> tables = TokenTables(PieceTable(enc.token_ids), build_pair_table(enc.merge_ranks, enc.token_ids))
    >>> text = "Hello qqqq world"
    >>> encode_split_text(text, code_points(text), np.array([0, 5, 10]), tables).tolist()   # "Hello", " qqqq", " world"
    [15496, 10662, 38227, 80, 995]

Every step is exact (the look-ups compare bytes; batch BPE is tested against ``bpe.merge``), so the ids are
those of the per-piece path, which stays the reference. What this module does not do: find the pieces,
special tokens, caching between calls, or short texts (their fixed cost in NumPy calls is not repaid: the
caller keeps the per-piece path for them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .batch_bpe import PairTable, encode_blob
from .piece_arrays import PieceTable, byte_offsets, code_points, distinct_pieces, positions_within, utf8_blob


class TokenTables(NamedTuple):
    """What encoding needs of a vocabulary: its tokens by bytes (None: no whole-piece rule, every piece goes
    through BPE, as in CS336's tokenizer), and batch BPE's pair table."""

    tokens: PieceTable | None
    pairs: PairTable


def encode_split_text(text: str, points: np.ndarray, starts: np.ndarray, tables: TokenTables) -> np.ndarray:
    """The token ids (int64) of ``text``, whose code points are ``points`` and whose pre-tokens start at the
    code point positions ``starts`` (ascending, from 0; the last piece runs to the end)."""
    if not len(starts):
        return np.zeros(0, dtype=np.int64)
    blob = utf8_blob(text)
    byte_starts = byte_offsets(points, np.append(starts, len(points)))
    byte_lengths = np.diff(byte_starts)
    byte_starts = byte_starts[:-1]
    # Text repeats its pieces: the distinct ones are found first, and only they are looked up and encoded.
    representatives, group = distinct_pieces(blob, byte_starts, byte_lengths)
    distinct_starts, distinct_lengths = byte_starts[representatives], byte_lengths[representatives]
    if tables.tokens is None:
        ids = np.full(len(representatives), -1, dtype=np.int64)
    else:
        ids = tables.tokens.find(blob, distinct_starts, distinct_lengths)
    others = np.flatnonzero(ids < 0)
    if not len(others):
        return ids[group]
    # The ids of every distinct piece, one after another: one for a token, its BPE ids for another.
    bpe_ids, bpe_sizes = _encode_by_segments(blob, distinct_starts[others], distinct_lengths[others], tables.pairs)
    sizes = np.ones(len(ids), dtype=np.int64)
    sizes[others] = bpe_sizes
    firsts = np.cumsum(sizes) - sizes
    distinct_ids = np.empty(int(firsts[-1] + sizes[-1]), dtype=np.int64)
    tokens = np.flatnonzero(ids >= 0)
    distinct_ids[firsts[tokens]] = ids[tokens]
    distinct_ids[np.repeat(firsts[others], bpe_sizes) + positions_within(bpe_sizes)] = bpe_ids
    # Then every piece in text order takes its distinct piece's ids.
    piece_sizes = sizes[group]
    return distinct_ids[np.repeat(firsts[group], piece_sizes) + positions_within(piece_sizes)]


def _encode_by_segments(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                        pairs: PairTable) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, sizes)`` of BPE on the pieces ``(starts, lengths)`` of ``blob``, as :func:`encode_blob` gives
    them. The pieces are cut first into segments where no token holds the bytes on both sides (no merge
    crosses there: a piece's ids are its segments' ids): a long piece of a script the vocabulary knows little
    of is new, but its segments repeat. Each distinct segment is encoded once."""
    cut_after, cut_piece = _uncrossable_cuts(blob, starts, lengths, pairs)
    # Segments in piece order: a piece's first starts where it does, the others at its cuts (which come in
    # piece order too); each ends where the next begins, the last where its piece ends.
    per_piece = 1 + np.bincount(cut_piece, minlength=len(starts))
    first = np.cumsum(per_piece) - per_piece
    segment_starts = np.empty(int(per_piece.sum()), dtype=np.int64)
    is_first = np.zeros(len(segment_starts), dtype=bool)
    is_first[first] = True
    segment_starts[first] = starts
    segment_starts[~is_first] = cut_after
    segment_ends = np.empty_like(segment_starts)
    segment_ends[:-1] = segment_starts[1:]
    segment_ends[first[1:] - 1] = (starts + lengths)[:-1]
    segment_ends[-1] = starts[-1] + lengths[-1]
    segment_lengths = segment_ends - segment_starts
    # A segment of one byte is that byte's token; the longer ones go through BPE, each distinct one once. The
    # pieces are distinct already, so a piece without cuts is a distinct segment: only the segments of cut
    # pieces are grouped (one that equals an uncut piece is encoded twice, which costs little and is exact).
    single = np.flatnonzero(segment_lengths == 1)
    longer = np.flatnonzero(segment_lengths > 1)
    of_cut_piece = np.repeat(per_piece > 1, per_piece)[longer]
    alone, to_group = longer[~of_cut_piece], longer[of_cut_piece]
    representatives, grouped = distinct_pieces(blob, segment_starts[to_group], segment_lengths[to_group])
    group = np.empty(len(longer), dtype=np.int64)  # each longer segment's distinct segment
    group[~of_cut_piece] = np.arange(len(alone))
    group[of_cut_piece] = len(alone) + grouped
    distinct_segments = np.concatenate([alone, to_group[representatives]])
    distinct_starts, distinct_lengths = segment_starts[distinct_segments], segment_lengths[distinct_segments]
    laid_end_to_end = blob[np.repeat(distinct_starts, distinct_lengths) + positions_within(distinct_lengths)]
    bpe_ids, bpe_sizes = encode_blob(laid_end_to_end, distinct_lengths, pairs)
    bpe_firsts = np.cumsum(bpe_sizes) - bpe_sizes
    segment_sizes = np.ones(len(segment_starts), dtype=np.int64)
    segment_sizes[longer] = longer_sizes = bpe_sizes[group]
    firsts = np.cumsum(segment_sizes) - segment_sizes
    ids = np.empty(int(firsts[-1] + segment_sizes[-1]), dtype=np.int64)
    ids[firsts[single]] = pairs.byte_ids[blob[segment_starts[single]]]
    within = positions_within(longer_sizes)
    ids[np.repeat(firsts[longer], longer_sizes) + within] = bpe_ids[np.repeat(bpe_firsts[group], longer_sizes) + within]
    return ids, np.add.reduceat(segment_sizes, first)


def _uncrossable_cuts(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                      pairs: PairTable) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, pieces)``: the byte positions inside the pieces (``starts``, ``lengths``) where no token
    holds the bytes on both sides (batch BPE's ``boundary_rank`` says so), in piece order and ascending within
    a piece, and the index of the piece each is in."""
    inner = lengths - 1  # the boundaries inside each piece, after each of its bytes but the last
    after = np.repeat(starts, inner) + positions_within(inner)  # the byte before each boundary
    byte_pairs = (blob[after].astype(np.int32) << 8) | blob[after + 1]
    cut = np.flatnonzero(pairs.boundary_rank[byte_pairs] == pairs.no_merge)
    return after[cut] + 1, np.repeat(np.arange(len(starts)), inner)[cut]
