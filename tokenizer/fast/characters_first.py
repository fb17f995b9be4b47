"""Characters first: BPE of a non-ASCII piece started from its characters' own merges, not from its bytes.

A Chinese piece of seven characters is 21 bytes. BPE starts from those 21 parts, and most of its merges only
rebuild each character (``e4 b8`` then ``e4b8 ad``: "中"), the same merges for the same character in every
piece. Those merges can be done first, from a cache per character, so the loop starts from about seven parts,
when nothing outside a character can come between: when every merge BPE makes inside the character alone
ranks below every merge that could join it, or part of it, to a neighbour.

Why that is enough. Call ``highest`` the highest rank BPE uses to merge the character's bytes alone, and give
each edge of the character a *guard*: the lowest rank of any token that contains the two bytes meeting there
(:func:`tokenizer.fast.uncrossable.lowest_pair_ranks`). Every merge that joins across that edge, whatever the
parts on either side (part of the character, all of it, or more), makes such a token, so ranks at least the
guard. If ``highest`` is below the guards of both edges, then while the character is unfinished a merge inside
it (rank at most ``highest``) is always there to be chosen before any merge across its edges, so its parts
evolve exactly as they would alone; and merges elsewhere in the piece are chosen in the same order whether or
not its merges were done first (each of them ranked below the pending merge inside, hence below anything that
could join the character, finished or not, to a neighbour). So BPE of the piece is BPE carried on
(:func:`tokenizer.bpe.merge_from`) from the parts where each such character is already merged alone. A
character that fails its test starts as single bytes, as in plain BPE.

This is a speed rule, not a BPE rule: :func:`tokenizer.bpe.merge_reference` on the whole piece is the oracle
the tests hold it to. What it does not do: cut the piece (that is :mod:`tokenizer.fast.uncrossable`), or
touch ASCII, whose characters are single bytes with nothing to merge first.
"""

from __future__ import annotations

from itertools import chain
from typing import Mapping

from .. import bpe
from .uncrossable import NO_PAIR, lowest_pair_ranks

_SINGLE_BYTES = [bytes([b]) for b in range(256)]

# The cache of characters is emptied when it holds this many (text of every code point would otherwise keep a
# million entries): real text uses a few thousand.
CHARACTER_CACHE_LIMIT = 1 << 16


# What is known of one character, as a plain tuple (read by index: faster than a named tuple's attributes): its
# first byte, its last byte, BPE of its bytes alone, the highest rank of those merges (-1: none), its single bytes.
_FIRST, _LAST, _ALONE, _HIGHEST, _SINGLE = range(5)


class CharactersFirst:
    """The starting parts of pieces for one vocabulary (``merge_ranks``): see the module's docstring.

    >>> ranks = {bytes([b]): b for b in range(256)} | {b"\\xe4\\xb8": 256, b"\\xe4\\xb8\\xad": 257}
    >>> CharactersFirst(ranks).start("中a")  # "中" is the bytes e4 b8 ad
    [b'\\xe4\\xb8\\xad', b'a']
    """

    def __init__(self, merge_ranks: Mapping[bytes, int], pair_guard: list[int] | None = None):
        self.merge_ranks = merge_ranks
        # pair_guard[a << 8 | b]: the lowest rank of a token in which bytes a, b meet (given, if the caller has
        # it: :func:`tokenizer.fast.uncrossable.pair_tables` makes it with the uncrossable pairs)
        self.pair_guard = lowest_pair_ranks(merge_ranks) if pair_guard is None else pair_guard
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
        # each edge's guard, from the two bytes that meet there; none at the piece's ends
        edges = [NO_PAIR, *[pair_guard[a[_LAST] << 8 | b[_FIRST]] for a, b in zip(found, found[1:])], NO_PAIR]
        chosen = [
            c[_ALONE] if left > c[_HIGHEST] < right else c[_SINGLE] for c, left, right in zip(found, edges, edges[1:])
        ]
        return list(chain.from_iterable(chosen))

    def merge(self, piece: str) -> list[bytes]:
        """BPE of ``piece``'s UTF-8 bytes, as :func:`tokenizer.bpe.merge_reference` gives it."""
        return bpe.merge_from(self.start(piece), self.merge_ranks)

    def _learn(self, character: str) -> tuple:
        data = character.encode("utf-8")  # a lone surrogate raises UnicodeEncodeError: see the callers
        single_bytes = tuple(map(_SINGLE_BYTES.__getitem__, data))
        ranks: list[int] = []
        alone = bpe.merge_reference(data, self.merge_ranks, on_merge=lambda rank, *_: ranks.append(rank))
        found = (data[0], data[-1], tuple(alone), max(ranks, default=-1), single_bytes)
        if len(self._characters) >= CHARACTER_CACHE_LIMIT:
            self._characters.clear()
        self._characters[character] = found
        return found
