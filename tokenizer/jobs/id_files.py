"""A ``.bin`` of token ids read a window at a time: the one reader of ``parity --ids`` and ``decode --ids``.

A ``.bin`` is nanoGPT's layout, what ``encode-file`` and ``encode-dataset`` write: the ids as one flat
little-endian array, with no header, of :func:`tokenizer.jobs.dataset.id_dtype` (uint16 up to 65,536 ids, else
uint32; ``encode-dataset``'s manifest names it too). Nothing in the file says its type, so a file that cannot be
one (its size not a whole number of ids) is refused with the type that would fit, and a NumPy ``.npy`` (a header,
then the array) with how to save its array as a ``.bin``: its header read as ids would put every id after it
out of place.

    with IdsFile(Path("train.bin"), np.dtype("<u2"), verb="decode") as ids_file:
        ids_file.advance(1000)            # skip the first 1,000 ids
        ids = ids_file.peek(4096)         # the next 4,096 (fewer at the end), as a list of ints

What this module does not do: choose the type (each command's ``--dtype``, or the vocabulary's), or say what the
ids mean.
"""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np

NPY_MAGIC = b"\x93NUMPY"  # how every .npy file begins (NumPy's format)


def other_dtype(dtype: np.dtype) -> np.dtype:
    """The other id type a .bin may hold: uint32 for uint16, uint16 for uint32."""
    return np.dtype("<u4") if dtype.itemsize == 2 else np.dtype("<u2")


def check_ids_file(path: Path, *, verb: str = "check") -> int:
    """What can be told of ``path`` as a ``.bin`` before its type is known (a command checks it before loading
    a vocabulary, which may be a download): a folder, a missing file or one that is not a regular file is an
    ``OSError``, a ``.npy`` a ``ValueError`` saying how to ``verb`` its array; returns its size in bytes."""
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; name the .bin file of ids")
    if not path.exists():
        raise FileNotFoundError(f"ids file not found: {path}")
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):  # a pipe's size is unknown, and it cannot be read from a position
        raise ValueError(f"{path} is not a regular file; save the ids to a file (nanoGPT's .bin) first")
    with open(path, "rb") as f:
        starts_like_npy = f.read(len(NPY_MAGIC)) == NPY_MAGIC
    if starts_like_npy:  # its header would be read as ids, and every id after it out of place
        raise ValueError(f"{path} is a NumPy .npy file (a header, then the array), not a flat file of ids as "
                         f"nanoGPT's .bin: save its array with np.load({str(path)!r}).tofile('ids.bin') and "
                         f"{verb} ids.bin")
    return info.st_size


class IdsFile:
    """The ids of ``path`` as ``dtype``, from a position that moves forward; ``verb`` is what the command does with
    the file ("check", "decode"), for the advice on a ``.npy`` (:func:`check_ids_file`). A file that cannot hold
    ids of ``dtype`` is a ``ValueError`` naming the type that would fit, in one line."""

    def __init__(self, path: Path, dtype: np.dtype, *, verb: str = "check"):
        size = check_ids_file(path, verb=verb)
        if size % dtype.itemsize:
            other = other_dtype(dtype)
            said = f"{path} is {size:,} bytes, not a whole number of {dtype.name} ids"
            if size % other.itemsize:  # no whole number of either: --dtype would not help
                raise ValueError(f"{said}, nor of {other.name} ids; is it a file of ids (as encode-file writes)?")
            raise ValueError(f"{said}; was it written as {other.name}? pass --dtype {other.name}")
        self.path, self.dtype, self.total, self.pos = path, dtype, size // dtype.itemsize, 0
        self.f = open(path, "rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    @property
    def left(self) -> int:
        return self.total - self.pos

    def peek(self, count: int) -> list[int]:
        """Up to ``count`` ids from the current position, which does not move."""
        self.f.seek(self.pos * self.dtype.itemsize)
        return np.frombuffer(self.f.read(count * self.dtype.itemsize), dtype=self.dtype).tolist()

    def advance(self, count: int) -> None:
        self.pos += count
