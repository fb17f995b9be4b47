"""Where this package keeps what it downloads or builds once: vocabulary files and batch BPE's pair tables.

``$TOKENIZER_CACHE_DIR`` if set, else ``gpt2-tokenizer`` in the user's cache folder (:func:`user_cache_root`:
``$XDG_CACHE_HOME`` or ``~/.cache``, which :mod:`gpt2_numpy.models_dir` shares): never inside the checkout. This
module names the folder, and says how a file is saved in it (:func:`save_quietly`: whole or not at all, and never an
error, since a cache only saves time) and how one begins (:func:`file_header`, :func:`read_file_header`: what it is,
then a JSON header).
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import suppress
from pathlib import Path


def user_cache_root() -> Path:
    """The user's cache folder, where this package and :mod:`gpt2_numpy` each keep a folder of their own:
    ``$XDG_CACHE_HOME``, or ``~/.cache`` when it is unset, empty or not an absolute path (the XDG rule)."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME", "")).expanduser()
    return xdg if xdg.is_absolute() else Path("~/.cache").expanduser()


def cache_dir() -> Path:
    """The folder for downloaded vocabulary files and saved pair tables."""
    if os.environ.get("TOKENIZER_CACHE_DIR"):
        # a "~" kept by quoting (an ENV line, a unit file) is the home folder, as in $GPT2_MODELS_DIR: a folder
        # named "~" made in the current folder would be a surprise
        return Path(os.environ["TOKENIZER_CACHE_DIR"]).expanduser()
    return user_cache_root() / "gpt2-tokenizer"


def save_quietly(path: Path, chunks: list) -> None:
    """Write ``chunks`` (bytes-like) to ``path`` through a temporary file renamed into place, so that a reader
    never sees half a file; give up quietly if the folder cannot be written (a full disk, say)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", suffix=path.suffix, delete=False)
    except OSError:
        return
    try:
        with f:
            for chunk in chunks:
                f.write(chunk)
        os.replace(f.name, path)
    except OSError:
        pass
    finally:
        with suppress(OSError):
            Path(f.name).unlink(missing_ok=True)  # left over only if the rename did not happen


def file_header(magic: bytes, header: dict, *, align: int = 1) -> bytes:
    """The start of a cache file: ``magic`` (what the file is), the JSON header's length (8 bytes, little-endian)
    and the header, padded with spaces so that what follows starts at a multiple of ``align``."""
    text = json.dumps(header).encode()
    text += b" " * (-(len(magic) + 8 + len(text)) % align)
    return magic + len(text).to_bytes(8, "little") + text


def read_file_header(f, magic: bytes) -> dict | None:
    """The header (:func:`file_header`) of the cache file open as ``f``, which is left where the header ends;
    None if the file does not begin with ``magic`` and a JSON object."""
    if f.read(len(magic)) != magic:
        return None
    length = int.from_bytes(f.read(8), "little")
    if length > 1 << 20:
        return None
    try:
        header = json.loads(f.read(length))
    except ValueError:
        return None
    return header if isinstance(header, dict) else None
