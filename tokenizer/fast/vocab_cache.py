"""OpenAI's vocabulary files, parsed once and kept in a form that is quick to read back.

Reading ``o200k_base.tiktoken`` means decoding 200,000 lines of base64 and making 200,000 ints, most of what
a fresh process's ``get_encoding`` waits for. So once a checked file has been parsed, its tokens are saved
under the user's cache folder (:func:`tokenizer.user_cache.cache_dir`), named by the file's sha256: the
tokens' bytes one after another, their lengths and their ranks, behind a short header with a CRC-32. A later
process rebuilds the same dict (same tokens, ranks and order) from these in a fraction of the time.

    >>> ranks = {b"a": 0, b"b": 1, b"ab": 2}
    >>> unpack(pack(ranks)) == ranks
    True

Standard library only: ``get_encoding`` does not import NumPy. A saved file that is missing, cut short,
damaged, of another layout or byte order, or made for another file is ignored (and written again). What this
module does not do: check the vocabulary file itself (:mod:`tokenizer.registry` does, against its known
sha256, before the first parse; the saved copy is named by that checked sha256).
"""

from __future__ import annotations

import io
import sys
import zlib
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Mapping

from ..user_cache import cache_dir, file_header, read_file_header, save_quietly

# A saved vocabulary begins with these bytes and a JSON header (tokenizer.user_cache.file_header), then the
# token lengths, the ranks and the tokens' bytes.
_MAGIC = b"gpt2-numpy vocabulary\n"
FORMAT_VERSION = 1
_LENGTH, _RANK = "I", "q"  # the array typecodes of the lengths and the ranks (their sizes are in the header)


def saved_path(sha256: str) -> Path:
    return cache_dir() / "vocabularies" / f"{sha256}.vocab"


def load_saved(sha256: str) -> dict[bytes, int] | None:
    """The vocabulary saved for the checked file whose sha256 this is (:func:`save`), or None."""
    try:
        with open(saved_path(sha256), "rb") as f:
            return _read(f, sha256)
    except OSError:
        return None


def save(sha256: str, ranks: Mapping[bytes, int]) -> None:
    """Keep ``ranks``, parsed from the checked file whose sha256 this is; give up quietly if it cannot be
    written, or if a rank does not fit in 64 bits (then the file is parsed every time)."""
    try:
        data = pack(ranks, sha256=sha256)
    except OverflowError:
        return
    save_quietly(saved_path(sha256), [data])


def pack(ranks: Mapping[bytes, int], *, sha256: str = "") -> bytes:
    """``ranks`` as the bytes of a saved vocabulary."""
    tokens = list(ranks)
    lengths = array(_LENGTH, map(len, tokens))
    values = array(_RANK, ranks.values())
    body = lengths.tobytes() + values.tobytes() + b"".join(tokens)
    header = {"format": FORMAT_VERSION, "sha256": sha256, "tokens": len(tokens), "size": len(body),
              "byteorder": sys.byteorder, "item_sizes": [lengths.itemsize, values.itemsize], "crc32": zlib.crc32(body)}
    return file_header(_MAGIC, header) + body


def unpack(data: bytes, *, sha256: str = "") -> dict[bytes, int] | None:
    """The vocabulary in ``data`` (:func:`pack`), or None if it is not one whole, made for ``sha256``."""
    return _read(io.BytesIO(data), sha256)


def _read(f, sha256: str) -> dict[bytes, int] | None:
    lengths, values = array(_LENGTH), array(_RANK)
    try:
        header = read_file_header(f, _MAGIC)
        if header is None:
            return None
        body = f.read()
        n = int(header["tokens"])
        if (header["format"] != FORMAT_VERSION or header["sha256"] != sha256 or header["byteorder"] != sys.byteorder
                or header["item_sizes"] != [lengths.itemsize, values.itemsize]
                or len(body) != header["size"] or zlib.crc32(body) != header["crc32"]):
            return None
        blob_start = n * (lengths.itemsize + values.itemsize)
        lengths.frombytes(body[: n * lengths.itemsize])
        values.frombytes(body[n * lengths.itemsize : blob_start])
        blob = body[blob_start:]
        if sum(lengths) != len(blob):
            return None
        ends = list(accumulate(lengths))
        tokens = list(map(blob.__getitem__, map(slice, [0, *ends[:-1]], ends)))
        ranks = dict(zip(tokens, values.tolist()))
        return ranks if len(ranks) == n else None
    except (ValueError, KeyError, TypeError):  # not a header of ours
        return None
