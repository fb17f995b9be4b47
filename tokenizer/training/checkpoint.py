"""The training state kept in a checkpoint folder, so that a stopped run can go on and end with the same merges.

The folder holds ``counts.pickle`` (the pre-token counts, written once), ``merges.json`` (the merges so far, as
pairs of token ids) and ``settings.json`` (what the run was made with, written last: the state is complete).
Each file is replaced atomically.

What is not here: when a state is written or resumed (:func:`tokenizer.training.train.train_bpe` decides), or the
folder's place and its removal once the tokenizer is saved (the ``train`` command's).
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from collections import Counter

# What a state folder holds (each written by write_atomically, so a ".partial" of one may be left by a kill)
STATE_FILES = ("counts.pickle", "merges.json", "settings.json")


class SettingsChanged(ValueError):
    """A state resumed with other settings than it was made with; ``changed`` names them (``["inputs"]``)."""

    def __init__(self, message: str, changed: list[str]):
        super().__init__(message)
        self.changed = changed


class DamagedState(ValueError):
    """A state whose files cannot be read back (edited by hand, cut short by a failing disk, or removed):
    ``file`` is the one that failed, ``reason`` what its reader said."""

    def __init__(self, folder: str, file: str, reason: str):
        super().__init__(f"the training state in {folder!r} is damaged: {file} cannot be read ({reason}); "
                         "start without resume")
        self.file, self.reason = file, reason


class UnreadableState(OSError):
    """A state file that is there but cannot be opened or read (no permission to read it, a folder in its place):
    ``file`` is the one, ``reason`` what the system said. Not damage: once it can be read, the run resumes."""

    def __init__(self, folder: str, file: str, error: OSError):
        self.file, self.reason = file, error.strerror or str(error)
        super().__init__(error.errno, f"the training state in {folder!r} cannot be read: {file}: {self.reason}; "
                         "make it readable to resume, or start without resume", os.path.join(folder, file))

    def __str__(self) -> str:  # the sentence above, not OSError's "[Errno 13] ...: 'path'"
        return self.strerror


def checkpoint_settings(paths: list[str], specials: list[str], pattern: str, text_field: str) -> dict:
    """What a checkpoint must have been made with to be resumed."""
    return {
        "inputs": [[os.path.abspath(p), os.path.getsize(p)] for p in paths],
        "special_tokens": specials,
        "pattern": pattern,
        "text_field": text_field,
    }


def write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old content or the new one, never a part."""
    partial = path + ".partial"
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:  # a full disk, Ctrl-C: the old content stays, and no part is left beside it
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def start_checkpoint(folder: str, settings: dict, counts: Counter) -> None:
    """Keep a new run's state in ``folder``: its counts, no merges yet, and its ``settings``."""
    os.makedirs(folder, exist_ok=True)
    for name in ("merges.json", "settings.json"):  # a previous run's state no longer applies
        if os.path.exists(os.path.join(folder, name)):
            os.remove(os.path.join(folder, name))
    write_atomically(os.path.join(folder, "counts.pickle"), pickle.dumps(dict(counts), pickle.HIGHEST_PROTOCOL))
    write_atomically(os.path.join(folder, "merges.json"), b"[]")
    write_atomically(os.path.join(folder, "settings.json"), json.dumps(settings).encode())  # last: complete


def load_checkpoint(folder: str, settings: dict) -> tuple[dict, list[tuple[int, int]]]:
    """(pre-token counts, merge ids so far) from a checkpoint folder made with the same ``settings``."""
    file = "settings.json"
    try:
        with open(os.path.join(folder, file), "rb") as f:
            saved = json.load(f)
        if not isinstance(saved, dict):
            raise ValueError("not a JSON object")
        file = "merges.json"
        with open(os.path.join(folder, file), "rb") as f:
            replay = [(left, right) for left, right in json.load(f)]
        file = "counts.pickle"
        with open(os.path.join(folder, file), "rb") as f:
            counts = pickle.load(f)
        if not isinstance(counts, dict):
            raise ValueError("not the pre-token counts")
    except FileNotFoundError:
        if file != "settings.json":  # written last: with it there, the state was whole, and lost a file since
            raise DamagedState(folder, file, "no such file") from None
        raise FileNotFoundError(f"no training state to resume in {folder!r}: start without resume") from None
    except OSError as e:  # there, but not readable: a permission, a folder where the file should be
        raise UnreadableState(folder, file, e) from None
    # what JSON and pickle raise for bytes that are not what was written (pickle: whatever the bytes call for)
    except (ValueError, TypeError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError,
            KeyError) as e:
        raise DamagedState(folder, file, str(e) or type(e).__name__) from None
    changed = [key for key in settings if saved.get(key) != settings[key]]
    if changed:
        raise SettingsChanged(f"the training state in {folder!r} was made with other {', '.join(changed)}: "
                              "start without resume, or resume with the same ones", changed)
    return counts, replay


def save_merges(folder: str, merge_ids: list[tuple[int, int]]) -> None:
    """Keep the merges so far, as pairs of token ids, in the checkpoint ``folder``."""
    write_atomically(os.path.join(folder, "merges.json"), json.dumps(merge_ids).encode())
