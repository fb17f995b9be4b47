"""Pre-token counts of many texts at once, with array operations: no Python string per pre-token.

The trainer needs, for a chunk of a corpus, how often each distinct pre-token occurs. Splitting the text into a
list of strings and counting them with ``Counter`` makes one Python object per pre-token; here the pieces stay
positions in arrays until they are counted, and only the *distinct* pieces become strings:

1. The texts of a chunk (its documents, cut at special tokens) are joined into one string, and
   :func:`tokenizer.fast.array_split.piece_starts` finds where the pattern starts a pre-token in it.
2. Joining is not splitting each text alone: next to the seam between two texts the pieces may differ
   (``"a  "`` ends with the piece ``"  "``, while ``"a  " + "b"`` gives ``" "`` and ``" b"``). But at a *safe
   cut* (:mod:`tokenizer.cuts`) the split of a text is the split of its two sides, and the rule for one looks at
   the two characters around it only. So in each text, the pieces between its first and its last safe cut are
   those of the joined string, and only its *edges* — before the first cut, after the last (or the whole text
   when it has no cut) — are split apart, as strings, by the caller. The cuts used are the rule's cases among
   ASCII characters (a subset of the safe cuts is still safe): a letter or digit before any ASCII character that
   is no letter, digit or apostrophe, and a printable non-space character before a space.
3. Pieces become ``(start, length)`` in the UTF-8 bytes of the joined string (:func:`tokenizer.fast.piece_arrays.
   byte_offsets`); :func:`tokenizer.fast.piece_arrays.count_distinct` counts them exactly, and one occurrence of each
   distinct piece is sliced out of the joined string.

    >>> counts, edges = count_texts(["Hello world, hello!\\n", "  indented text"], GPT2_PATTERN)
    >>> sorted(counts.items()), edges
    ([(' hello', 1), (' world', 1), (',', 1)], ['Hello', '!\\n', '  indented', ' text'])

What this module does not do: read files, cut at special tokens, or split the edges (the trainer does, with the
pattern as a regular expression); know any pattern :func:`has_array_counts` says no to.
"""

from __future__ import annotations

import numpy as np

from ..cuts import has_safe_cuts
from ..patterns import GPT2_PATTERN  # noqa: F401 (the example above)
from ..fast.piece_arrays import byte_offsets, code_points, count_distinct, utf8_blob

try:
    from ..fast.array_split import has_array_split, piece_starts
except ImportError:  # FALLBACK until tokenizer.fast.array_split is on main: no pattern has array counts
    piece_starts = None

    def has_array_split(pat_str: str) -> bool:
        return False


def has_array_counts(pattern: str) -> bool:
    """Can :func:`count_texts` count with ``pattern``? (It needs its array split and its safe cuts.)"""
    return has_array_split(pattern) and has_safe_cuts(pattern)


# The ASCII cases of the safe-cut rule, by code point (any code point above 127 is looked up as 128: neither).
_ASCII = np.array([chr(c) for c in range(128)])
_LETTER_OR_DIGIT_X = np.append(np.char.isalnum(_ASCII), False)
_PRINTABLE_X = np.append((np.arange(128) > 0x20) & (np.arange(128) < 0x7F), False)  # no space, no control
_NO_WORD_Y = np.append(~np.char.isalnum(_ASCII) & (_ASCII != "'"), False)  # no letter, digit or apostrophe
_SPACE = 0x20
# How far from each end of a text its first and last cut are looked for before the whole text is.
_WINDOW = 32


def is_safe_ascii_cut(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether a cut between code points ``x`` and ``y`` is one of the safe cuts among ASCII characters:
    a letter or digit before a character that is no letter, digit or apostrophe (word), or a printable
    character that is not a space before a space (space)."""
    x, y = np.minimum(x, 128), np.minimum(y, 128)
    return (_LETTER_OR_DIGIT_X[x] & _NO_WORD_Y[y]) | (_PRINTABLE_X[x] & (y == _SPACE))


def edge_cuts(points: np.ndarray, begins: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(first, last, found)``: for each text ``points[begins[i]:ends[i]]`` its first and last safe ASCII cut
    with both characters inside it (positions in ``points``), and whether it has one at all."""
    if len(points) < 2:
        none = np.zeros(len(begins), dtype=np.int64)
        return none, none, none > 0
    first, found_first = _cuts_in_window(points, begins, ends, ascending=True)
    last, found_last = _cuts_in_window(points, begins, ends, ascending=False)
    # A text with no cut in a window but longer than it: looked through whole.
    for i in np.flatnonzero((found_first != found_last) | (~found_first & (ends - begins > _WINDOW + 1))).tolist():
        begin, end = int(begins[i]), int(ends[i])
        cuts = begin + 1 + np.flatnonzero(is_safe_ascii_cut(points[begin : end - 1], points[begin + 1 : end]))
        found_first[i] = len(cuts) > 0
        if len(cuts):
            first[i], last[i] = cuts[0], cuts[-1]
    return first, last, found_first


def _cuts_in_window(points: np.ndarray, begins: np.ndarray, ends: np.ndarray, ascending: bool):
    """The first (``ascending``) or last cut of each text among the :data:`_WINDOW` nearest its start or end."""
    steps = np.arange(1, _WINDOW + 1)
    if ascending:
        at = begins[:, None] + steps
        inside = at < ends[:, None]
    else:
        at = ends[:, None] - steps
        inside = at > begins[:, None]
    clipped = np.clip(at, 1, max(len(points) - 1, 1))
    safe = inside & is_safe_ascii_cut(points[clipped - 1], points[clipped])
    return at[np.arange(len(at)), safe.argmax(axis=1)], safe.any(axis=1)


def count_texts(texts: list[str], pattern: str) -> tuple[dict[str, int], list[str]]:
    """``(counts, edges)``: the pre-tokens of the texts (each split alone by ``pattern``) are those counted in
    ``counts`` plus those of splitting each string of ``edges`` alone. ``pattern`` must have array counts
    (:func:`has_array_counts`). Texts with a lone surrogate (which has no UTF-8) are all returned as edges."""
    texts = [text for text in texts if text]
    joined = "".join(texts)
    try:
        points = code_points(joined)
    except UnicodeEncodeError:
        return {}, texts
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    begins = ends - lengths
    first_cut, last_cut, has_cut = edge_cuts(points, begins, ends)
    between_cuts = has_cut & (first_cut < last_cut)
    edges = []
    for text, begin, first, last, cut in zip(texts, begins.tolist(), first_cut.tolist(), last_cut.tolist(),
                                             has_cut.tolist()):
        if cut:
            edges += (text[: first - begin], text[last - begin :])
        else:
            edges.append(text)
    # The pieces of the joined string that start between a text's first and last cut (and so end by the last):
    # those after an odd number of the (ascending) bounds first, last, first, last, ...
    bounds = np.stack([first_cut[between_cuts], last_cut[between_cuts]], axis=1).ravel()
    starts = piece_starts(points, pattern)
    piece_ends = np.append(starts[1:], len(joined))
    kept = np.searchsorted(bounds, starts, side="right") % 2 == 1
    starts, piece_ends = starts[kept], piece_ends[kept]
    byte_starts, byte_ends = byte_offsets(points, starts), byte_offsets(points, piece_ends)
    representatives, counts = count_distinct(utf8_blob(joined), byte_starts, byte_ends - byte_starts)
    pieces = [joined[start:end] for start, end in zip(starts[representatives].tolist(),
                                                      piece_ends[representatives].tolist())]
    return dict(zip(pieces, counts.tolist())), edges
