"""Pieces of text as arrays: a text's UTF-8 bytes, where its pieces lie, and exact look-ups of pieces by value.

The fast paths cut a text into pre-tokens without making a Python string of each (:mod:`tokenizer.fast.array_split`
gives where the pieces start). Then a piece is just a ``(start, length)`` in the text's UTF-8 bytes, and what
the encoder and the trainer need of it — is it a token, and which; how often each distinct piece occurs —
must be answered for all pieces at once. This module answers both, exactly.

A piece's *words*: its first eight bytes and its last eight bytes, each read as one uint64 (bytes past the
piece masked to zero). With its length they determine a piece of up to 16 bytes completely, so comparing
``(first, last, length)`` compares the pieces; a longer piece is compared byte for byte as well. A hash of them
(:func:`piece_keys`) picks a slot in a table; the comparison, not the hash, decides (a piece of at most seven
bytes has a key no other piece of its length has, so there key and length are the comparison). So a collision costs time, never a
wrong answer:

    >>> import numpy as np
    >>> table = PieceTable({b" the": 262, b"Hello": 15496})
    >>> blob = utf8_blob("Hello the")
    >>> table.find(blob, np.array([0, 5, 6]), np.array([5, 4, 3])).tolist()   # "Hello", " the", "the"
    [15496, 262, -1]

What this module does not do: decide where pieces are (that is :mod:`tokenizer.fast.array_split`), or BPE.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

import numpy as np

# An empty slot of a hash table (a value never stored).
EMPTY = -1

# Fibonacci hashing: a key's home slot is the top bits of key * this odd constant, modulo 2**64.
_SLOT_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)

# Bytes read past a blob's end by the eight-byte words (kept as zeros, then masked off).
PADDING = 8


def code_points(text: str) -> np.ndarray:
    """The code points of ``text`` as uint32 (UnicodeEncodeError on a lone surrogate, as ``str.encode``)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def utf8_blob(text: str) -> np.ndarray:
    """The UTF-8 bytes of ``text`` as uint8, with :data:`PADDING` zero bytes after them."""
    data = text.encode("utf-8")
    blob = np.zeros(len(data) + PADDING, dtype=np.uint8)
    blob[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return blob


def byte_offsets(points: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The offset in the UTF-8 bytes of the code point at each of ``positions`` (int64; ``len(points)`` is the
    byte length) for a text with code points ``points``.

    >>> byte_offsets(code_points("aé€"), np.array([0, 1, 2, 3])).tolist()
    [0, 1, 3, 6]
    """
    positions = np.asarray(positions, dtype=np.int64)
    # A code point takes one byte, plus one from U+0080, one more from U+0800, one more from U+10000.
    beyond_ascii = np.flatnonzero(points >= 0x80)
    if len(beyond_ascii) * 8 < len(points):  # mostly ASCII: add up the extra bytes of the few others
        extra = points[beyond_ascii]
        extra_before = np.zeros(len(beyond_ascii) + 1, dtype=np.int64)
        np.cumsum(1 + (extra >= 0x800) + (extra >= 0x10000), out=extra_before[1:])
        return positions + extra_before[np.searchsorted(beyond_ascii, positions)]
    extra = (points >= 0x80).view(np.uint8) + (points >= 0x800).view(np.uint8) + (points >= 0x10000).view(np.uint8)
    extra_before = np.zeros(len(points) + 1, dtype=np.int64)
    np.cumsum(extra, out=extra_before[1:])
    return positions + extra_before[positions]


def mix64(x: np.ndarray) -> np.ndarray:
    """A bijection of uint64 that spreads every input bit over all output bits (splitmix64's finalizer)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def home_slots(keys: np.ndarray, slot_bits: int) -> np.ndarray:
    """The home slot of each key (int64 or uint64) in a table of ``2 ** slot_bits`` slots."""
    # the same bits read as unsigned (a view, not a copy); the product is a new array, shifted in place
    slots = keys.view(np.uint64) * _SLOT_MULTIPLIER
    slots >>= np.uint64(64 - slot_bits)
    return slots.view(np.int64)


def hash_table_slots(keys: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``(where, size, slot_bits)``: the slot of each of the distinct ``keys`` in a linear-probing table of
    ``size`` slots, at most half full, whose last slot is free. A key lives in its home slot or the first free
    slot after it, and no free slot lies between its home and where it lives (so a search stops at a free slot).
    """
    slot_bits = max(1, int(2 * len(keys)).bit_length())
    home = home_slots(keys, slot_bits)
    order = np.argsort(home, kind="stable")
    # In order of home slot, each key takes its home or the slot after the previous key's, whichever is later.
    rank_in_order = np.arange(len(keys))
    taken = np.maximum.accumulate(home[order] - rank_in_order) + rank_in_order
    where = np.empty(len(keys), dtype=np.int64)
    where[order] = taken
    size = max((1 << slot_bits), int(taken.max(initial=-1)) + 1) + 1
    return where, size, slot_bits


def _words(blob: np.ndarray) -> np.ndarray:
    """The eight bytes from each position of ``blob`` (which ends with :data:`PADDING` bytes), as one unaligned
    little-endian uint64 each: a view, nothing is copied."""
    return np.ndarray((len(blob) - PADDING + 1,), dtype="<u8", buffer=blob, strides=(1,))


def piece_words(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, last)``: the first eight bytes of each piece and its last eight (fewer, for a shorter piece:
    then both are the whole piece), as little-endian uint64 with the bytes beyond the piece zero. ``blob`` ends
    with :data:`PADDING` zero bytes (:func:`utf8_blob`)."""
    words = _words(blob)
    short = np.minimum(lengths, 8)
    with np.errstate(over="ignore"):
        keep = np.uint64(0xFFFFFFFFFFFFFFFF) >> ((8 - short) * 8).astype(np.uint64)  # short > 0 for any piece
    return words[starts] & keep, words[starts + lengths - short] & keep


def piece_keys(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first: np.ndarray,
               last: np.ndarray) -> np.ndarray:
    """A uint64 hash of each piece (equal pieces, equal keys). Two pieces of one length under eight bytes have
    equal keys only if they are equal (their bytes and length fit in 64 bits, which a bijection mixes); longer ones are
    hashed from their words and length, and above 16 bytes from all their bytes too, and need comparing."""
    with np.errstate(over="ignore"):
        # Most pieces are short: every key is first made as a short piece's, then the longer ones' replaced.
        keys = mix64(first | (lengths.astype(np.uint64) << np.uint64(56)))
        longer = np.flatnonzero(lengths >= 8)
        if len(longer):
            keys[longer] = mix64(mix64(mix64(first[longer]) + last[longer]) + lengths[longer].astype(np.uint64))
        long = np.flatnonzero(lengths > 16)
        if len(long):
            keys[long] += mix64(_polynomial_hashes(blob, starts[long], lengths[long]))  # (the last word is in the key)
        return keys


class KeyedPieces(NamedTuple):
    """Pieces' words and keys (:func:`key_pieces`): made once for pieces that are looked up more than once
    (grouped into distinct ones, then looked up in a :class:`PieceTable`, say)."""

    first: np.ndarray
    last: np.ndarray
    keys: np.ndarray

    def take(self, index: np.ndarray) -> KeyedPieces:
        """Those of the pieces at ``index``."""
        return KeyedPieces(self.first[index], self.last[index], self.keys[index])


def key_pieces(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> KeyedPieces:
    """The words (:func:`piece_words`) and keys (:func:`piece_keys`) of the pieces ``(starts, lengths)``."""
    first, last = piece_words(blob, starts, lengths)
    return KeyedPieces(first, last, piece_keys(blob, starts, lengths, first, last))


# A polynomial hash of a piece's eight-byte words, modulo 2**64 (uint64 arithmetic wraps): sum of word * BASE**i.
_BASE = np.uint64(0x100000001B3)


def _polynomial_hashes(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """A hash of the words at 0, 8, 16, ... of each piece (longer than 16 bytes) before its last eight bytes;
    with its last word, every byte of it. A word at a time, not a byte: an eighth of the gathers."""
    counts = (lengths - 1) // 8
    within = positions_within(counts)
    values = _words(blob)[np.repeat(starts, counts) + 8 * within]
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(int(counts.max()), _BASE, dtype=np.uint64))
        values *= powers[within]
        return np.add.reduceat(values, np.cumsum(counts) - counts)


def positions_within(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ..., lengths[0] - 1, 0, 1, ..., lengths[1] - 1, ...: each item's position within its run (a
    byte's in its piece, say)."""
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def same_bytes(blob_a: np.ndarray, starts_a: np.ndarray, blob_b: np.ndarray, starts_b: np.ndarray,
               lengths: np.ndarray) -> np.ndarray:
    """Whether each ``blob_a[starts_a[i]:][:lengths[i]]`` equals ``blob_b[starts_b[i]:][:lengths[i]]``."""
    if not len(lengths):
        return np.ones(0, dtype=bool)
    within = positions_within(lengths)
    differs = blob_a[np.repeat(starts_a, lengths) + within] != blob_b[np.repeat(starts_b, lengths) + within]
    piece_of_byte = np.repeat(np.arange(len(lengths)), lengths)
    return np.bincount(piece_of_byte[differs], minlength=len(lengths)) == 0


def count_distinct(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(representatives, counts)``: for each distinct piece (by bytes), the index of one of its occurrences
    among ``starts``/``lengths``, and how often it occurs (distinct pieces in no particular order).

    >>> blob = utf8_blob("abab a")
    >>> starts, lengths = np.array([0, 2, 4, 5]), np.array([2, 2, 1, 1])
    >>> representatives, counts = count_distinct(blob, starts, lengths)
    >>> pieces = [blob[starts[i]:][:lengths[i]].tobytes() for i in representatives]
    >>> sorted(zip(pieces, counts.tolist()))
    [(b' ', 1), (b'a', 1), (b'ab', 2)]
    """
    representatives, group = distinct_pieces(blob, starts, lengths)
    return representatives, np.bincount(group, minlength=len(representatives))


def distinct_pieces(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
                    keyed: KeyedPieces | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(representatives, group)``: the index of one occurrence of each distinct piece (by bytes), and for
    each piece, which of those it is (``starts[representatives[group[i]]]`` holds the same bytes as piece i).
    ``keyed``: the pieces' :func:`key_pieces`, if made already.

    >>> blob = utf8_blob("abab a")
    >>> representatives, group = distinct_pieces(blob, np.array([0, 2, 4, 5]), np.array([2, 2, 1, 1]))
    >>> len(representatives), bool(group[0] == group[1]), len(set(group.tolist()))   # "ab" twice, " ", "a"
    (3, True, 3)
    """
    n = len(starts)
    if n < 2:  # no piece, or one (which may be long: not worth hashing)
        return np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    first, last, keys = keyed if keyed is not None else key_pieces(blob, starts, lengths)
    # Group the pieces by key. Sorting the keys themselves is several times faster than argsort; so the low
    # bits of each key give way to the piece's index, which the sort carries along. Groups are then by the
    # key's high bits only: unequal pieces may share a group, which the comparison below finds.
    index_bits = np.uint64(max(1, (n - 1).bit_length()))
    tagged = keys >> index_bits
    tagged <<= index_bits
    tagged |= np.arange(n, dtype=np.uint64)
    tagged.sort()
    order = (tagged & ((np.uint64(1) << index_bits) - np.uint64(1))).astype(np.int64)
    tagged >>= index_bits
    new_key = np.empty(n, dtype=bool)
    new_key[0] = True
    np.not_equal(tagged[1:], tagged[:-1], out=new_key[1:])
    representatives = order[new_key]
    group = np.empty(n, dtype=np.int64)
    group[order] = np.cumsum(new_key) - 1
    # Every piece must equal its group's representative: same length and words (bytes too above 16 bytes).
    # Compared in the pieces' own order through the representatives' values: gathers from a small table
    # rather than from all pieces in key order. (The first word and the length are a piece of up to 8 bytes.)
    equal = lengths == lengths[representatives][group]
    equal &= first == first[representatives][group]
    longer = np.flatnonzero(equal & (lengths > 8))
    other = representatives[group[longer]]
    equal[longer] = last[longer] == last[other]
    # (a representative is itself: only the others are compared byte for byte)
    long = np.flatnonzero(equal[longer] & (lengths[longer] > 16) & (other != longer))
    equal[longer[long]] = same_bytes(blob, starts[longer[long]], blob, starts[other[long]], lengths[longer[long]])
    if equal.all():
        return representatives, group
    # A collision (of the keys' high bits): the pieces unlike their representative are grouped by bytes, as
    # new groups. None of them equals a piece of another group (equal pieces have equal keys), so they only
    # meet each other; and a group keeps its representative, which is like itself.
    strays = np.flatnonzero(~equal)
    stray_representatives, stray_group = _distinct_by_bytes(blob, starts[strays], lengths[strays])
    group[strays] = len(representatives) + stray_group
    return np.concatenate([representatives, strays[stray_representatives]]), group


def _distinct_by_bytes(blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    data = blob.tobytes()
    pieces = [data[start : start + length] for start, length in zip(starts.tolist(), lengths.tolist())]
    first_seen: dict[bytes, int] = {}
    for i, piece in enumerate(pieces):
        first_seen.setdefault(piece, i)
    number = {piece: n for n, piece in enumerate(first_seen)}
    return np.array(list(first_seen.values()), dtype=np.int64), np.array([number[p] for p in pieces], dtype=np.int64)


def _laid_out(pieces: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(blob, starts, lengths)``: the byte strings one after another, followed by :data:`PADDING` zero bytes."""
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    blob = np.zeros(int(lengths.sum()) + PADDING, dtype=np.uint8)
    blob[: len(blob) - PADDING] = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    return blob, np.cumsum(lengths) - lengths, lengths


class PieceTable:
    """An exact map from byte strings to non-negative ints, looked up for many pieces of a blob at once.

    Its state is a few arrays (:attr:`arrays`), so that it can be saved and rebuilt without hashing again
    (:meth:`from_arrays`; :mod:`tokenizer.fast.table_cache` keeps a vocabulary's on disk)."""

    def __init__(self, values: Mapping[bytes, int]):
        pieces = list(values)
        blob, starts, lengths = _laid_out(pieces)
        if len(pieces) and not lengths.min() > 0:
            raise ValueError("a PieceTable cannot hold the empty string")
        first, last = piece_words(blob, starts, lengths)
        keys = piece_keys(blob, starts, lengths, first, last)
        sorted_keys = np.sort(keys)
        if (sorted_keys[1:] == sorted_keys[:-1]).any():
            raise ValueError("two pieces of a PieceTable have the same key (a 64-bit hash collision)")
        where, size, slot_bits = hash_table_slots(keys)
        slot_key = np.zeros(size, dtype=np.uint64)
        slot_entry = np.full(size, EMPTY, dtype=np.int64)
        slot_key[where], slot_entry[where] = keys, np.arange(len(pieces))
        values_array = np.fromiter(values.values(), dtype=np.int64, count=len(pieces))
        self._set(blob, lengths, values_array, slot_key, slot_entry, slot_bits)

    def _set(self, blob, lengths, values, slot_key, slot_entry, slot_bits) -> None:
        self._blob, self._lengths, self._values = blob, lengths, values
        self._slot_key, self._slot_entry, self._slot_bits = slot_key, slot_entry, int(slot_bits)
        self._starts = np.cumsum(lengths) - lengths
        # (the entries' words are read when a look-up needs them, for its candidates only: a table loaded for
        # one call does not pay for all of them)
        self._longest = int(lengths.max(initial=0))

    def __len__(self) -> int:
        return len(self._lengths)

    def values_of(self, pieces: Sequence[bytes]) -> list[int]:
        """The value of each of ``pieces``, -1 where the table lacks it (:meth:`find`, for byte strings).

        >>> PieceTable({b"ab": 7, b"c": 3}).values_of([b"c", b"ab", b"x", b""])
        [3, 7, -1, -1]
        """
        blob, starts, lengths = _laid_out(pieces)
        found = np.full(len(pieces), EMPTY, dtype=np.int64)
        some = np.flatnonzero(lengths > 0)  # (the empty string is never held)
        found[some] = self.find(blob, starts[some], lengths[some])
        return found.tolist()

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The state, as named arrays (what :meth:`from_arrays` takes)."""
        return {"blob": self._blob, "lengths": self._lengths, "values": self._values, "slot_key": self._slot_key,
                "slot_entry": self._slot_entry, "slot_bits": np.array(self._slot_bits)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> PieceTable:
        """The table whose :attr:`arrays` these are."""
        table = cls.__new__(cls)
        table._set(**{name: arrays[name] for name in ("blob", "lengths", "values", "slot_key", "slot_entry", "slot_bits")})
        return table

    def find(self, blob: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
             keyed: KeyedPieces | None = None) -> np.ndarray:
        """The value of each piece ``blob[starts[i]:][:lengths[i]]`` (int64), -1 where the table lacks it.
        ``blob`` ends with :data:`PADDING` zero bytes (:func:`utf8_blob`); lengths are positive. ``keyed``: the
        pieces' :func:`key_pieces`, if made already."""
        fits = lengths <= self._longest
        if not fits.all():  # a piece longer than every entry is none of them (and is not worth hashing)
            found = np.full(len(starts), EMPTY, dtype=np.int64)
            inside = np.flatnonzero(fits)
            found[inside] = self.find(blob, starts[inside], lengths[inside],
                                      None if keyed is None else keyed.take(inside))
            return found
        first, last, keys = keyed if keyed is not None else key_pieces(blob, starts, lengths)
        slot = home_slots(keys, self._slot_bits)
        entry = self._slot_entry[slot]
        # A piece's search ends at the slot holding its key, or at a free slot: it is not in the table.
        searching = np.flatnonzero((self._slot_key[slot] != keys) & (entry != EMPTY))
        entry[searching] = EMPTY
        while len(searching):  # each pass looks one slot further for the pieces not settled yet
            slot[searching] += 1
            at = slot[searching]
            in_slot = self._slot_entry[at]
            same_key = self._slot_key[at] == keys[searching]
            entry[searching[same_key]] = in_slot[same_key]
            searching = searching[~same_key & (in_slot != EMPTY)]
        # The keys of the table are distinct, so a piece can only be the entry with its key: compare them.
        # (Keys of pieces under eight bytes are theirs alone: only the others are compared.)
        hit = np.flatnonzero(entry != EMPTY)
        candidate = entry[hit]
        equal = self._lengths[candidate] == lengths[hit]
        check = np.flatnonzero(equal & (lengths[hit] >= 8))
        piece, other = hit[check], candidate[check]
        other_first, other_last = piece_words(self._blob, self._starts[other], self._lengths[other])
        equal[check] = (other_first == first[piece]) & (other_last == last[piece])
        long = check[equal[check] & (lengths[piece] > 16)]
        equal[long] = same_bytes(blob, starts[hit[long]], self._blob, self._starts[candidate[long]], lengths[hit[long]])
        found = np.full(len(keys), EMPTY, dtype=np.int64)
        found[hit[equal]] = self._values[candidate[equal]]
        return found
