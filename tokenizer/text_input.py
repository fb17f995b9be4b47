"""The one input reader: bytes a user hands over (a file, standard input, a command-line argument) become text
by one rule, strict UTF-8, and a refusal is worded one way wherever it happens.

    read_stdin_text()                           # all of stdin, exactly as read (newlines, a final one included)
    say_if_typed()                              # on a terminal: how to end what is typed (read_stdin_text says it)
    read_utf8_file("essay.txt", what="--score essay.txt")
    argument_text(sys.argv[1], "TEXT")          # an argument, which the shell may have handed over as any bytes
    decode_utf8(data, "corpus.txt", offset=1 << 20)

The refusal names the input, the byte offset of the first invalid byte and the byte itself, then says what to do::

    corpus.txt is not valid UTF-8: byte 1000 is b'\\x89' (invalid start byte); convert it to UTF-8

Python hands a program the bytes of an argument that are not UTF-8 as lone surrogates (U+DC80..U+DCFF,
"surrogateescape"); encoding such a string would quietly turn them into U+FFFD. :func:`argument_text` refuses
them instead, as stdin and files are refused, so one input is never read two ways.

What this module does not do: cut files into chunks or read records (:mod:`tokenizer.jobs.inputs` and
:mod:`tokenizer.jobs.dataset` do, calling :func:`decode_utf8` on each piece), or offer a lenient reading of its
own: ``errors="replace"`` there is the caller's choice, made on purpose.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CONVERT = "convert it to UTF-8"


def decode_utf8(data: bytes, name: str, *, offset: int = 0, advice: str = CONVERT) -> str:
    """``data`` as text, strictly; ``ValueError`` naming ``name`` and the byte (counted from ``offset``, where
    ``data`` starts in the input) otherwise, followed by ``advice``.

    >>> decode_utf8(b"ok \\xff", "stdin")
    Traceback (most recent call last):
    ...
    ValueError: stdin is not valid UTF-8: byte 3 is b'\\xff' (invalid start byte); convert it to UTF-8
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name} is not valid UTF-8: byte {offset + e.start} is {data[e.start:e.start + 1]!r} "
                         f"({e.reason}); {advice}") from None


def read_stdin_text(name: str = "stdin") -> str:
    """All of standard input as text, exactly as read (on a terminal, after saying how to end it)."""
    say_if_typed()
    return decode_utf8(sys.stdin.buffer.read(), name)


def say_if_typed() -> None:
    """When standard input is a terminal, say on stderr that what follows is read from it and how to end it:
    a command reading ``-`` otherwise waits for an end of input that a person may not know to type."""
    try:
        typed = sys.stdin is not None and sys.stdin.isatty()
    except ValueError:  # stdin closed: the read that follows says so
        typed = False
    if typed:
        end = "Ctrl-Z then Enter" if os.name == "nt" else "Ctrl-D at the start of a line"
        print(f"reading stdin from the terminal: type the text, then {end} to end it (Ctrl-C to cancel)",
              file=sys.stderr, flush=True)


def read_utf8_file(path: str | os.PathLike, *, what: str | None = None, advice: str = CONVERT) -> str:
    """A whole file as text. ``what`` is how messages name it (default: its path); a file that cannot be read
    is an ``OSError`` naming it, one that is not UTF-8 a ``ValueError``."""
    what = what or os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise type(e)(f"cannot read {what}: {e.strerror or e}") from None
    return decode_utf8(data, what, advice=advice)


def argument_text(value: str, name: str) -> str:
    """A command-line argument as typed, or ``ValueError`` when the bytes it came as are not UTF-8.

    >>> argument_text("héllo", "TEXT")
    'héllo'
    >>> argument_text("ok \\udcff", "TEXT")
    Traceback (most recent call last):
    ...
    ValueError: TEXT is not valid UTF-8: byte 3 is b'\\xff' (invalid start byte); pass UTF-8 text
    """
    if not any("\udc80" <= c <= "\udcff" for c in value):
        return value
    try:
        data = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate outside the escape range: not from the shell, left to the API
        return value
    return decode_utf8(data, name, advice="pass UTF-8 text")
