"""Where OpenAI's pre-tokenization patterns cut a text, found with NumPy array operations over its code points.

A pattern such as GPT-2's is run by a regex engine piece by piece: at each piece start it tries the
alternatives left to right and takes the first that fits. For OpenAI's patterns that scan reduces to *local
rules*: whether a piece starts at position ``i`` depends only on the classes of a few characters around ``i``
(letter, number, whitespace or "other", and a handful of named characters), plus a few rules about runs. Local
rules are array operations: look up every code point's class in one table, compare each position with its
neighbour (``a[1:]`` against ``a[:-1]``), and collect the starts with ``np.flatnonzero``. No piece is made as a
string and no Python loop walks the positions:

    >>> text = "Hello world, it's 2024!"
    >>> code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
    >>> piece_starts(code_points, GPT2_PATTERN).tolist()  # Hello| world|,| it|'s| 2024|!
    [0, 5, 11, 12, 15, 17, 22]
    >>> piece_starts(code_points, CL100K_PATTERN).tolist()  # ... 's| |202|4|!
    [0, 5, 11, 12, 15, 17, 18, 21, 22]

The rules, derived from the patterns (``tests/test_array_split.py`` checks them against the ``regex`` package on
fuzz, the corpora and every code point in context):

GPT-2 / r50k / p50k (``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``):

- a maximal run of letters, of numbers, of "other" characters or of whitespace starts a piece, unless a space
  (U+0020 itself, no other whitespace) comes just before a non-space run: then the space starts it;
- in a whitespace run followed by a non-space, the last character starts a piece (``\\s+(?!\\S)`` gives back
  one character: it is the next run's space, or a piece alone); a run at the end of the text is one piece;
- an apostrophe that starts a piece (after a letter, a number, whitespace other than U+0020, or first) and is
  followed by ``s t re ve m ll d`` is a contraction: one piece, and the letters after it start a new one.

cl100k (``'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|
\\s*[\\r\\n]|\\s+(?!\\S)|\\s``):

- a letter run starts a piece unless one character that starts a piece itself comes first and is not a letter,
  number, CR or LF: the last whitespace of a run (a tab joins too), or an "other" run of exactly one character
  (a longer run is taken whole by ``++``, leaving none to lend);
- numbers are cut in threes from the start of their run, with no space before them;
- an "other" run starts a piece unless a space comes just before it (the space starts it); the CRs and LFs right
  after it belong to it (``[\\r\\n]*+``), so whitespace after them starts the next piece;
- whitespace: a run starts a piece; ``\\s*[\\r\\n]`` ends a piece at the run's *last* line break, so what
  follows that break starts one; the last character before a non-space starts a piece unless it is a line break;
  a run at the end of the text (``\\s++$``) is one piece after its first start;
- contractions as for GPT-2, case-insensitive (``(?i)`` also folds the long s U+017F to s).

Every rule that concerns few positions (digits, line breaks, apostrophes) runs on the compressed array of those
positions; the whole-text passes are a table look-up and about a dozen byte-wide comparisons. The class table
(one byte per code point, tiktoken's Unicode 16.0 classes from :mod:`tokenizer.unicode16`) is built on first use
and kept.

What this module does not do: make the pieces (``text[a:b]`` from the starts is the caller's), run BPE, or know
any pattern but OpenAI's gpt2/r50k and cl100k ones. o200k has no array form here (its case split, marks that
are both word and "other", and ``[\\r\\n/]*`` after punctuation chain decisions across runs):
:func:`piece_starts` returns ``None`` for it and for any other pattern, and the caller splits with
:mod:`tokenizer.pretokenize`. Lone surrogates must be handled before (``"utf-32-le"`` refuses them).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from .patterns import CL100K_PATTERN, GPT2_PATTERN, R50K_PATTERN
from .stdlib_patterns import code_point_runs

CODE_POINTS = 0x110000

# One byte per code point: the classes the patterns test, and the few characters they name.
LETTER, NUMBER, SPACE, LINE_BREAK, BLANK, APOSTROPHE = 1, 2, 4, 8, 16, 32  # BLANK is U+0020 only
JOINS_LETTERS = 64  # a letter, or whitespace but CR and LF: what cl100k lets run into a letter run
# LETTER, NUMBER and SPACE exclude each other; a character with none of them is "other" (punctuation, symbols,
# marks, unassigned): the patterns' [^\s\p{L}\p{N}].
KIND = LETTER | NUMBER | SPACE


@cache
def class_table() -> np.ndarray:
    """``uint8[0x110000]``: each code point's class bits (built once, from tiktoken's Unicode 16.0 classes)."""
    table = np.zeros(CODE_POINTS, np.uint8)
    for name, bit in (("L", LETTER), ("N", NUMBER), ("White_Space", SPACE)):
        for first, last in code_point_runs(name):
            table[first : last + 1] |= bit
    table[[0x0A, 0x0D]] |= LINE_BREAK
    table[0x20] |= BLANK
    table[0x27] |= APOSTROPHE
    table[(table & LETTER) != 0] |= JOINS_LETTERS
    table[(table & (SPACE | LINE_BREAK)) == SPACE] |= JOINS_LETTERS
    table.flags.writeable = False  # shared by every caller
    return table


def has_array_split(pat_str: str) -> bool:
    """Does :func:`piece_starts` know ``pat_str``?"""
    return pat_str in _SPLITTERS


def piece_starts(code_points: np.ndarray, pat_str: str) -> np.ndarray | None:
    """``int64`` ascending positions (code point indices) where each pre-token starts; ``[0, ...]`` for non-empty
    text, empty for empty text; ``None`` if ``pat_str`` has no array form (the caller then uses the regex split).

    ``code_points`` is ``np.frombuffer(text.encode("utf-32-le"), np.uint32)``.
    """
    splitter = _SPLITTERS.get(pat_str)
    if splitter is None:
        return None
    if len(code_points) == 0:
        return np.zeros(0, np.int64)
    classes = class_table().take(code_points)
    return np.flatnonzero(splitter(code_points, classes)).astype(np.int64, copy=False)


def _flag(classes: np.ndarray, bit: int) -> np.ndarray:
    return (classes & bit) != 0


def _contraction_lengths(code_points: np.ndarray, at: np.ndarray, ignore_case: bool) -> np.ndarray:
    """For apostrophes at positions ``at``: the length of the contraction starting there ('s: 2, 'll: 3), or 0."""
    n = len(code_points)
    first = code_points[np.minimum(at + 1, n - 1)].astype(np.int64)
    second = code_points[np.minimum(at + 2, n - 1)].astype(np.int64)
    first = np.where(at + 1 < n, first, -1)
    second = np.where(at + 2 < n, second, -1)
    if ignore_case:
        # (?i) matches ASCII letters of either case and, for s, the long s U+017F; | 0x20 lower-cases A-Z and
        # maps nothing else onto a-z
        first = np.where(first == 0x17F, ord("s"), first | 0x20)
        second = second | 0x20
    one = np.isin(first, [ord(c) for c in "sdmt"])
    two = ((first == ord("l")) & (second == ord("l"))) | (
        ((first == ord("v")) | (first == ord("r"))) & (second == ord("e"))
    )
    return np.where(one, 2, np.where(two, 3, 0))


def _apply_contractions(code_points, starts, at, ignore_case: bool) -> None:
    """A contraction at an apostrophe that starts a piece (positions ``at``) is a piece: no cut inside it, a cut
    after it."""
    if len(at) == 0:
        return
    length = _contraction_lengths(code_points, at, ignore_case)
    at, length = at[length > 0], length[length > 0]
    starts[at + 1] = False
    end = at + length
    starts[end[end < len(starts)]] = True


def _gpt2_starts(code_points: np.ndarray, classes: np.ndarray) -> np.ndarray:
    kind = classes & KIND
    space = _flag(classes, SPACE)
    blank = _flag(classes, BLANK)
    starts = np.empty(len(classes), bool)
    starts[0] = True
    # a run of letters, of digits, of "other" or of whitespace starts a piece, unless a blank before it joins
    np.not_equal(kind[1:], kind[:-1], out=starts[1:])
    starts[1:] &= ~(blank[:-1] & ~space[1:])
    # the last whitespace before a non-space starts a piece (alone, or as the next run's blank)
    starts[:-1] |= space[:-1] & ~space[1:]
    apostrophes = np.flatnonzero(classes & APOSTROPHE)
    _apply_contractions(code_points, starts, apostrophes[starts[apostrophes]], ignore_case=False)
    return starts


def _cl100k_starts(code_points: np.ndarray, classes: np.ndarray) -> np.ndarray:
    n = len(classes)
    kind = classes & KIND
    other = kind == 0
    space = kind == SPACE
    # (U+0020, CR and LF each have a class byte of their own: one comparison finds them)
    table = class_table()
    blank = classes == table[0x20]
    line_break = (classes == table[0x0A]) | (classes == table[0x0D])
    # other: a run starts a piece unless a blank before it joins ( ?[^\s\p{L}\p{N}]++)
    other_starts = other.copy()
    np.greater(other[1:], other[:-1] | blank[:-1], out=other_starts[1:])
    # letters: a run starts a piece unless one non-letter, non-number, non-line-break character that starts a
    # piece itself comes first ([^\r\n\p{L}\p{N}]?+\p{L}++): whitespace (the last of its run always starts a
    # piece) or an "other" run of one character
    letter = kind == LETTER
    starts = letter.copy()
    np.greater(letter[1:], _flag(classes[:-1], JOINS_LETTERS) | other_starts[:-1], out=starts[1:])
    starts |= other_starts
    # whitespace: each run starts a piece ...
    starts[0] |= space[0]
    starts[1:] |= space[1:] > space[:-1]
    # ... and so does its last character before a non-space, unless a line break (which ends \s*[\r\n])
    starts[:-1] |= (space[:-1] > space[1:]) > line_break[:-1]
    rare = np.flatnonzero(classes & (NUMBER | LINE_BREAK | APOSTROPHE))
    rare_classes = classes[rare]
    digits = rare[(rare_classes & NUMBER) != 0]
    if len(digits):
        # digits: groups of three from the run's start (\p{N}{1,3}+)
        index = np.arange(len(digits))
        run_first = np.maximum.accumulate(np.where(_run_firsts(digits), index, 0))
        starts[digits[(index - run_first) % 3 == 0]] = True
    breaks = rare[(rare_classes & LINE_BREAK) != 0]
    if len(breaks):
        # \s*[\r\n] ends at the last line break of a whitespace run: the whitespace after it starts a piece
        after = breaks[:-1] + 1 if breaks[-1] == n - 1 else breaks + 1
        after = after[classes[after] & (SPACE | LINE_BREAK) == SPACE]
        ends = _run_ends(space > line_break, after)
        closed = ends < n  # (a run at the end of the text is one piece: see below)
        after, ends = after[closed], ends[closed]
        starts[after[~line_break[ends]]] = True
    if space[-1]:
        # whitespace at the end of the text is one piece (\s++$): no cut inside it after its first character
        starts[_final_run_start(space) + 1 :] = False
    if len(breaks):
        # an "other" run takes the line breaks right after it ([\r\n]*+): the whitespace starts after them
        new_run = _run_firsts(breaks)
        firsts = breaks[new_run]
        lasts = breaks[np.append(new_run[1:], True)]
        taken = (firsts > 0) & other[np.maximum(firsts - 1, 0)]
        firsts, lasts = firsts[taken], lasts[taken]
        starts[firsts] = False
        after = lasts + 1
        after = after[after < n]
        starts[after[space[after]]] = True
    apostrophes = rare[(rare_classes & APOSTROPHE) != 0]
    _apply_contractions(code_points, starts, apostrophes[other_starts[apostrophes]], ignore_case=True)
    return starts


def _run_firsts(positions: np.ndarray) -> np.ndarray:
    """For ascending ``positions``: which of them begin a run of consecutive positions."""
    firsts = np.ones(len(positions), bool)
    np.not_equal(positions[1:], positions[:-1] + 1, out=firsts[1:])
    return firsts


def _run_ends(inside: np.ndarray, begin: np.ndarray) -> np.ndarray:
    """For positions ``begin`` where ``inside`` is true: where the run of true there ends (exclusive).

    Looks ahead in windows that double in width, so the work stays within a few passes over the text even when
    many runs are long (the runs of different ``begin`` do not overlap).
    """
    n = len(inside)
    ends = np.empty(len(begin), np.int64)
    todo = np.arange(len(begin))
    at = begin.astype(np.int64)
    width = 8
    while len(todo):
        window = at[:, None] + np.arange(width)
        in_run = inside[np.minimum(window, n - 1)] & (window < n)
        first_out = np.argmin(in_run, axis=1)
        found = ~in_run[np.arange(len(todo)), first_out]
        ends[todo[found]] = at[found] + first_out[found]
        todo, at = todo[~found], at[~found] + width
        width *= 2
    return ends


def _final_run_start(flags: np.ndarray) -> int:
    """Where the run of true at the end of ``flags`` begins (looking back in growing steps, not at all of it)."""
    n = len(flags)
    width = 64
    while True:
        tail_from = max(n - width, 0)
        outside = np.flatnonzero(~flags[tail_from:])
        if len(outside):
            return tail_from + int(outside[-1]) + 1
        if tail_from == 0:
            return 0
        width *= 4


_SPLITTERS = {GPT2_PATTERN: _gpt2_starts, R50K_PATTERN: _gpt2_starts, CL100K_PATTERN: _cl100k_starts}
