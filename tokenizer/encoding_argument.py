"""What a user may write where a command asks for an encoding: a name, or a path to a tokenizer's files.

Every command of both ``gpt2-tokenizer`` and ``gpt2 --serve`` reads its ``--encoding`` (and ``--encodings``)
through :func:`open_encoding`, so one rule decides:

* a registered name or alias (``gpt2``, ``cl100k_base``, ``gpt-4o``, a plugin's, ...) is that encoding
  (:func:`tokenizer.registry.get_encoding`);
* anything else that exists is a path, read by :func:`tokenizer.loading.load_encoding`: a Hugging Face
  ``tokenizer.json`` or its folder, a folder saved by ``train --out`` or :meth:`Encoding.save`, a ``.tiktoken``
  file, ``encoder.json`` + ``vocab.bpe``;
* anything else is a mistake, said in one line (``ValueError``; ``FileNotFoundError`` for what is spelt like a
  path).

A folder that shares a registered name is reached as ``./NAME``.

    >>> open_encoding("gpt-2").name
    'gpt2'

What this module does not do: read any file itself, or know a command's flags (the commands add those to the
messages).
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

from .encoding import Encoding
from .loading import load_encoding, saved_layout
from .registry import ALIASES, get_encoding, list_encoding_names

# what names a path even when it does not exist (a registered name never holds these)
PATH_SUFFIXES = (".json", ".tiktoken", ".bpe", ".txt")
WHAT_TO_PASS = ("a registered encoding (gpt2, cl100k_base, o200k_base, ...) or a path: a tokenizer.json, "
                "its folder, or a folder saved by train --out")


def open_encoding(name_or_path: str) -> Encoding:
    """The encoding ``name_or_path`` names (the module's rule); ``ValueError`` or ``FileNotFoundError`` in one
    line that says what to pass instead."""
    if not name_or_path:  # Path("") is the current folder: never meant
        raise ValueError(f"an empty name is no encoding; pass {WHAT_TO_PASS}")
    registered = name_or_path in ALIASES or name_or_path in list_encoding_names()
    if not registered and Path(name_or_path).exists():
        return _open_path(name_or_path)
    if registered:
        return get_encoding(name_or_path)
    if looks_like_a_path(name_or_path):
        raise FileNotFoundError(f"{name_or_path}: no such file or folder; pass {WHAT_TO_PASS}")
    known = ", ".join([*list_encoding_names(), *ALIASES])
    raise ValueError(f"Unknown encoding {name_or_path!r}. Known encodings: {known}; or a path: a tokenizer.json, "
                     "its folder, or a folder saved by train --out")


# A tokenizer read from files, by the real path of what load_encoding reads and the state of its folder's files:
# a folder named twice (./x and x/, through a symlink, or as x/tokenizer.json) is one encoding, read once and
# shown under one name (tokenizer.registry.shown_names), as a registered name given twice is. Weak, so that one no
# longer in use is let go; its files changed since (a tokenizer trained again into its folder) read it anew.
_opened: weakref.WeakValueDictionary[tuple, Encoding] = weakref.WeakValueDictionary()


def _open_path(name_or_path: str) -> Encoding:
    try:
        layout, where = saved_layout(name_or_path)
        where = Path(os.path.realpath(where))
        key = (layout, where, _files_state(where if where.is_dir() else where.parent))
    except (ValueError, OSError):  # no layout, or a folder that cannot be listed: load_encoding says what is wrong
        return load_encoding(name_or_path)
    enc = _opened.get(key)
    if enc is None:
        enc = _opened[key] = load_encoding(name_or_path)
    return enc


def _files_state(folder: Path) -> tuple:
    """What changes when a file of ``folder`` is written: each entry's name, size and time of change."""
    state = []
    for entry in os.scandir(folder):
        try:
            stat = entry.stat()
            state.append((entry.name, stat.st_size, stat.st_mtime_ns))
        except OSError:  # a broken symlink beside the tokenizer's files: there, and nothing more to say
            state.append((entry.name, -1, -1))
    return tuple(sorted(state))


def looks_like_a_path(name: str) -> bool:
    """Whether ``name`` is spelt like a path (a separator, or a file's suffix), which no registered name is.

    >>> looks_like_a_path("llama3/tokenizer.json"), looks_like_a_path("tokenizer.json"), looks_like_a_path("gpt2")
    (True, True, False)
    """
    separators = [os.sep, os.altsep] if os.altsep else [os.sep]
    return any(sep in name for sep in separators) or name.endswith(PATH_SUFFIXES) or name.startswith(".")


def tokenizer_json(name_or_path: str) -> Path:
    """The Hugging Face ``tokenizer.json`` that ``name_or_path`` (a file, or its folder) points at; ``ValueError``
    naming what to pass when it points at none (a registered name, a folder of other files)."""
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if name_or_path in ALIASES or name_or_path in list_encoding_names() or not path.is_file():
        raise ValueError(f"{name_or_path} is not a Hugging Face tokenizer.json: pass one, or its folder")
    return path
