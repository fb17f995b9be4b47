"""Where text may be cut without changing its pre-tokens: ``split(a + b) == split(a) + split(b)``.

Streaming (:mod:`tokenizer.streaming`), encoding a file in parallel (:mod:`tokenizer.jobs.dataset`) and counting a
training file in parallel (:mod:`tokenizer.training.chunks`) all cut text into chunks and split each chunk alone. That
is exact only at a *safe cut*. This module is the one place that says where those are, for OpenAI's patterns
(:data:`tokenizer.patterns.OPENAI_PATTERNS`, and the others :data:`tokenizer.patterns.KNOWN_PATTERNS` declares
so), as text (:func:`safe_cuts`) and as UTF-8 bytes (:func:`safe_byte_cuts`).

The rule looks at two characters only: ``x`` just before the cut and ``y`` just after it. A cut is safe when

* (word)  ``x`` is a letter or a digit, and ``y`` is not a letter, digit, combining mark or apostrophe:
  ``"word|,"``, ``"3| "``, ``"é|\\n"``; or
* (space) ``x`` is not whitespace, and ``y`` is whitespace other than ``"\\r"`` and ``"\\n"``: ``"!| x"``,
  ``"a|\\t"``.

    >>> from tokenizer.patterns import GPT2_PATTERN
    >>> text = "Hi, it's 2024!\\n"
    >>> [text[:c] for c in safe_cuts(text, pattern=GPT2_PATTERN)]
    ['Hi', 'Hi,', "Hi, it's", "Hi, it's 2024"]

Why this is safe. A pattern is an alternation of *elements* — character classes with quantifiers, literals —
and two look-aheads, ``(?!\\S)`` and ``$``. ``findall`` scans left to right: at position ``p`` it tries the
alternatives in order, keeps the first that matches, ``p:q``, and goes on at ``q``. Now read the four patterns
and list what an element may take right after an element that took a character that is not whitespace:

* after a letter, digit or mark: more letters, digits or marks, or an apostrophe (o200k's ``'s``, ``'ll``...);
* after any other character that is not whitespace: more of those, ``"\\r"`` or ``"\\n"`` (cl100k's and o200k's
  punctuation runs), ``"/"`` (o200k), letters and marks (cl100k's and o200k's word may start with one
  non-letter: ``"$word"``).

A (word) cut's ``y`` is not in the first list, and a (space) cut's ``y``, whitespace other than ``"\\r"`` and
``"\\n"``, is in neither. The look-aheads only ever stand after whitespace, so they are never checked at the
cut (``x`` is not whitespace). So:

1. A match attempt that starts before the cut reads ``y`` at most to find that it cannot take it — exactly
   what happens at the end of the string. It behaves in ``a + b`` as in ``a`` alone: the same alternatives
   fail, the same one matches, and no match runs across the cut. The scan of ``a + b`` gives ``split(a)`` and
   arrives exactly at the cut.
2. From the cut on, nothing looks back (no look-behind, no ``^``, no ``\\b``), and ``$`` is the end of ``b``,
   which is the end of ``a + b``. The rest of the scan gives ``split(b)``.

Equal pieces give equal ids, since BPE runs inside each piece. ``tests/test_cuts.py`` checks the rule for
every pattern on random and real text. A new pattern would break it if one of its pieces could hold a letter
followed by punctuation, or a non-space character followed by a space.

Two details. *Letters* are letters to tiktoken, whose Unicode tables are older than the ``regex`` package's:
the characters in :data:`tokenizer.patterns.NEWER_THAN_TIKTOKEN` count as no letter for ``x``, and no cut is
made before one (``regex`` sees it as a letter, which only means fewer cuts). And the bytes form decodes with
``surrogateescape``, which turns every byte that is not part of valid UTF-8 (a character cut in two at the
edge of a buffer, or a broken file) into one character U+DC80..U+DCFF; those are neither ``x`` nor ``y``, so a
byte cut always lies between two whole, valid characters.

Not safe, and why: before the last ``"\\n"`` of ``"a  \\n"`` (``x`` is whitespace: r50k's ``\\s++$`` takes the
whole run at the end of a string), ``"!|\\n"`` (cl100k's ``[\\r\\n]*`` adds newlines to punctuation),
``"\\r|\\n"``, ``"e|\\u0301"`` (o200k keeps marks in words), ``"don|'t"`` (o200k keeps ``'t`` with the word).

Special tokens are cut out of the text before pre-tokenization, so a cut is also safe just before a special
token that will be treated as special; and a byte cut never falls inside any special token, so a token stays
whole to be recognized (or, if disallowed, rejected).

What this module does not do: know any other pattern — for a pattern of one's own :func:`has_safe_cuts` is
false and the functions here offer no cut from the rule; choose chunk sizes or read files (the callers do);
look at BPE or ids. Callers may use any subset of the cuts: :func:`next_newline_cut` and
:func:`last_newline_cut` offer only the cheapest kind to find (an ASCII letter or digit before ``"\\n"``).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Iterator

import regex

from .patterns import KNOWN_PATTERNS, NEWER_CLASS, OPENAI_PATTERNS, WHITESPACE_CLASS

_COVERED = frozenset(pattern for pattern, known in KNOWN_PATTERNS.items() if known.safe_cuts)

# The rule, as zero-width matches at the cuts. \udc80-\udcff: bytes that are not UTF-8 (see the docstring).
_LETTER_OR_DIGIT = rf"[[\p{{L}}\p{{N}}]--[{NEWER_CLASS}]]"  # to tiktoken
_NOT_IN_A_WORD = r"[^\p{L}\p{N}\p{M}'\udc80-\udcff]"
_NOT_WHITESPACE = rf"[^{WHITESPACE_CLASS}\udc80-\udcff]"
_SPACE_NOT_NEWLINE = rf"[[{WHITESPACE_CLASS}]--[\r\n]]"
_RULE = rf"(?<={_LETTER_OR_DIGIT})(?={_NOT_IN_A_WORD})|(?<={_NOT_WHITESPACE})(?={_SPACE_NOT_NEWLINE})"
_SAFE_CUT = regex.compile("(?V1)" + _RULE)
_SAFE_CUT_FROM_THE_END = regex.compile("(?rV1)" + _RULE)

# The newline kind: an ASCII letter or digit (one in every Unicode version) before "\n" (the cut is at the end).
_NEWLINE_CUT = re.compile(r"[A-Za-z0-9](?=\n)")
_ASCII_LETTER_OR_DIGIT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


def has_safe_cuts(pattern: str) -> bool:
    """Does the rule hold for ``pattern``? True for OpenAI's patterns, false for any other.

    >>> all(map(has_safe_cuts, OPENAI_PATTERNS)), has_safe_cuts(r"\\w+|\\W")
    (True, False)
    """
    return pattern in _COVERED


def safe_cuts(text: str, start: int = 0, *, pattern: str, reverse: bool = False) -> Iterator[int]:
    """The safe cuts ``c`` of ``text`` with ``start <= c``, in ascending order (descending with ``reverse``).

    A cut ``c`` means ``text[:c] | text[c:]``; ``0`` and ``len(text)`` are never offered. A ``pattern`` that
    :func:`has_safe_cuts` does not cover gets none.

    >>> from tokenizer.patterns import CL100K_PATTERN
    >>> list(safe_cuts("ab, cd", pattern=CL100K_PATTERN))
    [2, 3]
    >>> list(safe_cuts("ab, cd", 3, pattern=CL100K_PATTERN, reverse=True))
    [3]
    """
    return _rule_cuts(text, start, reverse) if pattern in _COVERED else iter(())


def _rule_cuts(text: str, start: int, reverse: bool) -> Iterator[int]:
    if not reverse:
        return (m.start() for m in _SAFE_CUT.finditer(text, start))
    # Searching from the end, a match at `start` itself is only seen when the search may begin before it.
    cuts = (m.start() for m in _SAFE_CUT_FROM_THE_END.finditer(text, max(start - 1, 0)))
    return _while_at_least(start, cuts)


def _while_at_least(start: int, descending: Iterator[int]) -> Iterator[int]:
    for c in descending:
        if c < start:
            return
        yield c


def next_newline_cut(text: str, pos: int) -> int:
    """The first newline cut after ``pos`` (``len(text)`` if there is none): just after an ASCII letter or digit
    that stands at ``pos`` or later and just before ``"\\n"``. A subset of the safe cuts, quick to find.

    >>> next_newline_cut("a\\n!\\nb\\nc", 1)
    5
    """
    m = _NEWLINE_CUT.search(text, pos)
    return m.end() if m else len(text)


def last_newline_cut(text: str, end: int, lo: int) -> int:
    """The last newline cut ``c`` with ``lo < c <= end`` (``lo`` if there is none).

    >>> last_newline_cut("a\\n!\\nb\\nc", 6, 0), last_newline_cut("!\\n", 1, 0)
    (5, 0)
    """
    j = text.rfind("\n", lo, end + 1)
    while j > lo:
        if text[j - 1] in _ASCII_LETTER_OR_DIGIT:
            return j
        j = text.rfind("\n", lo, j)
    return lo


def safe_byte_cuts(
    data: bytes,
    start: int = 0,
    *,
    pattern: str,
    reverse: bool = False,
    special_tokens: Collection[bytes] = (),
    split_at: Collection[bytes] = (),
    starts_whole: bool = True,
    ends_whole: bool = False,
) -> Iterator[int]:
    """The safe cuts ``c`` of UTF-8 ``data`` with ``start <= c``, as byte offsets, ascending (or descending).

    ``data`` may be a window into a longer text. A cut never falls inside a character, nor inside an occurrence
    of any of ``special_tokens``; besides the rule's cuts (none for a ``pattern`` it does not cover), a cut is
    offered just before each occurrence of a token in ``split_at`` (those treated as special). Pass
    ``starts_whole=False`` when text comes before ``data`` and ``ends_whole=False`` when text may follow it: a
    cut is then only offered where every special token that could cover it lies wholly inside ``data``.

    >>> from tokenizer.patterns import O200K_PATTERN
    >>> data = "é, x<|e|>y".encode()
    >>> list(safe_byte_cuts(data, pattern=O200K_PATTERN, special_tokens=[b"<|e|>"], split_at=[b"<|e|>"]))
    [2, 3, 5]
    """
    tokens = {*special_tokens, *split_at}
    longest = max(map(len, tokens), default=0)
    lowest = start if starts_whole else max(start, longest - 1)
    highest = len(data) if ends_whole else len(data) - longest + 1

    def allowed(c: int) -> bool:
        # A token covering c would lie inside data[c - len + 1 : c + len - 1], which must be all there.
        return 0 < c < len(data) and lowest <= c <= highest and not any(
            data.find(t, max(c - len(t) + 1, 0), c + len(t) - 1) != -1 for t in tokens
        )

    kinds = [_token_starts(data, t, start, reverse) for t in split_at]
    if pattern in _COVERED:
        kinds.append(_rule_byte_cuts(data, start, longest, reverse))
    previous = None
    for c in heapq.merge(*kinds, reverse=reverse):
        if c != previous and allowed(c):
            yield c
        previous = c


def _rule_byte_cuts(data: bytes, start: int, longest: int, reverse: bool) -> Iterator[int]:
    """The rule's cuts in ``data`` at ``start`` or later, as byte offsets. Only the bytes from a little before
    ``start`` are decoded: a character cut in two there decodes to escapes, which block no cut at ``start``."""
    view = max(0, start - longest - 4)  # a character is at most 4 bytes
    text = data[view:].decode("utf-8", "surrogateescape")
    if len(text) == len(data) - view:  # one byte per character
        yield from (view + c for c in _rule_cuts(text, max(start - view, 0), reverse))
        return
    # Characters -> bytes: count the bytes between consecutive cuts, from the side the search starts at.
    char_at, byte_at = (len(text), len(data)) if reverse else (0, view)
    for c in _rule_cuts(text, 0, reverse):
        if reverse:
            byte_at -= len(text[c:char_at].encode("utf-8", "surrogateescape"))
            if byte_at < start:
                return
        else:
            byte_at += len(text[char_at:c].encode("utf-8", "surrogateescape"))
        char_at = c
        if byte_at >= start:
            yield byte_at


def _token_starts(data: bytes, token: bytes, start: int, reverse: bool) -> Iterator[int]:
    """Where ``token`` occurs in ``data`` at ``start`` or later, ascending (or descending)."""
    if reverse:
        i = data.rfind(token, start)
        while i != -1:
            yield i
            i = data.rfind(token, start, i + len(token) - 1)
    else:
        i = data.find(token, start)
        while i != -1:
            yield i
            i = data.find(token, i + 1)
