"""Characters first: BPE of a non-ASCII piece started from its characters' own merges, not from its bytes.

A Chinese piece of seven characters is 21 bytes. BPE starts from those 21 parts, and most of its merges only
rebuild each character (``e4 b8`` then ``e4b8 ad``: "中"), the same merges for the same character in every
piece. Those merges can be done first, from a cache per character, so the loop starts from about seven parts,
when nothing outside a character can come between: when every merge BPE makes inside the character alone
ranks below every merge that could join part of it to a neighbour.

Why that is enough. Call ``highest`` the highest rank BPE uses to merge the character's bytes alone. A merge
that joins across one of its edges, before the character is finished, makes a token that either ends with a
proper beginning of the character (``?? e4`` or ``?? e4 b8``), or begins with a proper end of it (``ad ??``),
or at least contains the two bytes that meet at that edge. Give each such edge a *guard*: the lowest rank of
any of those tokens. If ``highest`` is below the guards of both edges, then while the character is unfinished
a merge inside it (rank at most ``highest``) is always there to be chosen before any merge across its edges,
so its parts evolve exactly as they would alone; and merges elsewhere in the piece are chosen in the same
order whether or not its merges were done first (each of them ranked below the pending merge inside, hence
below anything that could join the finished character to a neighbour). So BPE of the piece is BPE carried on
(:func:`tokenizer.bpe.merge_from`) from the parts where each such character is already merged alone.

The guards come from three tables over the vocabulary, built once: the lowest rank of a token containing
each byte pair (:func:`tokenizer.fast.uncrossable.lowest_pair_ranks`), and of a token ending with each proper
beginning of a character, or starting with each proper end of one. A character that fails its test starts
as single bytes, as in plain BPE.

This is a speed rule, not a BPE rule: :func:`tokenizer.bpe.merge_reference` on the whole piece is the oracle
the tests hold it to. What it does not do: cut the piece (that is :mod:`tokenizer.fast.uncrossable`), or
touch ASCII, whose characters are single bytes with nothing to merge first.
"""

from __future__ import annotations

from itertools import chain
from typing import Mapping

from .. import bpe
from .uncrossable import NO_PAIR, TokenArrays, lowest_pair_ranks, token_arrays

_SINGLE_BYTES = [bytes([b]) for b in range(256)]

# The cache of characters is emptied when it holds this many (text of every code point would otherwise keep a
# million entries): real text uses a few thousand.
CHARACTER_CACHE_LIMIT = 1 << 16


# What is known of one character, as a plain tuple (read by index: faster than a named tuple's attributes):
# its first byte, its last byte, BPE of its bytes alone, the highest rank of those merges (-1: none), its single
# bytes, and whether that rank is below the guard of its left edge and of its right edge whatever the neighbour
# (the tokens ending with a proper beginning of it, or starting with a proper end of it, are enough to tell).
_FIRST, _LAST, _ALONE, _HIGHEST, _SINGLE, _LEFT_FREE, _RIGHT_FREE = range(7)


class CharactersFirst:
    """The starting parts of pieces for one vocabulary (``merge_ranks``): see the module's docstring.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"\\xe4\\xb8": 256, b"\\xe4\\xb8\\xad": 257}
    >>> CharactersFirst(ranks).start("中a")  # "中" is the bytes e4 b8 ad
    [b'\\xe4\\xb8\\xad', b'a']
    """

    def __init__(self, merge_ranks: Mapping[bytes, int]):
        self.merge_ranks = merge_ranks
        arrays = token_arrays(merge_ranks)
        # pair_guard[a << 8 | b]: the lowest rank of a token in which bytes a, b meet (the core's uncrossable
        # pairs are the NO_PAIR ones)
        self.pair_guard = lowest_pair_ranks(merge_ranks, arrays)
        self._ending_guard, self._starting_guard = _partial_character_ranks(merge_ranks, arrays)
        self._characters: dict[str, tuple] = {}

    def start(self, piece: str) -> list[bytes]:
        """The parts BPE of ``piece`` may carry on from: each character that passes its test as BPE makes it
        alone, the others as single bytes."""
        characters = self._characters
        try:
            found = list(map(characters.__getitem__, piece))
        except KeyError:
            found = [characters.get(c) or self._learn(c) for c in piece]
        pair_guard = self.pair_guard
        parts: list[bytes] = []
        left_ok = True
        last = len(found) - 1
        for at, c in enumerate(found):
            if at < last:
                after = found[at + 1]
                # the edge after c: its guard from the two bytes that meet there
                guard = pair_guard[c[_LAST] << 8 | after[_FIRST]]
                right_ok = c[_RIGHT_FREE] or c[_HIGHEST] < guard
                after_left_ok = after[_LEFT_FREE] or after[_HIGHEST] < guard
            else:
                right_ok = True
            parts.extend(c[_ALONE] if left_ok and right_ok else c[_SINGLE])
            if at < last:
                left_ok = after_left_ok
        return parts

    def merge(self, piece: str) -> list[bytes]:
        """BPE of ``piece``'s UTF-8 bytes, as :func:`tokenizer.bpe.merge_reference` gives it."""
        return bpe.merge_from(self.start(piece), self.merge_ranks)

    def _learn(self, character: str) -> tuple:
        data = character.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError: see the callers
        single_bytes = tuple(map(_SINGLE_BYTES.__getitem__, data))
        if len(data) == 1:
            found = (data[0], data[0], single_bytes, -1, single_bytes, True, True)
        else:
            ranks: list[int] = []
            alone = bpe.merge_reference(data, self.merge_ranks, on_merge=lambda rank, *_: ranks.append(rank))
            highest = max(ranks, default=-1)
            ending = min(self._ending_guard.get(data[:cut], NO_PAIR) for cut in range(1, len(data)))
            starting = min(self._starting_guard.get(data[cut:], NO_PAIR) for cut in range(1, len(data)))
            found = (data[0], data[-1], tuple(alone), highest, single_bytes, highest < ending, highest < starting)
        if len(self._characters) >= CHARACTER_CACHE_LIMIT:
            self._characters.clear()
        self._characters[character] = found
        return found


def _partial_character_ranks(
    merge_ranks: Mapping[bytes, int], arrays: TokenArrays
) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """Two tables over the tokens longer than what they are keyed by: the lowest rank of a token ending with
    each proper beginning of a UTF-8 character (a lead byte and fewer continuation bytes than it announces),
    and of a token starting with each proper end of one (one to three continuation bytes). NumPy finds the
    few tokens that have either; Python reads those."""
    import numpy as np

    blob, lengths, _ = arrays
    ends = np.cumsum(lengths)
    starts = ends - lengths

    def byte_at(offsets: np.ndarray, long_enough: np.ndarray) -> np.ndarray:
        return np.where(long_enough, blob[np.clip(offsets, 0, len(blob) - 1)], 0)

    def is_continuation(b: np.ndarray) -> np.ndarray:
        return (b & 0xC0) == 0x80

    last, second_last, third_last = (byte_at(ends - k, lengths > k) for k in (1, 2, 3))
    begins_inside = (lengths > 1) & is_continuation(byte_at(starts, lengths > 1))
    ends_inside = (
        (last >= 0xC0)  # a lead byte, then nothing
        | (is_continuation(last) & (second_last >= 0xE0))  # a lead of 3 or 4 bytes, then one
        | (is_continuation(last) & is_continuation(second_last) & (third_last >= 0xF0))  # a lead of 4, then two
    )
    tokens = list(merge_ranks)
    ending: dict[bytes, int] = {}
    starting: dict[bytes, int] = {}
    for index in np.flatnonzero(begins_inside).tolist():
        token, rank = tokens[index], int(arrays.ranks[index])
        for count in range(1, min(3, len(token) - 1) + 1):  # a continuation byte at each of the first `count`
            if not 0x80 <= token[count - 1] < 0xC0:
                break
            key = token[:count]
            starting[key] = min(rank, starting.get(key, NO_PAIR))
    for index in np.flatnonzero(ends_inside).tolist():
        token, rank = tokens[index], int(arrays.ranks[index])
        for count in range(1, min(3, len(token) - 1) + 1):  # the last `count` bytes: a lead, then continuations
            lead = token[-count]
            if lead >= 0xC0:
                if count < (2 if lead < 0xE0 else 3 if lead < 0xF0 else 4):  # fewer than the character's bytes
                    key = token[-count:]
                    ending[key] = min(rank, ending.get(key, NO_PAIR))
                break
    return ending, starting
