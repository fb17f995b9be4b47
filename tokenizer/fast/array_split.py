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
    >>> piece_starts(code_points, O200K_PATTERN).tolist()  # ... it's| |202|4|!
    [0, 5, 11, 12, 17, 18, 21, 22]

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

Llama 3 (:data:`tokenizer.patterns.LLAMA3_PATTERN`, cl100k's without ``\\s++$``): cl100k's rules but the one for the
end of the text, whose whitespace run is cut after its last line break as a run inside the text is.

o200k (a word is ``[^\\r\\n\\p{L}\\p{N}]?`` then upper-case-set characters ``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*``
then lower-case-set ones ``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+`` and a contraction ``(?i:'s|...)?``, or the same with
``+`` and ``*`` swapped; then ``\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+``), with a
class table of its own (upper case Lu Lt, lower case Ll, caseless Lm Lo, marks, numbers, whitespace, CR and LF,
U+0020, "/", the apostrophe):

- a run of word characters (letters, and marks after a letter), numbers, whitespace or "other" starts a piece,
  and so does the last whitespace before a non-space unless a line break; a whitespace character that is not
  CR or LF, or an "other" run of one character not after a blank, lends itself to a word right after it; a
  blank lends itself to an "other" run right after it;
- case, inside a run of word characters: an upper-case letter starts a word after a lower-case one; after a
  caseless one (Lm, Lo, a mark) it does if the word is in its lower-case part already (the last letter before
  that is not caseless is lower case), or if only upper-case letters follow to the end of the run (the first
  alternative gives back to its last caseless character; the second takes the rest);
- a contraction right after a word is the word's; the letters after it start a new word, in its upper-case part;
- numbers in threes from the run's start; after a whitespace run's last line break (``\\s*[\\r\\n]+``), the
  rest of the run starts a piece;
- ``[\\r\\n/]*``: in a run of CR, LF and "/", everything from its first CR or LF that follows an "other"
  character (a "/" of the run counts) belongs to that punctuation's piece, and the character after the run
  starts a piece afresh (a "/" taken lends itself to nothing).

Where o200k's decisions chain, the rules stop and the regex takes over. A mark is a word character and "other"
both: one that does not follow a letter or mark may be a word's first character, its prefix, or punctuation
that ``[\\r\\n/]*`` then runs on from; one after a contraction starts a piece; and contractions in a chain
(``x'll'll's``) alternate. For each such position, the text between the nearest two of :mod:`tokenizer.cuts`'
safe cuts around it (its two-character rule, tested only near those positions) is split by
:meth:`Pretokenizer.split <tokenizer.pretokenize.Pretokenizer.split>` and its starts spliced in: exact, since a
segment between safe cuts splits as it would alone, and the rules never look across a cut. Real text has few
(:func:`hard_segments` lists them); text of rare material may have thousands, so they are split in one call,
joined by a separator that makes safe cuts on both sides (:data:`SEPARATOR`).

Every rule that concerns few positions (digits, line breaks, apostrophes) runs on the compressed array of those
positions; the whole-text passes are a table look-up and a dozen or two byte-wide comparisons. The class tables
(one byte per code point, tiktoken's Unicode 16.0 classes from :mod:`tokenizer.fast.unicode16`) are built on first
use and kept.

What this module does not do: make the pieces (``text[a:b]`` from the starts is the caller's), run BPE, or know
any pattern but OpenAI's: :func:`piece_starts` returns ``None`` for any other, and the caller splits with
:mod:`tokenizer.pretokenize`. It does not stay fast on text made of what o200k's rules leave to the regex
(marks after punctuation, say): that is exact, at the regex's speed. Lone surrogates must be handled before
(``"utf-32-le"`` refuses them).
"""

from __future__ import annotations

from functools import cache, partial

import numpy as np

from ..patterns import CL100K_PATTERN, GPT2_PATTERN, KNOWN_PATTERNS, O200K_PATTERN, UNKNOWN_PATTERN
from .stdlib_patterns import BMP_END, code_point_runs, compile_fast

CODE_POINTS = 0x110000

# The ends of texts split alone (piece_starts_of_texts) are grouped into distinct ones as rows of this many code
# points: wider than nearly every end of real text.
DISTINCT_ROW_CHARS = 16
# Odd 64-bit weights, one a column, that hash those rows: multiples of 2**64 divided by the golden ratio.
_ROW_WEIGHTS = np.arange(1, DISTINCT_ROW_CHARS + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)

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


# o200k's class byte: the kind in the two low bits (0 "other", 1 word, 2 number, 3 whitespace), details above
# them, and RARE on the classes few positions have (found with one comparison). Each value below is one
# class, so one comparison finds it.
OTHER, WORD, NUMBER_KIND, SPACE_KIND = 0, 1, 2, 3
RARE = 128
UPPER = WORD | 4  # Lu, Lt: o200k's upper-case set only
LOWER = WORD | 8  # Ll: its lower-case set only
CASELESS = WORD | 16  # Lm, Lo: both sets
MARK = WORD | 32 | RARE  # M: both sets, and "other" too (taken as part of a word: see _o200k_starts)
DIGIT = NUMBER_KIND | RARE  # any \p{N}
LINE = SPACE_KIND | RARE  # CR, LF
BLANK_SPACE = SPACE_KIND | 64  # U+0020
SLASH = OTHER | 4 | RARE  # "/", which [\r\n/]* takes after punctuation
QUOTE = OTHER | 64 | RARE  # the apostrophe
IN_BOTH_CASES = 16 | 32  # the bits of CASELESS and MARK
IN_A_CASE_SET = 8 | IN_BOTH_CASES  # LOWER's too (a bit no other class sets)


@cache
def o200k_class_table() -> np.ndarray:
    """``uint8[0x110000]``: each code point's o200k class (one of the values above; tiktoken's Unicode 16.0)."""
    table = np.full(CODE_POINTS, OTHER, np.uint8)
    for name, value in (("White_Space", SPACE_KIND), ("N", DIGIT), ("Lu", UPPER), ("Lt", UPPER), ("Ll", LOWER),
                        ("Lm", CASELESS), ("Lo", CASELESS), ("M", MARK)):
        for first, last in code_point_runs(name):
            table[first : last + 1] = value
    table[[0x0A, 0x0D]] = LINE
    table[0x20] = BLANK_SPACE
    table[ord("/")] = SLASH
    table[ord("'")] = QUOTE
    table.flags.writeable = False
    return table


def has_array_split(pat_str: str) -> bool:
    """Does :func:`piece_starts` know ``pat_str``? (Those :data:`tokenizer.patterns.KNOWN_PATTERNS` gives rules.)"""
    return _splitter(pat_str) is not None


def _splitter(pat_str: str):
    """``(its class table, its rules)`` for ``pat_str``, or None if it has no array rules."""
    return _SPLITTERS.get(KNOWN_PATTERNS.get(pat_str, UNKNOWN_PATTERN).array_rules)


def piece_starts(code_points: np.ndarray, pat_str: str) -> np.ndarray | None:
    """``int64`` ascending positions (code point indices) where each pre-token starts; ``[0, ...]`` for non-empty
    text, empty for empty text; ``None`` if ``pat_str`` has no array form (the caller then uses the regex split).

    ``code_points`` is ``np.frombuffer(text.encode("utf-32-le"), np.uint32)``.
    """
    splitter = _splitter(pat_str)
    if splitter is None:
        return None
    if len(code_points) == 0:
        return np.zeros(0, np.int64)
    table, starts_of = splitter
    return np.flatnonzero(starts_of(code_points, classes_of(code_points, table()))).astype(np.int64, copy=False)


def piece_starts_of_texts(text: str, code_points: np.ndarray, firsts: np.ndarray, pat_str: str) -> np.ndarray | None:
    """The piece starts of several texts laid end to end as ``text`` (``code_points`` its code points), each
    text split alone: text ``i`` runs from ``firsts[i]`` to the next one's first (the last to the end); none is
    empty, the first begins at 0. ``None`` if ``pat_str`` has no array form.

    One array split runs over the whole, a short separator put before each text but the first (see
    :func:`_with_separators`): the separator ends every piece before it, so each text's pieces start where it
    starts and, since nothing in the patterns looks back, are its own from there on, but near its end: a text's
    end behaves as the end of the string only when it is one (its whitespace, a greedy run, a contraction reach
    into what follows). So what lies after a text's last safe cut (:mod:`tokenizer.cuts`: the split of ``a +
    b`` is ``split(a) + split(b)`` there, and the rule looks at two characters, both inside the text) is split
    by the regex alone, as is a text with no cut inside. Those ends are a few characters each."""
    splitter = _splitter(pat_str)
    if splitter is None:
        return None
    table, starts_of = splitter
    joined, separators = _with_separators(code_points, firsts)
    starts = np.delete(starts_of(joined, classes_of(joined, table())), separators)
    ends = np.append(firsts[1:], len(code_points))
    last_cuts = _safe_cuts_within(code_points, ends - 1, firsts, -1)
    # the ends split by the regex: after the last cut, or the whole text if it has none
    starts[_segment_positions(last_cuts, ends - last_cuts)] = False
    starts[_end_piece_starts(text, code_points, last_cuts, ends, pat_str)] = True
    return np.flatnonzero(starts).astype(np.int64, copy=False)


def _with_separators(code_points: np.ndarray, firsts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(joined, places)``: ``code_points`` with a separator before each of ``firsts`` but the first, and the
    places of the separators' code points in ``joined``.

    The separator makes a piece start at the character ``y`` after it, in every OpenAI pattern, whatever comes
    before it. Before whitespace it is a letter: a piece that holds a letter holds no whitespace after it (a
    contraction would need ``y`` to be an apostrophe). Before anything else it is a letter, then a line break:
    the letter ends any piece before the break (which only ever follows an "other" character or whitespace in a
    piece), and a piece that holds a line break goes on only with whitespace, or with "/" after punctuation, which
    the letter is not; no word takes a line break as its first character."""
    later = firsts[1:]
    # (o200k's classes, which the safe cuts read too, whatever the pattern: its kind says whitespace as the others)
    spaced = (o200k_class_table()[code_points[later]] & 3) == SPACE_KIND
    counts = np.where(spaced, 1, 2)
    at = np.repeat(later, counts)
    values = np.full(len(at), ord("\n"), np.uint32)
    values[np.cumsum(counts) - counts] = ord("a")
    return np.insert(code_points, at, values), at + np.arange(len(at))


def _end_piece_starts(text: str, code_points: np.ndarray, firsts: np.ndarray, ends: np.ndarray, pat_str: str):
    """Where the pieces of each end ``text[firsts[i]:ends[i]]``, split alone by the regex, start (places in
    ``text``). The ends of many texts repeat (".\\n", "!\\n"): each distinct one is split once."""
    kept, copy_of = _distinct_segments(code_points, firsts, ends - firsts)
    astral = bool((code_points[_segment_positions(firsts[kept], ends[kept] - firsts[kept])] >= BMP_END).any())
    counts, lengths = compile_fast(pat_str).piece_lengths_between(
        text, firsts[kept].tolist(), ends[kept].tolist(), astral=astral
    )
    counts, lengths = np.array(counts, np.int64), np.array(lengths, np.int64)
    # each piece's offset in its end: the lengths of the pieces before it there
    first_pieces = np.cumsum(counts) - counts
    offsets = np.cumsum(lengths) - lengths
    offsets -= np.repeat(offsets[first_pieces], counts)
    # every end takes the pieces of the distinct one it equals
    end_counts = counts[copy_of]
    end_of = np.repeat(np.arange(len(firsts)), end_counts)
    return firsts[end_of] + offsets[_segment_positions(first_pieces[copy_of], end_counts)]


def _distinct_segments(code_points: np.ndarray, firsts: np.ndarray, lengths: np.ndarray):
    """``(kept, copy_of)``: the indices of one of each distinct text among the segments of ``code_points`` at
    ``firsts``, ``lengths`` long, and for each segment the index in ``kept`` of the one it equals. Segments of up
    to ``DISTINCT_ROW_CHARS`` characters are compared as rows of their code points (padded with a value no code
    point has); a longer one, rare in texts' ends, is kept as it is."""
    short = np.flatnonzero(lengths <= DISTINCT_ROW_CHARS)
    long = np.flatnonzero(lengths > DISTINCT_ROW_CHARS)
    rows = np.full((len(short), DISTINCT_ROW_CHARS), CODE_POINTS, np.uint32)
    places = _segment_positions(firsts[short], lengths[short])
    row_of = np.repeat(np.arange(len(short)), lengths[short])
    rows[row_of, places - firsts[short][row_of]] = code_points[places]
    # rows grouped by a hash (uint64 arithmetic wraps), then checked whole against their group's first
    _, first_of, short_copy_of = np.unique(rows @ _ROW_WEIGHTS, return_index=True, return_inverse=True)
    if not (rows == rows[first_of[short_copy_of]]).all():  # two distinct rows, one hash: sort the rows' bytes
        whole_rows = rows.view(np.dtype((np.void, rows.itemsize * DISTINCT_ROW_CHARS))).ravel()
        _, first_of, short_copy_of = np.unique(whole_rows, return_index=True, return_inverse=True)
    copy_of = np.empty(len(firsts), np.int64)
    copy_of[short] = short_copy_of.ravel()
    copy_of[long] = len(first_of) + np.arange(len(long))
    return np.concatenate([short[first_of], long]), copy_of


def _safe_cuts_within(code_points: np.ndarray, begin: np.ndarray, limit: np.ndarray, step: int) -> np.ndarray:
    """For each of ``begin``: the first of ``begin``, ``begin + step``, ... short of ``limit`` (exclusive) where
    :mod:`tokenizer.cuts`' rule allows a cut, or ``limit`` if none; looked for in windows that double in width
    (from 8: most texts' ends are shorter). The rule is :func:`_is_cut`'s, on o200k's classes (they hold every
    class it asks about, for every pattern)."""
    table = o200k_class_table()
    todo = np.flatnonzero(begin * step < limit * step)
    last = len(code_points) - 1

    def look(window: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        valid = window * step < limit[rows][:, None] * step
        # the classes of the window's places and of the one before each, read once as width + 1 characters in
        # text order (a place clipped into the text is outside its row: its verdict is masked out)
        width = window.shape[1]
        span = (window[:, :1] - 1 if step > 0 else window[:, :1] - width) + np.arange(width + 1)
        classes = table[code_points[np.clip(span, 0, last, out=span)]]
        cuts = _cut_rule(classes[:, :-1], classes[:, 1:])
        return valid, valid & (cuts if step > 0 else cuts[:, ::-1])

    return _first_hits(limit.astype(np.int64, copy=True), todo, begin[todo].astype(np.int64), step, look, width=8)


def classes_of(code_points: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[code_points]``, a block at a time: NumPy turns the uint32 indices into a temporary array of
    int64, and a small one is reused from block to block where a whole text's would be fresh memory."""
    classes = np.empty(len(code_points), dtype=table.dtype)
    for start in range(0, len(code_points), _BLOCK):
        np.take(table, code_points[start : start + _BLOCK], out=classes[start : start + _BLOCK])
    return classes


_BLOCK = 1 << 16


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


def _cl100k_starts(code_points: np.ndarray, classes: np.ndarray, *, final_space_whole: bool = True) -> np.ndarray:
    """cl100k's rules; without ``final_space_whole``, Llama 3's (no ``\\s++$``: a whitespace run at the end of the
    text is cut after its last line break, as inside the text)."""
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
        if final_space_whole:
            closed = ends < n  # (a run at the end of the text is one piece: see below)
            after, ends = after[closed], ends[closed]
            starts[after[~line_break[ends]]] = True
        else:  # (a run that reaches the end of the text is the last piece, \s+(?!\S))
            starts[after[(ends == n) | ~line_break[np.minimum(ends, n - 1)]]] = True
    if space[-1] and final_space_whole:
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


def _o200k_starts(code_points: np.ndarray, classes: np.ndarray) -> np.ndarray:
    starts, hard_positions = _o200k_rule_starts(code_points, classes)
    if len(hard_positions):
        _split_segments(code_points, starts, _segments_around(classes, hard_positions))
    return starts


def _o200k_rule_starts(code_points: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The starts by o200k's rules, and the positions whose segments the rules cannot decide."""
    n = len(classes)
    kind = classes & 3
    starts = np.empty(n, bool)
    starts[0] = True
    # a run of word characters (letters and marks), numbers, whitespace or "other" starts a piece ...
    np.not_equal(kind[1:], kind[:-1], out=starts[1:])
    space = kind == SPACE_KIND
    lends = (classes & (RARE | 3)) == SPACE_KIND  # whitespace but CR and LF: may come before a word
    # ... and so does a whitespace run's last character before a non-space, unless a line break (\s+(?!\S))
    pair = np.empty(n - 1, bool)  # a rule about each character and the next
    np.greater(lends[:-1], space[1:], out=pair)
    starts[:-1] |= pair
    word = kind == WORD
    other = kind == OTHER
    blank = classes == BLANK_SPACE
    # an "other" character that starts a piece: not after another, nor after a blank (which takes it: " ?")
    lone = np.empty(n, bool)
    lone[0] = other[0]
    np.greater(other[1:], other[:-1] | blank[:-1], out=lone[1:])
    # one character that starts a piece and is neither a letter, number, CR nor LF is taken by the word after
    # it ([^\r\n\p{L}\p{N}]?): a whitespace one, or an "other" run of one; a blank, by the "other" run after it
    lone |= lends  # (now: any character that lends itself to a word after it)
    np.logical_and(lone[:-1], word[1:], out=pair)
    pair |= blank[:-1] & other[1:]
    np.greater(starts[1:], pair, out=starts[1:])
    # case: an upper-case letter after a lower-case one starts a word; after a caseless one (Lm, Lo, a mark),
    # see below
    upper = classes == UPPER
    np.not_equal(classes[:-1] & IN_A_CASE_SET, 0, out=pair)
    pair &= upper[1:]
    after_cased = np.flatnonzero(pair) + 1
    after_lower = classes[after_cased - 1] == LOWER
    starts[after_cased[after_lower]] = True
    rare = np.flatnonzero(classes >= RARE)
    rare_classes = classes[rare]
    hard = [rare[rare_classes == MARK]]  # positions whose segment the regex splits (see below)
    digits = rare[rare_classes == DIGIT]
    if len(digits):
        # \p{N}{1,3}: groups of three from the run's start
        index = np.arange(len(digits))
        run_first = np.maximum.accumulate(np.where(_run_firsts(digits), index, 0))
        starts[digits[(index - run_first) % 3 == 0]] = True
    breaks = rare[rare_classes == LINE]
    if len(breaks):
        # \s*[\r\n]+ ends at the last line break of a whitespace run: the whitespace after it starts a piece
        after = breaks + 1
        after = after[after < n]
        after = after[lends[after]]
        ends = _run_ends(lends, after)
        last = ends == n
        last[~last] = classes[ends[~last]] != LINE
        starts[after[last]] = True
    quotes = rare[rare_classes == QUOTE]
    quotes = quotes[(quotes > 0) & (kind[quotes - 1] == WORD)]
    contraction_ends = np.zeros(0, np.int64)
    if len(quotes):
        # a contraction right after a word is the word's: (?i:'s|'t|'re|'ve|'m|'ll|'d)?
        length = _contraction_lengths(code_points, quotes, ignore_case=True)
        quotes, length = quotes[length > 0], length[length > 0]
        starts[quotes] = False
        starts[quotes + 1] = False
        starts[(quotes + 2)[length == 3]] = False
        contraction_ends = quotes + length
        inside = contraction_ends < n
        starts[contraction_ends[inside]] = True
        # a contraction right after another is not (no word ends there): a chain is left to the regex
        hard.append(quotes[inside][classes[contraction_ends[inside]] == QUOTE])
    # case: an upper-case letter after a caseless one (Lm, Lo, a mark) starts a word if the word is in its
    # lower-case part ([\p{Ll}...]+ ends), or if only upper-case letters follow to the end of the word run: the
    # first alternative gives back to its last caseless character, the second takes the rest
    after_caseless = after_cased[~after_lower]
    if len(after_caseless):
        caseless_from = _run_starts((classes & IN_BOTH_CASES) != 0, after_caseless - 1)
        lower_part = (caseless_from > 0) & (classes[np.maximum(caseless_from - 1, 0)] == LOWER)
        if len(contraction_ends):
            # a word that starts after a contraction starts in its upper-case part
            latest = np.searchsorted(contraction_ends, after_caseless - 1, side="right") - 1
            lower_part &= ~((latest >= 0) & (contraction_ends[np.maximum(latest, 0)] >= caseless_from))
        upper_to = _run_ends(upper, after_caseless)
        upper_to_end = upper_to == n
        upper_to_end[~upper_to_end] = kind[upper_to[~upper_to_end]] != WORD
        starts[after_caseless[lower_part | upper_to_end]] = True
    tail = rare[(rare_classes == LINE) | (rare_classes == SLASH)]
    if len(tail):
        # " ?[^\s\p{L}\p{N}]+[\r\n/]*": the run of CR, LF and "/" after punctuation, from its first CR or LF
        # after an "other" character (a "/" of the run counts), belongs to the punctuation's piece
        new_run = _run_firsts(tail)
        run_of = np.cumsum(new_run) - 1
        opens = (classes[tail] == LINE) & (tail > 0) & (kind[np.maximum(tail - 1, 0)] == OTHER)
        open_at = np.flatnonzero(opens)
        first_open = np.ones(len(open_at), bool)
        first_open[1:] = run_of[open_at[1:]] != run_of[open_at[:-1]]
        opened = run_of[open_at[first_open]]
        taken_from = np.full(int(run_of[-1]) + 1, len(tail))
        taken_from[opened] = open_at[first_open]
        starts[tail[np.arange(len(tail)) >= taken_from[run_of]]] = False
        after = tail[np.append(new_run[1:], True)][opened] + 1
        after = after[after < n]
        starts[after] = True
        # what follows starts afresh: an "other" character there is its own run's first (the "/" before it taken)
        prefix = after[(classes[after - 1] == SLASH) & other[after] & (after + 1 < n)]
        starts[prefix[word[prefix + 1]] + 1] = False
    hard_positions = np.concatenate(hard)
    return starts, hard_positions[_hard(classes, kind, hard_positions)]


def _hard(classes: np.ndarray, kind: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Which of ``positions`` (marks, and quotes of chained contractions) the rules above cannot decide: a mark
    that does not follow a letter or mark (it may then be a word's first character, a word's prefix, or part of
    punctuation), or follows a contraction's letters; every chained contraction."""
    before = np.maximum(positions - 1, 0)
    hard = (positions == 0) | (kind[before] != WORD) | (classes[positions] == QUOTE)
    for back in (2, 3):
        hard |= (positions >= back) & (classes[np.maximum(positions - back, 0)] == QUOTE)
    return hard


def _is_cut(classes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """tokenizer.cuts' rule at positions ``at`` (1 <= at < len): may the text be cut just before each?"""
    return _cut_rule(classes[at - 1], classes[at])


def _cut_rule(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """tokenizer.cuts' rule on o200k's classes: may text be cut between a character of class ``x`` and one of
    class ``y``?"""
    x_kind, y_kind = x & 3, y & 3
    word_cut = (((x_kind == WORD) & (x != MARK)) | (x_kind == NUMBER_KIND)) & (
        ((y_kind == OTHER) & (y != QUOTE)) | (y_kind == SPACE_KIND)
    )
    space_cut = (x_kind != SPACE_KIND) & (y_kind == SPACE_KIND) & (y != LINE)
    return word_cut | space_cut


def _nearest_cut(classes: np.ndarray, begin: np.ndarray, step: int) -> np.ndarray:
    """For each of ``begin``: the first cut at ``begin``, ``begin + step``, ... (0 or len if none), in windows
    that double in width."""
    n = len(classes)

    def look(window: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        valid = (window > 0) & (window < n)
        hit = np.zeros(window.shape, bool)
        hit[valid] = _is_cut(classes, window[valid])
        return valid, hit

    found_at = np.full(len(begin), 0 if step < 0 else n, np.int64)
    return _first_hits(found_at, np.arange(len(begin)), begin.astype(np.int64), step, look)


def _first_hits(
    found_at: np.ndarray, todo: np.ndarray, at: np.ndarray, step: int, look, width: int = 16
) -> np.ndarray:
    """The search both cut finders share: from each ``at`` (the rows ``todo`` of ``found_at``), places ``at``,
    ``at + step``, ... in windows that double in width from ``width``; ``look(window, rows)`` gives which places
    are valid and which are cuts. The first cut of a row is written to ``found_at``; a row whose window runs past
    its valid places keeps what ``found_at`` held."""
    while len(todo):
        window = at[:, None] + step * np.arange(width)
        valid, hit = look(window, todo)
        first = np.argmax(hit, axis=1)
        rows = np.arange(len(todo))
        found = hit[rows, first]
        found_at[todo[found]] = window[rows[found], first[found]]
        going = ~found & valid[:, -1]
        todo, at = todo[going], at[going] + step * width
        width *= 2
    return found_at


def hard_segments(code_points: np.ndarray) -> np.ndarray:
    """``int64[k, 2]``: the ``[start, end)`` of each segment (text between two of :mod:`tokenizer.cuts`' cuts)
    that :func:`piece_starts` splits with the regex for o200k, not by its rules (for measuring and testing)."""
    if len(code_points) == 0:
        return np.zeros((0, 2), np.int64)
    classes = classes_of(code_points, o200k_class_table())
    return _segments_around(classes, _o200k_rule_starts(code_points, classes)[1])


def _segments_around(classes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The distinct segments between cuts that hold ``positions``, as ``[start, end)`` rows."""
    positions = np.unique(positions)
    firsts = _nearest_cut(classes, positions, -1)
    ends = _nearest_cut(classes, positions + 1, 1)
    firsts, index = np.unique(firsts, return_index=True)
    return np.stack([firsts, ends[index]], axis=1)


# Put between two segments when they are split in one regex call: it begins with a space (a space after what
# ends a segment, never whitespace, is a safe cut) and ends with a letter (before what begins a segment, an
# "other" character or whitespace, a safe cut too). So each segment splits as it would alone, and the
# separator is one piece of its own.
SEPARATOR = " a"


def _split_segments(code_points: np.ndarray, starts: np.ndarray, segments: np.ndarray) -> None:
    """Set ``starts`` in each ``[first, end)`` of ``segments`` (ascending, apart) by the regex.

    One call for all of them, not one each (text of rare material can have thousands): the segments are
    joined with :data:`SEPARATOR` between them. A segment is text between two of :mod:`tokenizer.cuts`' safe
    cuts (or the text's ends), and so splits alone: ``split(a + b) == split(a) + split(b)`` at a safe cut. A
    segment ends with a character that is not whitespace (what comes before a cut), unless it ends the text;
    it begins with an "other" character or whitespace (what comes after one), unless it begins the text. So
    in ``a + SEPARATOR + b`` both joins are safe cuts; the first segment may begin the text and the last end
    it, and no separator goes before the first or after the last."""
    firsts, ends = segments[:, 0], segments[:, 1]
    lengths = ends - firsts
    gap = len(SEPARATOR)
    # where each segment begins in the joined text
    joined_firsts = np.cumsum(lengths + gap) - (lengths + gap)
    positions = np.full(int(lengths.sum()) + gap * (len(lengths) - 1), ord(SEPARATOR[-1]), np.uint32)
    positions_in_segments = _segment_positions(joined_firsts, lengths)
    positions[positions_in_segments] = code_points[_segment_positions(firsts, lengths)]
    positions[joined_firsts[1:] - gap] = ord(SEPARATOR[0])  # (SEPARATOR: a space, then a letter)
    joined = positions.tobytes().decode("utf-32-le", "surrogatepass")
    piece_lengths = np.fromiter(map(len, compile_fast(O200K_PATTERN).split(joined)), np.int64)
    joined_starts = np.cumsum(piece_lengths) - piece_lengths
    # back to the text: a piece start in a segment is a start there; the separators' starts are dropped
    segment = np.searchsorted(joined_firsts, joined_starts, side="right") - 1
    offset = joined_starts - joined_firsts[segment]
    inside = offset < lengths[segment]
    starts[_segment_positions(firsts, lengths)] = False
    starts[firsts[segment[inside]] + offset[inside]] = True


def _segment_positions(firsts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Every position of the segments that begin at ``firsts``, ``lengths`` long, one segment after another."""
    segment_begins = np.cumsum(lengths) - lengths
    return np.repeat(firsts - segment_begins, lengths) + np.arange(int(lengths.sum()))


def _run_starts(inside: np.ndarray, last: np.ndarray) -> np.ndarray:
    """For positions ``last`` where ``inside`` is true: where the run of true there begins (looking back in
    windows that double in width, as :func:`_run_ends`)."""
    found_at = np.empty(len(last), np.int64)
    todo = np.arange(len(last))
    at = last.astype(np.int64)
    width = 8
    while len(todo):
        window = at[:, None] - np.arange(width)
        in_run = inside[np.maximum(window, 0)] & (window >= 0)
        first_out = np.argmin(in_run, axis=1)
        found = ~in_run[np.arange(len(todo)), first_out]
        found_at[todo[found]] = at[found] - first_out[found] + 1
        todo, at = todo[~found], at[~found] - width
        width *= 2
    return found_at


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


# the name of a pattern's rules (tokenizer.patterns.KNOWN_PATTERNS) -> (its class table, its rules); the table is
# looked up through the module (tests may swap it)
_SPLITTERS = {
    "gpt2": (lambda: class_table(), _gpt2_starts),
    "cl100k": (lambda: class_table(), _cl100k_starts),
    "llama3": (lambda: class_table(), partial(_cl100k_starts, final_space_whole=False)),
    "o200k": (lambda: o200k_class_table(), _o200k_starts),
}
