"""The tables of batch BPE and the array path, kept on disk: built once per vocabulary, loaded by every later
process.

:func:`tokenizer.fast.batch_bpe.build_pair_table` cuts every token of a vocabulary at every position, which takes
a noticeable moment for the large vocabularies; a fresh process that meets new text would pay it on its
first call. So the table is saved under the user's cache folder (:func:`tokenizer.user_cache.cache_dir`,
which ``$TOKENIZER_CACHE_DIR`` overrides), named by the SHA-256 of the vocabulary it was built from (every token's
bytes, id and merge priority), and loaded from there next time. (Hashing o200k's 200k tokens is itself a
noticeable part of a fresh process's first call: so a vocabulary read from a checked file, whose sha256 already
names it, has its digest remembered under that name.)

    >>> from tokenizer import get_encoding
    >>> enc = get_encoding("gpt2")
    >>> from tokenizer.fast.batch_bpe import pairs_of
    >>> table = load_or_build(enc.merge_ranks, enc.token_ids)
    >>> len(pairs_of(table))  # every (left id, right id) whose bytes join into a GPT-2 token
    108299

The same file holds the vocabulary's :class:`tokenizer.fast.piece_arrays.PieceTable` (every token by its bytes),
which the array path looks pieces up in: :func:`load_or_build_tables` gives both.

The file is the arrays' bytes one after another behind a short JSON header (each array's name, dtype, shape and
place, the digest, a CRC-32 of all the bytes): mapped into memory, checked, and the arrays are views of the
mapping. The check runs in a thread while the caller goes on (:func:`load_tables_soon`: an encoding splits its
text meanwhile), and no array is read before it has passed. (NumPy's ``.npz`` took twice as long for the same 30 MB: a zip member, a copy and a CRC per array; and
reading into a fresh buffer three times as long as the mapping, most of it filling fresh memory.)

A file is written whole to a temporary name and then renamed, so a reader never sees half of one. A file that
cannot be read, fails its checksum, or was built from another vocabulary (its stored digest differs) is
ignored and replaced; writing one removes the files older versions left (``.npz``, older formats). A cache
folder that cannot be written only costs the saving: the table is still built.

This module does not decide when batch BPE runs (:mod:`tokenizer.encoding` does) nor what the table holds
(:mod:`tokenizer.fast.batch_bpe` does).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
import zlib
from contextlib import suppress
from itertools import compress, islice, repeat
from operator import is_not
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .batch_bpe import PairTable, build_pair_table
from .piece_arrays import PieceTable
from ..user_cache import cache_dir, file_header, read_file_header, save_quietly

# Bump when PairTable's or PieceTable's fields or their meaning change (a hash that places a bit, say), or the
# file's layout: older files then match no digest.
FORMAT_VERSION = 4

# A tables file begins with these bytes, then the header's length (8 bytes, little-endian), then the header.
_MAGIC = b"gpt2-numpy tables\n"

# Each array starts at a multiple of this in the file's data, so that its view is aligned.
_ALIGN = 64

_ARRAY_FIELDS = (
    "slot_keys", "slot_ranks", "slot_merged", "byte_ids", "byte_pair_ranks", "byte_pair_merged", "boundary_rank",
    "window_bits", "window_pairs",
)
_NUMBER_FIELDS = ("slot_bits", "n_ids", "no_merge")

# How many of a vocabulary's last tokens are looked up in the tables its name leads to (_holds_last_tokens).
_TOKENS_CHECKED = 32


def vocabulary_digest(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> str:
    """SHA-256 (hex) of everything the pair table is built from: each token's bytes, id and merge priority."""
    tokens = list(token_ids)
    digest = hashlib.sha256(f"pair-table v{FORMAT_VERSION} {len(tokens)}\n".encode())
    digest.update(np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)).tobytes())
    digest.update(b"".join(tokens))
    digest.update(np.fromiter(token_ids.values(), dtype=np.int64, count=len(tokens)).tobytes())
    # The priorities, aligned with the tokens. For tiktoken's files a token's priority is its id: said in a few
    # bytes (and quickly, when the two tables are one dict), so that both ways of telling it share one file.
    if merge_ranks is token_ids or merge_ranks == token_ids:  # one comparison in C, not a list of each
        digest.update(b"priorities are the ids")
        return digest.hexdigest()
    ranks = list(map(merge_ranks.get, tokens))
    if ranks == list(token_ids.values()):
        digest.update(b"priorities are the ids")
        return digest.hexdigest()
    # Otherwise: which tokens have one, then their values.
    has_rank = bytes(map(is_not, ranks, repeat(None)))
    digest.update(has_rank)
    ranks = list(compress(ranks, has_rank))
    try:
        digest.update(np.array(ranks, dtype=np.int64).tobytes())
    except OverflowError:  # priorities beyond 64 bits: written as text
        digest.update(repr(ranks).encode())
    return digest.hexdigest()


def table_path(digest: str) -> Path:
    return cache_dir() / "pair-tables" / f"{digest}.tables"


def load_or_build(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> PairTable | None:
    """The pair table of this vocabulary: read from the cache folder if a good copy is there, else built
    (:func:`tokenizer.fast.batch_bpe.build_pair_table`) and saved. None when the vocabulary cannot have one."""
    tables = load_or_build_tables(merge_ranks, token_ids)
    return tables and tables[0]


def load_or_build_tables(
    merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int], *, source: str | None = None
) -> tuple[PairTable, PieceTable] | None:
    """``(pair table, token table)`` of this vocabulary, as :func:`load_or_build`; the token table maps every
    token's bytes to its id. None when the vocabulary cannot have a pair table.

    ``source``: a name that stands for the vocabulary's contents, if the caller has one (the registry's: a
    checked file's name and sha256). The vocabulary's digest is then remembered under it, and a later process
    finds the tables without hashing every token again; a remembered digest whose file is gone or damaged
    only costs the hashing."""
    return load_tables_soon(merge_ranks, token_ids, source=source)()


def load_tables_soon(
    merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int], *, source: str | None = None
) -> Callable[[], tuple[PairTable, PieceTable] | None]:
    """:func:`load_or_build_tables`, begun now and finished by calling the function returned: where ``source``
    names tables on disk, their file is checked meanwhile (:func:`read_tables_soon`), while the caller splits
    its text, say. The function's ``ready()`` says whether calling it would not wait for that check."""
    digest = remembered_digest(source) if source else None
    reading = read_tables_soon(table_path(digest), digest) if digest else None

    def tables() -> tuple[PairTable, PieceTable] | None:
        found = reading() if reading else None
        if found is not None and _holds_last_tokens(found[1], token_ids):
            return found
        return _find_or_build(merge_ranks, token_ids, source)

    # whether calling it now would not wait for the check (hashing or building, when that is needed, is done in
    # the call itself)
    tables.ready = reading.ready if reading else lambda: True
    return tables


def _holds_last_tokens(tokens: PieceTable, token_ids: Mapping[bytes, int]) -> bool:
    """Whether a token table found by a vocabulary's name has as many tokens as the vocabulary and holds its last
    ones with their ids: cheap, and enough to catch a name that belongs to another vocabulary (given by hand,
    say), which then costs the hashing instead of giving wrong ids."""
    if len(tokens) != len(token_ids):
        return False
    try:
        last = list(islice(reversed(token_ids.items()), _TOKENS_CHECKED))
    except TypeError:  # a mapping that cannot be walked backwards
        last = list(token_ids.items())[-_TOKENS_CHECKED:]
    return tokens.values_of([token for token, _ in last]) == [int(i) for _, i in last]


def _find_or_build(
    merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int], source: str | None
) -> tuple[PairTable, PieceTable] | None:
    """The tables by the vocabulary's digest (hashing it), built and saved if they are not on disk."""
    digest = vocabulary_digest(merge_ranks, token_ids)
    path = table_path(digest)
    tables = read_tables(path, digest)
    if source:
        remember_digest(source, digest)
    if tables is None:
        table = build_pair_table(merge_ranks, token_ids)
        if table is None:
            return None
        try:
            tables = table, PieceTable(token_ids)
        except ValueError:  # two tokens with one 64-bit key (never seen): there is no array path then
            return None
        write_tables(path, digest, *tables)
        remove_older_formats(path.parent)
    return tables


def remove_older_formats(folder: Path) -> None:
    """Delete the tables files in ``folder`` that an older version wrote (``.npz``, or a header of an older
    format): no version reads them again, and each is tens of megabytes. Files of this format, whatever their
    vocabulary, are kept; a file that cannot be read or deleted is left."""
    for path in folder.glob("*"):
        if path.suffix == ".npz":
            old = True
        elif path.suffix == ".tables" and not path.name.startswith(".tmp-"):
            old = _format_of(path) not in (None, FORMAT_VERSION)
        else:
            continue
        if old:
            with suppress(OSError):
                path.unlink()


def _format_of(path: Path) -> int | None:
    """The format a tables file says it has (None if it cannot be read as one)."""
    try:
        with open(path, "rb") as f:
            header = read_file_header(f, _MAGIC)
        return None if header is None else int(header["format"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _source_path(source: str) -> Path:
    name = hashlib.sha256(f"tables v{FORMAT_VERSION} of {source}".encode()).hexdigest()
    return cache_dir() / "pair-tables" / f"{name}.digest"


def remembered_digest(source: str) -> str | None:
    """The vocabulary digest :func:`remember_digest` kept for ``source``, or None."""
    try:
        digest = _source_path(source).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return None
    is_hex = len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)
    return digest if is_hex else None


def remember_digest(source: str, digest: str) -> None:
    """Keep ``digest`` as the vocabulary digest of ``source``, atomically; give up quietly if the folder cannot
    be written."""
    path = _source_path(source)
    if remembered_digest(source) == digest:
        return
    save_quietly(path, [digest.encode("ascii")])


def read_tables(path: Path, digest: str) -> tuple[PairTable, PieceTable] | None:
    """The tables saved at ``path`` if the file is whole and was built from the vocabulary ``digest``; else None."""
    return read_tables_soon(path, digest)()


def read_tables_soon(path: Path, digest: str) -> Callable[[], tuple[PairTable, PieceTable] | None]:
    """:func:`read_tables`, begun now and finished by calling the function returned.

    The file is mapped into memory now and its CRC computed in a thread (zlib lets other threads run
    meanwhile), so that the caller can go on with work that does not need the tables; the function returned
    waits for the check. Nothing is read from the arrays before it has passed: a damaged file is never used,
    not even for a moment."""
    mapped = _map_file(path, digest)
    if mapped is None:
        def nothing() -> None:
            return None

        nothing.ready = lambda: True
        return nothing
    header, data = mapped
    crc: list[int] = []
    checking = threading.Thread(target=lambda: crc.append(zlib.crc32(data)), name="tables check", daemon=True)
    checking.start()

    def tables() -> tuple[PairTable, PieceTable] | None:
        checking.join()
        if not crc:  # a process forked while the check ran: the thread is not in this one
            crc.append(zlib.crc32(data))
        if crc[0] != header["crc32"]:
            return None
        try:
            numbers = header["numbers"]
            arrays = {name: data[offset : offset + np.dtype(dtype).itemsize * int(np.prod(shape))].view(dtype).reshape(tuple(shape))
                      for name, dtype, shape, offset in header["arrays"]}
        except (ValueError, KeyError, TypeError):
            return None  # not a header of ours
        return _tables_of(numbers, arrays)

    tables.ready = lambda: not checking.is_alive()  # whether calling it now would not wait
    return tables


def _tables_of(numbers: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> tuple[PairTable, PieceTable] | None:
    try:
        table = PairTable(**{name: int(numbers[name]) for name in _NUMBER_FIELDS},
                          **{name: arrays[name] for name in _ARRAY_FIELDS})
        tokens = PieceTable.from_arrays({name[len("tokens_"):]: array for name, array in arrays.items()
                                         if name.startswith("tokens_")})
    except (KeyError, TypeError, ValueError):
        return None  # a field missing: written by something else; built again
    return table, tokens


def write_tables(path: Path, digest: str, table: PairTable, tokens: PieceTable) -> None:
    """Save the tables at ``path`` atomically (a temporary file renamed); give up quietly if the folder cannot
    be written: the cache only saves time."""
    arrays = {name: getattr(table, name) for name in _ARRAY_FIELDS}
    arrays.update({f"tokens_{name}": array for name, array in tokens.arrays.items()})
    write_arrays(path, digest, {name: getattr(table, name) for name in _NUMBER_FIELDS}, arrays)


def _map_file(path: Path, digest: str) -> tuple[dict, np.ndarray] | None:
    """``(header, data)`` of the tables file at ``path`` for the vocabulary ``digest``: its bytes after the
    header, mapped into memory and not yet checked; None if the file is missing, of another layout or
    vocabulary, cut short or longer."""
    try:
        with open(path, "rb") as f:
            header = read_file_header(f, _MAGIC)
            if header is None or header.get("digest") != digest:
                return None
            size, start = int(header["size"]), f.tell()
            if size != os.fstat(f.fileno()).st_size - start:
                return None  # cut short, or longer than written
            int(header["crc32"])
            if not size:
                return header, np.zeros(0, dtype=np.uint8)
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = np.frombuffer(mapped, dtype=np.uint8, offset=start)  # read-only, as the mapping is
        if start % _ALIGN:  # (written by this module, the data starts aligned)
            data = data.copy()
            data.flags.writeable = False
        return header, data
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable, or not a header of ours


def write_arrays(path: Path, digest: str, numbers: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> None:
    """Save named ints and arrays for the vocabulary ``digest`` at ``path`` (see the module's docstring), atomically;
    give up quietly if the folder cannot be written."""
    arrays = {name: np.require(array, requirements="C") for name, array in arrays.items()}
    placed, offset = [], 0
    for name, array in arrays.items():
        placed.append([name, array.dtype.str, list(array.shape), offset])
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    crc = 0
    for array in arrays.values():
        crc = zlib.crc32(bytes(-array.nbytes % _ALIGN), zlib.crc32(array, crc))  # the array, then its padding
    header = {"format": FORMAT_VERSION, "digest": digest, "numbers": {k: int(v) for k, v in numbers.items()},
              "arrays": placed, "size": offset, "crc32": crc}
    chunks = [file_header(_MAGIC, header, align=_ALIGN)]  # the data starts aligned in the file too
    for array in arrays.values():
        chunks += [array.data, bytes(-array.nbytes % _ALIGN)]
    save_quietly(path, chunks)
