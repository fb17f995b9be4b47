"""Where this package keeps what it downloads or builds once: vocabulary files and batch BPE's pair tables.

``$TOKENIZER_CACHE_DIR`` if set, else ``gpt2-tokenizer`` in the user's cache folder (:func:`user_cache_root`:
``$XDG_CACHE_HOME`` or ``~/.cache``, which :mod:`gpt2_numpy.models_dir` shares; a user without a home folder gets
one in the temporary folder): never inside the checkout. This module names the folder, and says how a file is
saved in it (:func:`save_quietly`: whole or not at all, and never an error, since a cache only saves time) and how
one begins (:func:`file_header`, :func:`read_file_header`: what it is, then a JSON header).
"""

from __future__ import annotations

import functools
import json
import os
import stat
import tempfile
from contextlib import suppress
from pathlib import Path


def user_cache_root() -> Path:
    """The user's cache folder, where this package and :mod:`gpt2_numpy` each keep a folder of their own:
    ``$XDG_CACHE_HOME``, or ``~/.cache`` when it is unset, empty or not an absolute path (the XDG rule); for a user
    without a home folder, a folder of that user's own in the temporary folder (:func:`temporary_cache_root`)."""
    xdg = expand_home(os.environ.get("XDG_CACHE_HOME", ""))
    if xdg.is_absolute():
        return xdg
    home_cache = expand_home("~/.cache")
    if home_cache.is_absolute():
        return home_cache
    # no $HOME, and no entry for this user in the passwd database: a container run as a uid of its own (docker run
    # --user 1234), where every command would otherwise stop with a traceback
    return temporary_cache_root()


def expand_home(path: str) -> Path:
    """``path`` with a leading ``~`` or ``~user`` made that home folder, as a shell does; left as typed when there is
    no such folder to name (a user unknown, or none at all), where pathlib's ``expanduser`` raises RuntimeError: a
    traceback for a typo in an argument or a variable."""
    return Path(os.path.expanduser(path))


def temporary_cache_root() -> Path:
    """``gpt2-numpy-cache-UID`` in the temporary folder (tiktoken keeps its own cache there too), made readable and
    writable by this user alone. A cache is read back (numba's compiled kernels among it), so a folder of that name
    that another user made, or may write, is never used: this process then takes a new folder of its own."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    folder = Path(tempfile.gettempdir()) / f"gpt2-numpy-cache-{uid if uid is not None else 'user'}"
    with suppress(OSError):
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()  # (a symbolic link by that name is someone's trap, not a folder)
        if uid is None or (stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o022):
            return folder
    try:
        return _folder_of_this_process(folder)
    except OSError:  # no folder can be made there (a read-only temporary folder): nothing is cached, and a command
        # that would keep a model here names this path as no folder, and how to choose one
        return Path(os.devnull) / "gpt2-numpy-cache"


@functools.lru_cache(maxsize=None)
def _folder_of_this_process(untrusted: Path) -> Path:
    """A new folder in the temporary folder, this process's alone, made once for each untrusted name (so that
    every cache file of the run goes in one folder)."""
    return Path(tempfile.mkdtemp(prefix="gpt2-numpy-cache-"))


def cache_dir() -> Path:
    """The folder for downloaded vocabulary files and saved pair tables."""
    if os.environ.get("TOKENIZER_CACHE_DIR"):
        # a "~" kept by quoting (an ENV line, a unit file) is the home folder, as in $GPT2_MODELS_DIR: a folder
        # named "~" made in the current folder would be a surprise
        return expand_home(os.environ["TOKENIZER_CACHE_DIR"])
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
