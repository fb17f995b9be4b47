"""Pre-token counts of many texts at once, with array operations: no Python string per pre-token.

The trainer needs, for a chunk of a corpus, how often each distinct pre-token occurs. Splitting the text into a
list of strings and counting them with ``Counter`` makes one Python object per pre-token; here the pieces stay
positions in arrays until they are counted, and only the *distinct* pieces become strings:

1. The texts of a chunk (its documents, cut at special tokens) are laid end to end in one string, and
   :func:`tokenizer.fast.array_split.piece_starts_of_texts` finds where the pattern starts a pre-token in it,
   each text split as if alone (the encoder's batches are split the same way).
2. Pieces become ``(start, length)`` in the UTF-8 bytes of the joined string (:func:`tokenizer.fast.piece_arrays.
   byte_offsets`); :func:`tokenizer.fast.piece_arrays.count_distinct` counts them exactly, and one occurrence of each
   distinct piece is sliced out of the joined string.

    >>> sorted(count_texts(["Hello world, hello!\\n", "Hello  world"], GPT2_PATTERN).items())
    [('\\n', 1), (' ', 1), (' hello', 1), (' world', 2), ('!', 1), (',', 1), ('Hello', 2)]

What this module does not do: read files, cut at special tokens, or count text with a lone surrogate (it has no
UTF-8; the trainer splits such texts with the pattern as a regular expression); know any pattern
:func:`has_array_counts` says no to.
"""

from __future__ import annotations

import numpy as np

from ..cuts import has_safe_cuts
from ..fast.array_split import has_array_split, piece_starts_of_texts
from ..fast.piece_arrays import byte_offsets, code_points, count_distinct, utf8_blob
from ..patterns import GPT2_PATTERN  # noqa: F401 (the example above)


def has_array_counts(pattern: str) -> bool:
    """Can :func:`count_texts` count with ``pattern``? (It needs its array split and its safe cuts.)"""
    return has_array_split(pattern) and has_safe_cuts(pattern)


def count_texts(texts: list[str], pattern: str) -> dict[str, int] | None:
    """How often each pre-token occurs in ``texts``, each text split alone by ``pattern`` (which must have array
    counts: :func:`has_array_counts`); None if a text holds a lone surrogate."""
    texts = [text for text in texts if text]
    if not texts:
        return {}
    joined = "".join(texts)
    try:
        points = code_points(joined)
    except UnicodeEncodeError:
        return None
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = piece_starts_of_texts(joined, points, np.cumsum(lengths) - lengths, pattern)
    piece_ends = np.append(starts[1:], len(joined))
    byte_starts, byte_ends = byte_offsets(points, starts), byte_offsets(points, piece_ends)
    representatives, counts = count_distinct(utf8_blob(joined), byte_starts, byte_ends - byte_starts)
    pieces = [joined[start:end] for start, end in zip(starts[representatives].tolist(),
                                                      piece_ends[representatives].tolist())]
    return dict(zip(pieces, counts.tolist()))
