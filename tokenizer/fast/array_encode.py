"""A long text's ids by array operations: from where its pieces start to every piece's token ids, at once.

The readable encoder makes each pre-token a string, looks it up, and joins the ids of all pieces in Python;
for a long text met for the first time, those per-piece steps are the cost. Here the text stays in arrays:

1. its UTF-8 bytes, and each piece as a ``(start, length)`` in them (the pieces come from
   :mod:`tokenizer.fast.array_split`, their byte offsets from the code points: :func:`tokenizer.fast.piece_arrays.byte_offsets`);
2. the pieces are grouped into distinct ones (:func:`tokenizer.fast.piece_arrays.distinct_pieces`): text repeats
   its pieces, so what follows is done once per distinct piece;
3. a piece that is itself a token is that token (tiktoken's rule): found for all at once in a
   :class:`tokenizer.fast.piece_arrays.PieceTable` of the vocabulary;
4. the others are cut into segments where no merge can cross, and each distinct segment is BPE-encoded once,
   all together (:func:`tokenizer.fast.batch_bpe.encode_blob`, or the compiled kernel where the process has it:
   :attr:`TokenTables.merge`); a segment of one byte is that byte's token;
5. the ids are laid out in text order: each piece takes its distinct piece's ids.

Text a vocabulary hardly knows is the worst case: random code points are many distinct pieces, each mostly
one-byte segments, so every step there is per byte. Two things keep it a handful of passes: when every
piece is distinct, the pieces are taken in text order as they are (no gather at the end), and the one-byte
segments are never listed: each byte takes its own token first, and only the longer segments are found (as
runs of crossable byte pairs) and written over them; a segment of two or three bytes is joined by looking
its pairs up, without BPE rounds.

    >>> from tokenizer import get_encoding
    >>> from tokenizer.fast.batch_bpe import build_pair_table
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

from typing import Callable, NamedTuple

import numpy as np

from .batch_bpe import KernelSoon, PairTable, char_windows_cross, encode_blob, lookup_pairs
from .piece_arrays import (PADDING, KeyedPieces, PieceTable, byte_offsets, code_points, distinct_pieces,
                           key_pieces, utf8_blob)


class TokenTables(NamedTuple):
    """What encoding needs of a vocabulary: its tokens by bytes (None: no whole-piece rule, every piece goes
    through BPE, as in CS336's tokenizer), batch BPE's pair table, and what merges the segments that need BPE:
    ``merge(blob, lengths) -> (ids, sizes)`` as :func:`tokenizer.fast.batch_bpe.encode_blob` gives them (None:
    that function; the compiled kernel's ``CompiledBPE.encode_blob`` where the process has it)."""

    tokens: PieceTable | None
    pairs: PairTable
    merge: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None


def encode_split_text(text: str, points: np.ndarray, starts: np.ndarray, tables: TokenTables) -> np.ndarray:
    """The token ids (int32) of ``text``, whose code points are ``points`` and whose pre-tokens start at the
    code point positions ``starts`` (ascending, from 0; the last piece runs to the end)."""
    return encode_split_pieces(text, points, starts, tables)[0]


def encode_split_pieces(text: str, points: np.ndarray, starts: np.ndarray, tables: TokenTables,
                        kernel_soon: KernelSoon | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, sizes)``: :func:`encode_split_text`'s ids, and how many of them each piece has (so that a caller
    that laid several texts end to end finds where each one's ids begin). Without ``tables.merge``, batch BPE
    merges, given ``kernel_soon`` (:func:`tokenizer.fast.batch_bpe.encode_blob`'s)."""
    if not len(starts):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    blob = utf8_blob(text)
    byte_starts = byte_offsets(points, np.append(starts, len(points)))
    byte_lengths = np.diff(byte_starts)
    byte_starts = byte_starts[:-1]
    if len(starts) == 1:  # one piece (a million spaces, say): nothing to group, and not worth hashing
        return _encode_pieces(blob, byte_starts, byte_lengths, tables, kernel_soon=kernel_soon)
    # Text repeats its pieces: the distinct ones are found first, and only they are looked up and encoded.
    # (Each piece is hashed once: the keys that group them also look them up.)
    keyed = key_pieces(blob, byte_starts, byte_lengths)
    representatives, group = distinct_pieces(blob, byte_starts, byte_lengths, keyed)
    if len(representatives) * 2 > len(group):
        # Most pieces are met once (text a vocabulary hardly knows, random code points say): the pieces
        # themselves, in text order, are then hardly more work, and their ids are the text's as they come.
        return _encode_pieces(blob, byte_starts, byte_lengths, tables, keyed, kernel_soon)
    ids, sizes = _encode_pieces(blob, byte_starts[representatives], byte_lengths[representatives], tables,
                                keyed.take(representatives), kernel_soon)
    # Every piece in text order takes its distinct piece's ids.
    piece_sizes = sizes[group]
    return ids[_runs((np.cumsum(sizes) - sizes)[group], piece_sizes)], piece_sizes


def _encode_pieces(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray, tables: TokenTables,
                   keyed: KeyedPieces | None = None,
                   kernel_soon: KernelSoon | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, sizes)``: the ids of the pieces ``(starts, lengths)`` of ``blob`` (``keyed``: their keys, if
    made), one piece after another, and how many each has. A piece that is a token is that token; the others
    are BPE-encoded."""
    whole = None if tables.tokens is None else tables.tokens.find(blob, starts, lengths, keyed)
    return _encode_by_segments(blob, starts, lengths, tables.pairs, whole, tables.merge, kernel_soon)


def _runs(firsts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``firsts[0], firsts[0] + 1, ...`` (``sizes[0]`` of them), then the same for ``firsts[1]``, and so on.

    >>> _runs(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    # each position is (its run's first - where the run begins in the result) + where it is in the result:
    # one repeat, one arange
    run_begins = np.cumsum(sizes) - sizes
    return np.repeat(firsts - run_begins, sizes) + np.arange(int(sizes.sum()))


def _encode_by_segments(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray, pairs: PairTable,
                        whole: np.ndarray | None, merge=None,
                        kernel_soon: KernelSoon | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, sizes)`` of the pieces ``(starts, lengths)`` of ``blob``: the token ``whole[i]`` for a piece
    whose ``whole[i] >= 0``, BPE for the others (by ``merge``, as :func:`encode_blob` gives it, which is the
    default). The pieces are cut first into segments where no token holds the bytes on both sides (no merge
    crosses there: a piece's ids are its segments' ids): a long piece of a script the vocabulary knows little of
    is new, but its segments repeat.
    Each distinct segment is encoded once. A piece that is a token is one segment, whose id is known.

    A segment of one byte is that byte's token, and text the vocabulary hardly knows (random code points, a
    million spaces for GPT-2) is mostly such segments: so every byte first takes its own token, in passes over
    the bytes that make nothing per segment, and only the longer segments are listed, encoded and written over
    their bytes' tokens (their ids where their bytes began, the bytes left over dropped)."""
    total = int(lengths.sum())
    piece_firsts = np.cumsum(lengths) - lengths  # where each piece begins, the pieces laid end to end
    laid = _laid_end_to_end(blob, starts, lengths)
    # joined[i]: bytes i and i + 1 are in one segment (one piece, and some token holds both)
    crossable = pairs.boundary_rank != pairs.no_merge
    joined = crossable[(laid[: total - 1].astype(np.uint16) << 8) | laid[1:total]]
    joined[piece_firsts[1:] - 1] = False
    ids = pairs.byte_ids[laid[:total]]
    keep = None  # which of the bytes' places keep an id (None: all)
    sizes = lengths
    tokens = np.zeros(0, dtype=np.int64) if whole is None else np.flatnonzero(whole >= 0)
    if len(tokens):
        # a token's id takes its first byte's place; no segment runs inside it, and its other places are dropped
        in_token = np.repeat(whole >= 0, lengths)
        joined &= ~in_token[:-1]
        keep = ~in_token
        keep[piece_firsts[tokens]] = True
        ids[piece_firsts[tokens]] = whole[tokens]
        sizes = np.where(whole >= 0, 1, lengths)
    # Finer cuts where two characters meet, one of them of several bytes, and no token's window spans them
    # (batch_bpe.char_windows_cross): a long piece of Japanese, say, is then cut between most of its characters.
    before, after = laid[: total - 1], laid[1:total]
    meets = np.flatnonzero(joined & ((before >= 0x80) & ((after < 0x80) | (after >= 0xC0)) | (after >= 0xC0)))
    if len(meets):
        joined[meets[~char_windows_cross(pairs, laid, meets)]] = False
    # The longer segments are the runs of joined boundaries: where the flag flips, a run begins, then ends.
    flags = np.zeros(total + 1, dtype=bool)
    flags[1:total] = joined
    flips = np.flatnonzero(flags[1:] != flags[:-1])
    if not len(flips):
        return (ids if keep is None else ids[keep]), sizes
    segment_starts, segment_lengths = flips[0::2], flips[1::2] + 1 - flips[0::2]
    if keep is None:
        keep = np.ones(total, dtype=bool)
    dropped_per_piece = np.zeros(len(lengths), dtype=np.int64)
    # Two or three bytes (most segments, in text a vocabulary hardly knows) need no BPE rounds: see _join_short.
    short = segment_lengths <= 3
    dropped_at = _join_short(laid, segment_starts[short], segment_lengths[short], pairs, ids)
    keep[dropped_at] = False
    dropped_per_piece += np.bincount(_piece_of(piece_firsts, dropped_at), minlength=len(lengths))
    longer = np.flatnonzero(~short)
    if len(longer):
        # The others through BPE, each distinct one once; each one's ids go where its bytes begin, and its other
        # bytes are dropped.
        segment_starts, segment_lengths = segment_starts[longer], segment_lengths[longer]
        # The pieces are distinct (or mostly, in text order), so a segment that is a whole piece is taken as
        # distinct: only the segments of cut pieces are grouped (one met twice is encoded twice, which costs
        # little and is exact).
        whole_piece = segment_lengths == lengths[_piece_of(piece_firsts, segment_starts)]
        alone, to_group = np.flatnonzero(whole_piece), np.flatnonzero(~whole_piece)
        representatives, grouped = distinct_pieces(laid, segment_starts[to_group], segment_lengths[to_group])
        group = np.empty(len(segment_starts), dtype=np.int64)  # each segment's distinct segment
        group[alone] = np.arange(len(alone))
        group[to_group] = len(alone) + grouped
        distinct = np.concatenate([alone, to_group[representatives]])
        distinct_starts, distinct_lengths = segment_starts[distinct], segment_lengths[distinct]
        distinct_laid = _laid_end_to_end(laid, distinct_starts, distinct_lengths)[: int(distinct_lengths.sum())]
        if merge is None:
            bpe_ids, bpe_sizes = encode_blob(distinct_laid, distinct_lengths, pairs, kernel_soon)
        else:
            bpe_ids, bpe_sizes = merge(distinct_laid, distinct_lengths)
        segment_sizes = bpe_sizes[group]
        bpe_firsts = np.cumsum(bpe_sizes) - bpe_sizes
        ids[_runs(segment_starts, segment_sizes)] = bpe_ids[_runs(bpe_firsts[group], segment_sizes)]
        dropped = segment_lengths - segment_sizes
        keep[_runs(segment_starts + segment_sizes, dropped)] = False
        dropped_per_piece += np.bincount(_piece_of(piece_firsts, segment_starts), weights=dropped,
                                         minlength=len(lengths)).astype(np.int64)
    return ids[keep], sizes - dropped_per_piece


def _join_short(laid: np.ndarray, starts: np.ndarray, lengths: np.ndarray, pairs: PairTable,
                ids: np.ndarray) -> np.ndarray:
    """BPE of the segments of two or three bytes at ``starts`` (``lengths``) of ``laid``, whose bytes' places in
    ``ids`` hold their bytes' ids: their ids are written from their first place on; returns the places left
    over (to drop).

    Two bytes are one token if the pair is one (the byte-pair table says), else two. Of three, the pair of
    lower rank joins first (the left one if they tie); then the two parts join if their bytes, all three, make
    a token (the pair table says), else stay two."""
    two, three = starts[lengths == 2], starts[lengths == 3]
    pair = (laid[two].astype(np.int32) << 8) | laid[two + 1]
    joined = two[pairs.byte_pair_ranks[pair] != pairs.no_merge]
    ids[joined] = pairs.byte_pair_merged[(laid[joined].astype(np.int32) << 8) | laid[joined + 1]]
    left_pair = (laid[three].astype(np.int32) << 8) | laid[three + 1]
    right_pair = (laid[three + 1].astype(np.int32) << 8) | laid[three + 2]
    left_rank, right_rank = pairs.byte_pair_ranks[left_pair], pairs.byte_pair_ranks[right_pair]
    left_first = left_rank <= right_rank
    one_join = np.minimum(left_rank, right_rank) != pairs.no_merge
    three, left_pair, right_pair, left_first = three[one_join], left_pair[one_join], right_pair[one_join], left_first[one_join]
    # the two parts after the first join: (the left pair's token, the last byte) or (the first byte, the right pair's)
    left = np.where(left_first, pairs.byte_pair_merged[left_pair], ids[three])
    right = np.where(left_first, ids[three + 2], pairs.byte_pair_merged[right_pair])
    rank, whole = lookup_pairs(pairs, left, right)
    one = rank != pairs.no_merge
    ids[three] = np.where(one, whole, left)
    ids[three[~one] + 1] = right[~one]
    return np.concatenate([joined + 1, three + 2, three[one] + 1])


def _piece_of(piece_firsts: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The piece each of ``positions`` is in, for pieces that begin at ``piece_firsts`` (ascending)."""
    return np.searchsorted(piece_firsts, positions, side="right") - 1


def _laid_end_to_end(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The pieces ``(starts, lengths)`` of ``blob`` one after another, followed by
    :data:`tokenizer.fast.piece_arrays.PADDING` bytes (what :func:`distinct_pieces` reads past a piece)."""
    if len(starts) == 1 or np.array_equal(starts[1:], starts[:-1] + lengths[:-1]):
        # one after another already (one piece, or the pieces of a text in order): a view (what follows them
        # in the blob stands for the padding)
        return blob[int(starts[0]) :]
    total = int(lengths.sum())
    laid = np.zeros(total + PADDING, dtype=np.uint8)
    np.take(blob, _runs(starts, lengths), out=laid[:total])
    return laid
