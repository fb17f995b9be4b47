"""The input shards of a dataset, and the documents inside each: what ``encode-dataset`` reads.

A dataset is many files (FineWeb's and OpenWebText's are ``.parquet`` or ``.jsonl``); each is one *shard*, the
unit of work and of output. :func:`find_shards` turns what the user typed — files, folders, globs — into the
list of shards, in a deterministic order (a folder's or a glob's files sorted by name). Formats go by
extension:

* ``.txt``: the whole file is text (the caller encodes it as ``encode-file`` does; this module only names it).
* ``.jsonl`` / ``.jsonl.gz``: one JSON object per line; the document is its ``text_field``. Blank lines are
  skipped; every other line is a document, an empty text included.
* ``.parquet``: the column ``text_field``, read one row group at a time with pyarrow, so memory holds one row
  group, not the file. pyarrow is imported only when a parquet file is read.

:func:`read_documents` yields the documents of a JSON-lines or parquet shard in batches, each with the number
of bytes of the file read so far (for a progress bar). Bad input raises ``ValueError`` naming the file and the
line (JSON lines) or row group and row (parquet): a line that is not JSON or not UTF-8, a missing field, a
text that is not a string.

What this module does not do: tokenize, or decide where output goes.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
from pathlib import Path
from typing import Iterable, Iterator

SHARD_FORMATS = {".jsonl.gz": "jsonl", ".jsonl": "jsonl", ".parquet": "parquet", ".txt": "text"}
BATCH_BYTES = 1 << 20  # documents are handed on in batches of about this much text (bounded memory)


def shard_format(path: str | os.PathLike) -> str | None:
    """``"text"``, ``"jsonl"`` or ``"parquet"`` by the file's extension; None for any other file.

    >>> shard_format("owt/00.jsonl.gz"), shard_format("a.parquet"), shard_format("notes.md")
    ('jsonl', 'parquet', None)
    """
    name = os.fspath(path)
    return next((fmt for ext, fmt in SHARD_FORMATS.items() if name.endswith(ext)), None)


def shard_stem(path: str | os.PathLike) -> str:
    """The file name without its format's extension: ``"data/00.jsonl.gz"`` -> ``"00"``."""
    name = Path(path).name
    ext = next((ext for ext in SHARD_FORMATS if name.endswith(ext)), "")
    return name[: len(name) - len(ext)] or name


def find_shards(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """The shard files named by ``inputs`` (files, folders, globs), in order, each once.

    A folder stands for every file of a known format under it; a glob for its matches; both sorted by name.
    Raises ``FileNotFoundError`` for a missing file, a glob matching nothing or a folder holding no shard, and
    ``ValueError`` for a named file of unknown format.

    >>> find_shards("no/such/*.jsonl")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no file matches 'no/such/*.jsonl'
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    shards: list[Path] = []
    seen: set[Path] = set()
    for item in inputs:
        name = os.fspath(item)
        if os.path.isdir(name):
            found = sorted(p for p in Path(name).rglob("*") if p.is_file() and shard_format(p))
            if not found:
                raise FileNotFoundError(f"no .txt, .jsonl, .jsonl.gz or .parquet file in the folder {name}")
        elif os.path.exists(name):
            if not shard_format(name):
                raise ValueError(f"{name}: unknown input format; name it .txt (plain text), .jsonl, .jsonl.gz "
                                 "(one JSON object per line) or .parquet")
            found = [Path(name)]
        elif glob.has_magic(name):
            found = [Path(m) for m in sorted(glob.glob(name, recursive=True))
                     if os.path.isfile(m) and shard_format(m)]
            if not found:
                raise FileNotFoundError(f"no file matches {name!r}")
        else:
            raise FileNotFoundError(f"input not found: {name}")
        for path in found:
            if path.resolve() not in seen:
                seen.add(path.resolve())
                shards.append(path)
    if not shards:
        raise ValueError("no input given: pass files, folders or globs")
    return shards


def read_documents(path: str | os.PathLike, text_field: str = "text") -> Iterator[tuple[list[str], int]]:
    """``(documents, bytes of the file read so far)`` batches of a ``.jsonl``, ``.jsonl.gz`` or ``.parquet``
    shard, in file order."""
    fmt = shard_format(path)
    if fmt == "jsonl":
        return _read_jsonl(Path(path), text_field)
    if fmt == "parquet":
        return _read_parquet(Path(path), text_field)
    raise ValueError(f"{path}: not a .jsonl, .jsonl.gz or .parquet file")


def _read_jsonl(path: Path, text_field: str) -> Iterator[tuple[list[str], int]]:
    with open(path, "rb") as raw:
        lines = gzip.GzipFile(fileobj=raw) if path.name.endswith(".gz") else raw
        batch: list[str] = []
        batch_bytes = 0
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            text = _jsonl_text(line, text_field, path, number)
            batch.append(text)
            batch_bytes += len(line)
            if batch_bytes >= BATCH_BYTES:
                yield batch, raw.tell()
                batch, batch_bytes = [], 0
        yield batch, raw.tell()


def _jsonl_text(line: bytes, text_field: str, path: Path, number: int) -> str:
    """The document of one JSON line; ``ValueError`` naming the file and line if it has none."""
    try:
        record = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}:{number}: not valid UTF-8 (byte {e.start} of the line is "
                         f"{line[e.start:e.start + 1]!r}); convert the file to UTF-8") from None
    except ValueError as e:
        raise ValueError(f"{path}:{number}: not a JSON object ({e})") from None
    if not isinstance(record, dict) or text_field not in record:
        keys = ", ".join(map(repr, record)) if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"{path}:{number}: no {text_field!r} field (found {keys}); pass the text's field "
                         "name as text_field (--text_field)")
    text = record[text_field]
    if not isinstance(text, str):
        raise ValueError(f"{path}:{number}: {text_field!r} is a {type(text).__name__}, not a string")
    return text


def _read_parquet(path: Path, text_field: str) -> Iterator[tuple[list[str], int]]:
    pq = import_pyarrow_parquet()
    try:
        file = pq.ParquetFile(path)
    except Exception as e:  # pyarrow's own error types: not a parquet file, truncated footer, ...
        raise ValueError(f"{path}: not a readable parquet file ({e})") from None
    with file:
        columns = file.schema_arrow.names
        if text_field not in columns:
            raise ValueError(f"{path}: row group 0: no {text_field!r} column (found {', '.join(map(repr, columns))}); "
                             "pass the text's column name as text_field (--text_field)")
        size, groups = path.stat().st_size, file.num_row_groups
        for group in range(groups):
            texts = file.read_row_group(group, columns=[text_field]).column(0).to_pylist()
            for row, text in enumerate(texts):
                if not isinstance(text, str):
                    kind = "null" if text is None else f"a {type(text).__name__}"
                    raise ValueError(f"{path}: row group {group}, row {row}: {text_field!r} is {kind}, not a string")
            yield texts, size * (group + 1) // groups


def import_pyarrow_parquet():
    """``pyarrow.parquet``, or an ``ImportError`` that says what to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError('reading .parquet files needs pyarrow: pip install "gpt2-numpy[distributed]"') from None
    return pq
