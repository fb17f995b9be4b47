"""Where a command writes: one rule for every output, checked before any work, written so that a failure leaves
nothing behind.

Every writer in this project uses it: ``encode-file``'s ``.bin``, ``encode-dataset``'s folder, ``train``'s
tokenizer folder and its ``DIR.checkpoint``, :meth:`Encoding.save`, and ``gpt2 --save_hf``'s model folder. Each
checks its destination with :func:`check_file` or :func:`check_folder` before it reads or computes anything,
then writes with :func:`replaced_file` or :func:`replaced_folder_files`. (The compiled kernels' matrices kept
beside a checkpoint, :mod:`gpt2_numpy.rows_cache`, are written with :func:`replaced_file` too: a cache the
user did not name, so nothing to check first; a folder it cannot write only costs the next run the work.)

The rule, and why:

* **An empty path is refused.** ``Path("")`` is the current folder, so ``--out ''`` would scatter files there.
* **A device, a FIFO or a socket is refused.** Outputs are written beside their destination and renamed over
  it, which would replace ``/dev/null`` (for the whole machine, run as root) instead of writing into it. Where
  a command takes ``-`` for standard output (``encode-file --out -``), the shell can send that anywhere.
* **A symlink is written through**: the output lands where the link points and the link stays, as a user who
  pointed ``data.bin`` at a larger disk expects. Refusing would break that; replacing the link would move the
  data to the wrong disk.
* **A folder where a file is meant, or a file where a folder is meant, is refused**, before the work rather
  than after it (``encode-file --out somefolder`` used to fail only once everything was encoded).
* **A place that cannot be written is refused** (no permission, a read-only file system, ``/proc``): found by
  creating and removing a file there, the only check that tells the truth for every file system and for root.
* **An existing output is refused** unless the caller says to replace it: ``--force`` on the command line,
  ``overwrite=True`` in Python. For a folder, "existing" means it holds what the writer would replace (a saved
  tokenizer, a model); other files in it are never touched.
* **Missing parent folders are created**, and removed again if the work fails.

What is written goes to a hidden sibling (``.NAME.<random>.partial``) that is renamed into place once complete,
with the permissions of the file it replaces (a new file: the umask's); an error or Ctrl-C removes it. Errors
are one line naming the path and what to do instead: ``ValueError`` for an empty path or a device,
``FileExistsError``, ``IsADirectoryError``, ``NotADirectoryError`` and ``PermissionError`` (all ``OSError``) for
the rest.

What this module does not do: decide what a writer writes, or which files make a folder "hold" an output
(each writer says, e.g. :func:`tokenizer.saving.saved_tokenizer_files`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
import sys
import tempfile
import uuid
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from .command_line import WatchedStdout, stdout_named

STDOUT = "-"  # as an output path, where a command takes it: standard output


def check_file(path, *, overwrite: bool = False, flag: str | None = None, stdout_ok: bool = False) -> Path:
    """Check ``path`` as the destination of one file (see the module's rule); returns where to write it (a
    symlink followed), or ``"-"`` for standard output when ``stdout_ok``.

    ``flag`` (e.g. ``"--out"``) is how a command line names the path; messages then say ``--force`` rather
    than ``overwrite=True``.

    >>> check_file("")
    Traceback (most recent call last):
    ValueError: the output path is empty; name a file
    """
    where = _Where(path, flag, what="file")
    if stdout_ok and os.fspath(path) == STDOUT:
        if sys.stdout.isatty():
            raise ValueError(f"{where}: standard output is a terminal; redirect it (> FILE or | COMMAND)")
        return Path(STDOUT)
    target = where.target
    if where.given.endswith(os.sep):  # "newdir/" names a folder, though realpath drops the slash
        raise IsADirectoryError(f"{where} names a folder; name a file (e.g. {Path(path) / 'out.bin'})")
    info = where.stat()
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(f"{where} is a folder; name a file (e.g. {Path(path) / 'out.bin'})")
        if not stat.S_ISREG(info.st_mode):
            instead = f", or pass --out - and redirect standard output to it (> {where.given})" if stdout_ok else ""
            raise ValueError(f"{where} is {_kind(info)}, not a regular file: the output would replace it; "
                             f"name a regular file{instead}")
        if not overwrite:
            raise FileExistsError(f"{where} already exists; {where.replace_hint} to replace it, or choose another")
    _check_writable(where, target.parent)
    return target


def check_folder(path, *, holds: Callable[[Path], list[str]] = lambda folder: [], what: str = "files",
                 overwrite: bool = False, flag: str | None = None, overwrite_does: str = "replace it") -> Path:
    """Check ``path`` as the destination of a folder of files (see the module's rule); returns where to write it
    (a symlink followed). ``holds(folder)`` names the files of an existing folder that writing would replace,
    ``what`` says what they are (``"a tokenizer"``): unless ``overwrite`` (which does ``overwrite_does``), a
    folder holding any is refused.

    >>> check_folder("")
    Traceback (most recent call last):
    ValueError: the output path is empty; name a folder
    """
    where = _Where(path, flag, what="folder")
    target = where.target
    info = where.stat()
    if info is not None:
        if stat.S_ISREG(info.st_mode):
            raise NotADirectoryError(f"{where} is a file, and a folder is written there; name a new folder or "
                                     "an empty one")
        if not stat.S_ISDIR(info.st_mode):
            raise ValueError(f"{where} is {_kind(info)}, not a folder; name a new folder or an empty one")
        held = holds(target)
        if held and not overwrite:
            raise FileExistsError(f"{where} already holds {what} ({', '.join(held)}); {where.replace_hint} to "
                                  f"{overwrite_does}, or choose another")
        _check_writable(where, target)
    else:
        _check_writable(where, target.parent)
    return target


@contextlib.contextmanager
def replaced_file(target) -> Iterator[BinaryIO]:
    """Open a hidden sibling of ``target`` (checked by :func:`check_file`) for writing; when the block ends
    without error it is renamed to ``target``, else removed. ``"-"`` is standard output, written as it comes."""
    if os.fspath(target) == STDOUT:
        yield WatchedStdout(sys.stdout.buffer)  # a write that fails (a full disk) names stdout
        with stdout_named():
            sys.stdout.buffer.flush()
        return
    target = Path(target)
    made = make_folders(target.parent)
    tmp = partial_path(target)
    try:
        with open(tmp, "xb") as out:
            yield out
        keep_mode(tmp, target)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        remove_folders(made)
        raise


@contextlib.contextmanager
def replaced_folder_files(target, *, stale: Callable[[Path], list[str]] = lambda folder: []) -> Iterator[Path]:
    """A new, empty hidden folder beside ``target`` (inside it, if it exists; checked by :func:`check_folder`) to
    write the files in.

    When the block ends without error: a ``target`` that does not exist becomes that folder (one rename, so it
    is complete or absent); into an existing one each file is moved, replacing its namesake, and the files
    ``stale(target)`` names that were not written are removed (a tokenizer's files of another format, which
    loading would find first). Other files of ``target`` are left alone. On an error the hidden folder is
    removed. Folders are made with the user's umask, as ``mkdir`` makes them.
    """
    target = Path(target)
    made = make_folders(target.parent)
    into = target.is_dir()  # then the hidden folder is made inside it: only the folder written to must be writable
    tmp = partial_path(target) if not into else target / partial_path(target).name
    try:
        tmp.mkdir()
        yield tmp
        if not into:
            os.rename(tmp, target)
            return
        written = {p.name for p in tmp.iterdir()}
        for name in written:
            keep_mode(tmp / name, target / name)
            os.replace(tmp / name, target / name)
        for name in stale(target):
            if name not in written:
                (target / name).unlink(missing_ok=True)
        tmp.rmdir()
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_folders(made)
        raise


def keep_mode(written: Path, replaced: Path) -> None:
    """Give ``written`` the permissions of the file ``replaced`` it is about to replace, if there is one: a
    file the user made group-writable or read-only stays so, as when a program writes into it in place. A new
    file keeps the user's umask."""
    try:
        mode = stat.S_IMODE(os.stat(replaced).st_mode)
    except OSError:  # nothing replaced (or nothing to learn from it)
        return
    os.chmod(written, mode)


def partial_path(target: Path) -> Path:
    """Where ``target`` is written until it is complete: a hidden name of its own, never mistaken for it."""
    return target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")


def partial_paths(target: Path) -> list[Path]:
    """The :func:`partial_path` siblings of ``target`` that a killed writer left behind."""
    return sorted(target.parent.glob(f".{glob.escape(target.name)}.*.partial"))


# ---- the checks' parts ------------------------------------------------------------------------------------


class _Where:
    """A destination as given, how messages name it, and where it really is."""

    def __init__(self, path, flag: str | None, *, what: str):
        given = os.fspath(path)
        if given == "":  # Path("") would be the current folder
            raise ValueError(f"{flag} '': an empty path; name a {what}" if flag else
                             f"the output path is empty; name a {what}")
        self.given = given
        self.name = f"{flag} {given}" if flag else given
        self.replace_hint = "pass --force" if flag else "pass overwrite=True"
        self.target = Path(os.path.realpath(given))  # a symlink (even a dangling one) is written through

    def stat(self) -> os.stat_result | None:
        try:
            return os.stat(self.target)
        except (FileNotFoundError, NotADirectoryError):  # missing; a file on the way is told by _check_writable
            return None
        except OSError as e:
            raise PermissionError(f"{self}: cannot look at it ({e.strerror or e}); choose another place") from None

    def __str__(self) -> str:
        return self.name


def _kind(info: os.stat_result) -> str:
    mode = info.st_mode
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _check_writable(where: _Where, folder: Path) -> None:
    """Create and remove a file in ``folder`` (or, if it is missing, in the nearest folder above it that exists,
    where the missing ones will be made)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"{where}: {folder} is not a folder; choose another place")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-check-", dir=folder)
    except OSError as e:
        raise PermissionError(f"{where}: cannot write in {folder} ({e.strerror or e}); choose another place") from None
    os.close(fd)
    os.unlink(probe)


def make_folders(folder: Path) -> list[Path]:
    """Make ``folder`` and the missing folders above it; returns those made, the outermost first, for
    :func:`remove_folders` to take back after a failure."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    made = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except BaseException:
        remove_folders(made)
        raise
    return made


def remove_folders(made: list[Path]) -> None:
    """Remove the folders :func:`make_folders` made, innermost first, each only if it is empty."""
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()
