"""Where to cut an input file into chunks that can be counted apart, each by a worker of its own.

A plain text file is cut at safe cuts (:mod:`tokenizer.cuts`): places where the pattern splits the text before
as if the text ended there, or the start of a special token, so that no pre-token and no special token
straddles two chunks and counting the chunks apart gives the counts of the whole file. A ``.jsonl`` file is cut
after a newline (between two records).

What is not here: the counting (:mod:`tokenizer.training.counting`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..cuts import safe_byte_cuts

# How far ahead one read looks for a safe cut; the search keeps going until it finds one.
_BOUNDARY_WINDOW = 64 * 1024


def line_boundaries(path: str, chunk_size: int) -> list[int]:
    """Byte offsets ``[0, b1, ..., file_size]``: each inner one just after the first newline at or after the
    previous one + ``chunk_size``."""
    size = os.path.getsize(path)
    bounds = [0]
    with open(path, "rb") as f:
        pos = chunk_size
        while pos < size:
            f.seek(pos - 1)
            while True:
                block = f.read(_BOUNDARY_WINDOW)
                k = block.find(b"\n")
                if k >= 0 or not block:
                    break
                pos += len(block)
            if not block or pos + k >= size:
                break
            pos += k  # the newline is at pos - 1 + k
            bounds.append(pos)
            pos += chunk_size
    bounds.append(size)
    return bounds


def find_chunk_boundaries(
    path: str | os.PathLike, chunk_size: int, special_tokens: Sequence[bytes] = (), *, pattern: str
) -> list[int]:
    """Byte offsets ``[0, b1, ..., file_size]`` cutting the file into chunks of about ``chunk_size`` bytes.

    Each inner boundary is the first safe cut (:func:`tokenizer.cuts.safe_byte_cuts`) at or after the
    previous boundary + ``chunk_size``: a place where ``pattern`` splits the text before it as if the text
    ended there, or the start of a special token; never inside a character or a special token. The trainer
    cuts the text at every special token anyway, so counting the chunks separately gives the counts of the
    whole file. For a pattern that is not OpenAI's only the special tokens are cut at. When no safe cut
    exists the chunk grows until one is found (or the file ends).
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    specials = [s for s in special_tokens if s]
    bounds = [0]
    with open(path, "rb") as f:
        pos = chunk_size
        while pos < size:
            b = _next_safe_cut(f, pos, size, specials, pattern)
            if b >= size:
                break
            bounds.append(b)
            pos = b + chunk_size
    bounds.append(size)
    return bounds


def _next_safe_cut(f, pos: int, size: int, specials: Sequence[bytes], pattern: str) -> int:
    """The first safe cut at ``pos`` or later (``size`` if there is none), reading a window at a time."""
    margin = max(map(len, specials), default=0) + 4  # a special token or character across the window's edge
    lo = pos
    while lo < size:
        start = max(0, lo - margin)
        f.seek(start)
        window = f.read(min(size, lo + _BOUNDARY_WINDOW + margin) - start)
        cuts = safe_byte_cuts(
            window, lo - start, pattern=pattern, special_tokens=specials, split_at=specials,
            starts_whole=start == 0, ends_whole=start + len(window) == size,
        )
        cut = next(cuts, None)
        if cut is not None:
            return start + cut
        lo += _BOUNDARY_WINDOW
    return size
