"""The inputs of every file command: which files the user named, and the texts inside them.

    paths = find_inputs(["data/*.txt", "owt/", "more.jsonl.gz", "-"])    # "-": standard input
    for record in read_records(Path("owt/00.jsonl.gz"), text_field="text"):
        record.text, record.number, record.done                           # a document, its line, bytes read
        record.replaced, record.inserted    # errors="replace": its bytes not UTF-8, the U+FFFD it holds for them

``train``, ``encode-file``, ``encode-dataset``, ``parity``, ``count`` and ``stats`` all find and read their
inputs here, so they take the same names, read the same formats and report bad input in the same words.

Naming inputs (:func:`find_inputs`): a file is itself; a folder is every ``.txt``, ``.jsonl``, ``.jsonl.gz``
and ``.parquet`` file under it; a glob (``"data/*.txt"``, ``"owt/**/*.jsonl"``) is every file it matches; ``-``
is standard input. Folders and globs are sorted by name, the rest kept in the order given, each file once.
Every file is opened once before any work starts, so a missing or unreadable one stops the job first.

Formats, by extension (:func:`input_format`):

* ``.jsonl`` / ``.jsonl.gz``: one JSON object per line; each object is a document, its text in ``text_field``.
  Blank lines are no document; an empty text is one.
* ``.parquet``: one document per row, its text in the column ``text_field``, read a row group at a time.
  pyarrow is imported only when a parquet file is named (:data:`INSTALL_PYARROW`).
* anything else, and standard input: UTF-8 text, the whole file one text. Text files are not read here but
  by whoever cuts them into chunks (:func:`tokenizer.jobs.dataset.iter_chunks`), which decode each chunk with
  :func:`decode_utf8`.

Bad input raises ``ValueError`` whose message starts with the place, then says what is wrong and what to do::

    corpus.jsonl line 12: not JSON (Expecting value at column 1); a .jsonl file holds one JSON object per line
    corpus.jsonl line 12: no "text" field (its fields: "body", "id"); name the text's field with --text_field
    corpus.txt is not valid UTF-8: byte 1000 is b'\\x89' (invalid start byte); convert the file to UTF-8, ...

What this module does not do: tokenize, cut text into chunks, spread work over processes, or write anything
but the copy of standard input that a command reading its input twice asks for (:func:`stdin_as_file`).
"""

from __future__ import annotations

import codecs
import glob
import gzip
import json
import os
import shutil
import stat
import sys
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from .. import text_input
from ..extras import install_hint

STDIN = Path("-")
RECORD_FORMATS = {".jsonl.gz": "jsonl", ".jsonl": "jsonl", ".parquet": "parquet"}
FOLDER_SUFFIXES = (".txt", *RECORD_FORMATS)  # what a folder given as input is searched for
INSTALL_PYARROW = install_hint("distributed")
FIELD_ADVICE = "name the text's field with --text_field"


def is_stdin(path: str | os.PathLike) -> bool:
    return os.fspath(path) == "-"


def input_name(path: str | os.PathLike) -> str:
    """How messages name an input: its path as given, or ``stdin``; a copy made by :func:`stdin_as_file`, as the
    input it holds (never the temporary file, which is gone by the time a user reads the message)."""
    if is_stdin(path):
        return "stdin"
    return _COPIED_FROM.get(os.fspath(path), os.fspath(path))


_COPIED_FROM: dict[str, str] = {}  # the path of each live copy of standard input or a pipe -> the input's name


def input_format(path: str | os.PathLike) -> str:
    """``"jsonl"``, ``"parquet"`` or ``"text"`` by the name's extension.

    >>> input_format("owt/00.jsonl.gz"), input_format("a.parquet"), input_format("notes.md"), input_format("-")
    ('jsonl', 'parquet', 'text', 'text')
    """
    name = os.fspath(path)
    return next((fmt for ext, fmt in RECORD_FORMATS.items() if name.endswith(ext)), "text")


def input_stem(path: str | os.PathLike) -> str:
    """The file name without its format's extension: ``"data/00.jsonl.gz"`` -> ``"00"``, ``"a.txt"`` -> ``"a"``."""
    name = Path(path).name
    ext = next((ext for ext in (*RECORD_FORMATS, ".txt") if name.endswith(ext)), "")
    return name[: len(name) - len(ext)] or name


# ---- naming inputs ------------------------------------------------------------------------------------------


def find_inputs(names: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """The input files named by ``names`` (files, folders, globs, ``-``), in order, each once; ``-`` comes back
    as :data:`STDIN`.

    Raises ``FileNotFoundError`` for a missing file, a glob matching nothing or a folder holding no input,
    ``PermissionError`` for a file that cannot be read, ``ValueError`` when nothing is named or ``-`` twice,
    and ``ImportError`` (saying what to install) for a parquet file without pyarrow.

    >>> find_inputs(["no/such/*.jsonl"])
    Traceback (most recent call last):
    ...
    FileNotFoundError: no file matches 'no/such/*.jsonl'
    """
    if isinstance(names, (str, os.PathLike)):
        names = [names]
    found: list[Path] = []
    seen: set[Path] = set()
    for item in names:
        name = os.fspath(item)
        if is_stdin(name):
            if STDIN in found:
                raise ValueError("- (standard input) is named twice; it can be read only once")
            found.append(STDIN)
            continue
        for path in _expand(name):
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                _check_readable(path)
                found.append(path)
    if not found:
        raise ValueError("no input given: pass files, folders, globs, or - for standard input")
    if any(input_format(p) == "parquet" for p in found):
        import_pyarrow_parquet()  # missing pyarrow: said before any work
    return found


def _expand(name: str) -> list[Path]:
    if os.path.isdir(name):
        files = sorted(p for p in Path(name).rglob("*") if p.name.endswith(FOLDER_SUFFIXES) and p.is_file())
        if not files:
            raise FileNotFoundError(f"{name} is a directory without .txt, .jsonl, .jsonl.gz or .parquet files in "
                                    "it; pass files, or a directory holding some")
        return files
    if os.path.exists(name):
        return [Path(name)]
    if glob.has_magic(name):
        files = [Path(m) for m in sorted(glob.glob(name, recursive=True)) if os.path.isfile(m)]
        if not files:
            raise FileNotFoundError(f"no file matches {name!r}")
        return files
    raise FileNotFoundError(f"input file not found: {name}")


def _check_readable(path: Path) -> None:
    if is_read_once(path):  # opening a pipe to look would take its writer's text away (or wait for a writer)
        if not os.access(path, os.R_OK):
            raise PermissionError(f"cannot read {path}: Permission denied")
        return
    try:
        open(path, "rb").close()
    except OSError as e:
        raise PermissionError(f"cannot read {path}: {e.strerror or e}") from None


def refuse_stdin(paths: Iterable[Path], why: str) -> None:
    """``ValueError`` if ``paths`` holds standard input, for a job that cannot read it; ``why`` says why."""
    if STDIN in paths:
        raise ValueError(f"- (standard input) cannot be read here: {why}; save it to a file and name the file")


def is_read_once(path: Path) -> bool:
    """Whether an input can be read only once: standard input, or a named pipe (``<(zcat a.gz)``, a FIFO)."""
    if path == STDIN:
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # told by whoever opens it
        return False


@contextmanager
def stdin_as_file(paths: list[Path]):
    """``paths`` with standard input and named pipes (:func:`is_read_once`) copied into temporary files of the
    same names (``stdin`` for standard input; removed after), for a job that reads its inputs more than once or
    in parallel; the other paths as they are."""
    if not any(map(is_read_once, paths)):
        yield paths
        return
    with tempfile.TemporaryDirectory(prefix="tokenizer-stdin-") as folder:
        readable = []
        for k, path in enumerate(paths):
            if not is_read_once(path):
                readable.append(path)
                continue
            copy = Path(folder) / str(k) / ("stdin" if path == STDIN else path.name)  # a folder each: names may repeat
            copy.parent.mkdir()
            with open_input(path) as source, open(copy, "wb") as f:
                shutil.copyfileobj(source, f, 1 << 20)
            readable.append(copy)
            _COPIED_FROM[os.fspath(copy)] = input_name(path)
        try:
            yield readable
        finally:
            for copy in readable:
                _COPIED_FROM.pop(os.fspath(copy), None)


@contextmanager
def open_input(path: str | os.PathLike):
    """The input's bytes as a binary file (standard input for ``-``, left open after)."""
    if is_stdin(path):
        text_input.say_if_typed()
        yield sys.stdin.buffer
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise OSError(f"cannot read {input_name(path)}: {e.strerror or e}") from None
    with f:
        try:
            yield f
        except OSError as e:  # a read that fails (a device, a bad disk, not gzip): said with the file's name
            if e.filename is not None or str(e).startswith("cannot read "):
                raise
            raise OSError(f"cannot read {input_name(path)}: {e.strerror or e}") from None


def input_size(path: str | os.PathLike) -> int | None:
    """The input's size in bytes; None for standard input (not known until it is read)."""
    return None if is_stdin(path) else os.path.getsize(path)


# ---- reading text -------------------------------------------------------------------------------------------


def decode_utf8(data: bytes, offset: int, path, errors: str | None = "strict") -> str:
    """``data`` (the bytes at ``offset`` of the input ``path``) as text: the one UTF-8 rule of the file commands.

    ``errors="strict"`` raises ``ValueError`` naming the input and the byte offset of the first invalid byte,
    and says how to read on (``--errors replace``); ``"replace"`` turns invalid bytes into U+FFFD; ``None`` is
    strict for a job that offers no way round (training: it should not learn U+FFFD). Chunks cut by
    :func:`tokenizer.jobs.dataset.iter_chunks` never end inside a character, so decoding them one by one equals
    decoding the whole file.
    """
    if errors not in ("strict", "replace", None):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    if errors == "replace":
        return data.decode("utf-8", errors="replace")
    return text_input.decode_utf8(data, input_name(path), offset=offset, advice=_utf8_advice(errors))


def _utf8_advice(errors: str | None) -> str:
    return "convert the file to UTF-8" + (_REPLACE_ADVICE if errors else "")


_REPLACE_ADVICE = ", or pass --errors replace (errors='replace') to read invalid bytes as U+FFFD"


def read_text(path: str | os.PathLike, start: int, end: int, errors: str | None = "strict") -> str:
    """Bytes ``start:end`` of a text file, decoded by :func:`decode_utf8` (``start`` must begin a character)."""
    with open_input(path) as f:
        f.seek(start)
        data = f.read(end - start)
    return decode_utf8(data, start, path, errors)


# ---- reading documents ----------------------------------------------------------------------------------------


class Record(NamedTuple):
    """One document of a ``.jsonl`` or ``.parquet`` input."""

    text: str
    number: int | None  # its line (JSON lines) or row (parquet), from 1; None when read from a byte range
    done: int  # bytes of the file read so far (compressed bytes for .gz), for a progress bar
    replaced: int = 0  # bytes of the line not UTF-8 that the text holds as U+FFFD (errors="replace")
    inserted: int = 0  # the U+FFFD the text holds for them (one a run), which the file does not

    @property
    def bytes_read(self) -> int:
        """The bytes of the file its text stands for, as every figure counts them: the text's UTF-8 (a lone
        surrogate, which a JSON escape may spell, as its 3 bytes), each U+FFFD read for bytes not UTF-8 counted
        as those bytes, not as its own 3."""
        return len(self.text.encode("utf-8", "surrogatepass")) + self.replaced - 3 * self.inserted


def read_records(path: str | os.PathLike, text_field: str = "text", *, errors: str | None = "strict", start: int = 0,
                 end: int | None = None) -> Iterator[Record]:
    """The documents of a ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` input, in file order.

    ``start`` and ``end`` (byte offsets at line starts) restrict a ``.jsonl`` file to the lines between them;
    a compressed or parquet file is always read whole. A record read from a range has no ``number`` (counting
    the lines before it would read the file up to there); an error still names its line. ``errors`` is
    :func:`decode_utf8`'s, for each line.
    """
    fmt = input_format(path)
    if fmt == "parquet":
        return _parquet_records(Path(path), text_field)
    if fmt == "jsonl":
        return _jsonl_records(Path(path), text_field, errors, start, end)
    raise ValueError(f"{input_name(path)}: not a .jsonl, .jsonl.gz or .parquet file, so it has no records")


def record_place(path: str | os.PathLike, number: int | None) -> str:
    """How messages point at a record: ``"corpus.jsonl line 12"``, ``"data.parquet row 3"``."""
    unit = "row" if input_format(path) == "parquet" else "line"
    return input_name(path) if number is None else f"{input_name(path)} {unit} {number}"


def _jsonl_records(path: Path, text_field: str, errors: str | None, start: int, end: int | None) -> Iterator[Record]:
    compressed = path.name.endswith(".gz")
    first_line = (lambda: 1) if start == 0 else (lambda: _line_at(path, start))  # worked out only for an error
    with open_input(path) as raw:
        if compressed:
            lines, end = gzip.GzipFile(fileobj=raw), None
        else:
            raw.seek(start)
            lines = raw
        offset = start
        k = -1
        try:
            for k, line in enumerate(lines):
                if end is not None and offset >= end:
                    return
                offset += len(line)
                if line.strip():
                    text, replaced, inserted = _record_text(line, text_field, errors,
                                                            lambda: record_place(path, first_line() + k))
                    yield Record(text, k + 1 if start == 0 else None, raw.tell() if compressed else offset, replaced,
                                 inserted)
        except (EOFError, zlib.error) as e:  # gzip's words for a file cut short or corrupt: neither is an OSError
            raise ValueError(f"{input_name(path)}: the compressed data is damaged or cut short after line {k + 1} "
                             f"({e}); compress the file again, or fetch it again") from None


def _record_text(line: bytes, text_field: str, errors: str | None, where) -> tuple[str, int, int]:
    """The document of one JSON line, how many of the line's bytes that are not UTF-8 it holds as U+FFFD
    (``errors="replace"``), and how many U+FFFD it holds for them; ``where()`` names the line, worked out only
    for an error."""
    try:
        decoded = line.decode("utf-8")  # the common case: as fast as replacing, and nothing replaced
    except UnicodeDecodeError:
        if errors == "replace":
            return _replaced_record_text(line, text_field, where)
        # where() is worked out only for an error; the byte is counted within the line
        decoded = text_input.decode_utf8(line, where(), advice=_utf8_advice(errors))
    return _field_text(decoded, text_field, where), 0, 0


def _replaced_record_text(line: bytes, text_field: str, where) -> tuple[str, int, int]:
    """:func:`_record_text` of a line that is not all UTF-8, read with ``errors="replace"``.

    Only the invalid bytes inside the text field count: those in another field are read but not encoded. The
    line is read twice more to tell them from the file's own U+FFFD (written as it is, or as ``\\ufffd``): with
    each invalid run as two U+FFFD, then as one U+FFFD per byte. No invalid byte is JSON syntax (all are >= 0x80)
    and no reading drops one, so the three readings hold the same fields; what the field gains from one to the
    next tells its runs and its bytes."""
    text = _field_text(line.decode("utf-8", errors="replace"), text_field, where)
    if "\ufffd" not in text:
        return text, 0, 0  # the invalid bytes lie in other fields
    one_a_run = text.count("\ufffd")
    runs = _field_text(line.decode("utf-8", errors=_TWO_U_FFFD_PER_RUN), text_field, where).count("\ufffd") - one_a_run
    own = one_a_run - runs
    per_byte = _field_text(line.decode("utf-8", errors=_ONE_U_FFFD_PER_BYTE), text_field, where).count("\ufffd")
    return text, per_byte - own, runs


# decoding error handlers, each invalid run (what "replace" makes one U+FFFD) as a known number of U+FFFD
_TWO_U_FFFD_PER_RUN = "tokenizer-two-u-fffd-per-run"
_ONE_U_FFFD_PER_BYTE = "tokenizer-one-u-fffd-per-byte"
codecs.register_error(_TWO_U_FFFD_PER_RUN, lambda error: ("\ufffd\ufffd", error.end))
codecs.register_error(_ONE_U_FFFD_PER_BYTE, lambda error: ("\ufffd" * (error.end - error.start), error.end))


def _field_text(decoded: str, text_field: str, where) -> str:
    """The text in the field ``text_field`` of one decoded JSON line; ``ValueError`` naming ``where()`` if none."""
    try:
        record = json.loads(decoded)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where()}: not JSON ({e.msg} at column {e.colno}); a .jsonl file holds one JSON "
                         "object per line") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where()}: a JSON {_json_kind(record)}, not an object with a {json.dumps(text_field)} "
                         "field; a .jsonl file holds one JSON object per line")
    if text_field not in record:
        fields = ", ".join(map(json.dumps, record)) or "none"
        raise ValueError(f"{where()}: no {json.dumps(text_field)} field (its fields: {fields}); {FIELD_ADVICE}")
    text = record[text_field]
    if not isinstance(text, str):
        raise ValueError(f"{where()}: {json.dumps(text_field)} holds a {_json_kind(text)}, not text; {FIELD_ADVICE}")
    return text


def _json_kind(value) -> str:
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _line_at(path: Path, offset: int) -> int:
    """The 1-based number of the line starting at byte ``offset``."""
    newlines = 0
    with open(path, "rb") as f:
        while offset > 0:
            block = f.read(min(offset, 1 << 20))
            newlines += block.count(b"\n")
            offset -= len(block)
    return newlines + 1


def _parquet_records(path: Path, text_field: str) -> Iterator[Record]:
    pq = import_pyarrow_parquet()
    try:
        file = pq.ParquetFile(path)
    except Exception as e:  # pyarrow's own error types: not a parquet file, truncated footer, ...
        raise ValueError(f"{path}: not a readable parquet file ({e})") from None
    with file:
        columns = file.schema_arrow.names
        if text_field not in columns:
            found = ", ".join(map(json.dumps, columns)) or "none"
            raise ValueError(f"{path}: no {json.dumps(text_field)} column (its columns: {found}); "
                             "name the text's column with --text_field")
        size, groups, number = path.stat().st_size, file.num_row_groups, 0
        for group in range(groups):
            texts = file.read_row_group(group, columns=[text_field]).column(0).to_pylist()
            done = size * (group + 1) // groups
            for text in texts:
                number += 1
                if not isinstance(text, str):
                    raise ValueError(f"{record_place(path, number)}: {json.dumps(text_field)} holds a "
                                     f"{_json_kind(text)}, not text; {FIELD_ADVICE}")
                yield Record(text, number, done)


def import_pyarrow_parquet():
    """``pyarrow.parquet``, or an ``ImportError`` that says what to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(f"reading .parquet files needs pyarrow, which is not installed: {INSTALL_PYARROW}") from None
    return pq
