"""Where this package keeps what it downloads or builds once: vocabulary files and batch BPE's pair tables.

``$TOKENIZER_CACHE_DIR`` if set, else ``gpt2-tokenizer`` in the user's cache folder (``$XDG_CACHE_HOME`` or
``~/.cache``): never inside the checkout. This module names the folder, and says how a file is saved in it
(:func:`save_quietly`: whole or not at all, and never an error, since a cache only saves time).
"""

from __future__ import annotations

import os
import tempfile
from contextlib import suppress
from pathlib import Path


def cache_dir() -> Path:
    """The folder for downloaded vocabulary files and saved pair tables."""
    if os.environ.get("TOKENIZER_CACHE_DIR"):
        return Path(os.environ["TOKENIZER_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpt2-tokenizer"


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
