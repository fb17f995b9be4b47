"""Download a file so that a half-finished or damaged copy can never be mistaken for a good one.

The idea: bytes only ever land in ``dest + ".part"`` next to the destination. The part file becomes
``dest`` (one atomic ``os.replace``) only after two checks pass:

1. its size equals the size the server announced (``Content-Length``), and
2. when the caller knows the file's sha256, the digest matches.

So ``dest`` existing means "complete", and a crash, a dropped connection or Ctrl-C at any moment leaves
at worst a ``.part``. The next call continues that ``.part`` with an HTTP range request
(``Range: bytes=N-``) instead of starting again, which matters for GPT-2's 0.5-6 GB checkpoints.

Failures that may go away by themselves (timeouts, a connection reset or a body cut short, HTTP 5xx)
are retried with exponential backoff; each retry resumes from whatever the ``.part`` already holds.
Failures that retrying will not fix fail at once: a 4xx answer (404 and friends), and a server that
cannot be reached at all (its name does not resolve, or nothing accepts the connection: typically no
network), which raises :class:`CannotConnect`. Every :class:`DownloadError` says how to put the file
in place by hand, and its ``reason`` holds the cause alone, for callers that report many files at once.

One run at a time fetches a given ``dest``: two runs asking for the same file at once (two terminals fetching the
same GPT-2 size) would append to the same ``.part``. A second run waits for the first, saying so in one line, and
then finds the file in place (or, if the first failed, resumes its ``.part``). The lock is an ``flock`` on a small
file named by a hash of ``dest``'s real path (symbolic links followed), in this user's own folder in the temporary
folder (:func:`tokenizer.user_cache.temporary_cache_root`: not beside ``dest``, nor in a cache folder, since an
offline attempt makes no folder there), released by the system on any exit of the run that holds it, a crash or a kill
included, and removed by the run that holds it when it is done (a run waiting on the file removed then opens the path
again: :func:`_take_lock`). The lock file holds the holder's process id (named in the waiting run's line) and, once
its server has answered, the file's size, for the waiting run's bar (:func:`download_progress`). A caller that fills
a folder file by file (a GPT-2 size) takes the same lock over the folder (:func:`one_run_at_a_time`), so that a run
joining another's download says once that it waits, not once per file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import os
import pathlib
import re
import time

from . import command_line
from .user_cache import temporary_cache_root

DEFAULT_OPENAIPUBLIC_URL = "https://openaipublic.blob.core.windows.net"

# Read and hash in 1 MiB pieces: large enough to be fast, small enough to keep memory flat.
CHUNK_SIZE = 1 << 20

# The first retry waits this long, each later one twice as long as the one before.
# Tests patch it (or `_sleep`) so that retries cost nothing.
BACKOFF_SECONDS = 0.5
_sleep = time.sleep
RETRIES = 4  # download_file's default: 0.5 + 1 + 2 + 4 = 7.5 s of waits in all


class DownloadError(OSError):
    """A download failed; the message names the URL and how to get the file in place by hand.

    ``reason`` is the cause alone (e.g. ``"HTTP 404 Not Found"``), without the URL or the advice.
    """

    def __init__(self, message: str, *, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message


class CannotConnect(DownloadError):
    """The server could not be reached at all (name not resolved, connection refused): not retried,
    since asking again at once would meet the same answer, and other files from it will fail too."""


class KeptFailing(DownloadError):
    """The server failed (5xx, a body cut short, a timeout) on every attempt, retries included: a caller fetching
    several files from it can give the others fewer tries (GPT-2's seven files)."""


class ChecksumError(ValueError):
    """A downloaded (or already present) file does not have the sha256 the caller expected; ``actual`` is the one
    it has, when known (for callers that report many files at once)."""

    def __init__(self, message: str, *, actual: str | None = None):
        super().__init__(message)
        self.actual = actual


class _Transient(Exception):
    """Internal: a failure worth retrying (5xx, a body cut short). Never escapes this module."""


def openai_public_url(path: str) -> str:
    """Return the URL of ``path`` on OpenAI's public blob storage.

    The root comes from ``$OPENAIPUBLIC_URL`` when set (a mirror, or a local server in tests),
    else :data:`DEFAULT_OPENAIPUBLIC_URL`. Exactly one "/" joins root and path.
    """
    root = os.environ.get("OPENAIPUBLIC_URL") or DEFAULT_OPENAIPUBLIC_URL
    return root.rstrip("/") + "/" + path.lstrip("/")


def sha256_file(path) -> str:
    """Return the hex sha256 of the file at ``path``, read in chunks so size does not matter."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_SIZE), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(
    url: str,
    dest,
    *,
    sha256: str | None = None,
    progress: bool = True,
    retries: int = RETRIES,
    timeout: float = 30.0,
    desc: str | None = None,
    keep_part_on_full_disk: bool = True,
) -> pathlib.Path:
    """Download ``url`` to ``dest`` (creating parent directories once the server sends the file) and return
    ``dest`` as a Path.

    An existing ``dest`` is trusted and kept, unless ``sha256`` is given and does not match, in which
    case it is downloaded again. ``retries`` is how many times a transient failure is retried after the
    first attempt. ``timeout`` (seconds) bounds connecting and each wait for data, not the whole
    transfer. ``progress`` reports on stderr, as ``desc`` (default: the file name), once the server answers with
    the file (a server that cannot be reached, or answers 404, reports nothing): a tqdm bar on a terminal, and
    elsewhere (a log, a pipe) one line when the transfer starts and one when it ends, instead of a bar's ``\\r``s.

    Raises :class:`DownloadError` (an ``OSError``) when the file cannot be fetched, and
    :class:`ChecksumError` (a ``ValueError``) when the finished download has the wrong sha256;
    the bad bytes are deleted so that the next attempt starts clean. A disk that fills up raises its ``OSError``
    (ENOSPC, EDQUOT); the bytes received stay in the ``.part`` for the next run to resume from, unless
    ``keep_part_on_full_disk`` is False (a small file, whose half only holds on to the space): then the ``.part``
    is removed before this run lets another one fetch ``dest``, which would otherwise resume from it as it vanished.
    """
    dest = pathlib.Path(dest)
    if sha256 is not None:
        sha256 = sha256.lower()
    if dest.is_file() and (sha256 is None or sha256_file(dest) == sha256):
        return dest

    # (a run waiting for another's download of dest draws a bar of that run's bytes, when this one would draw one)
    what = f"{desc or dest.name}, by the other run"
    received = (lambda: (what, *download_progress(dest))) if progress else None
    with one_run_at_a_time(dest, f"downloading {desc or dest.name} to {dest}", received=received) as waited:
        if waited and dest.is_file() and (sha256 is None or sha256_file(dest) == sha256):
            return dest  # the other run fetched it
        try:
            return _download(url, dest, sha256=sha256, progress=progress, retries=retries, timeout=timeout,
                             desc=desc)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT) and not keep_part_on_full_disk:
                dest.with_name(dest.name + ".part").unlink(missing_ok=True)  # (the lock is still held)
            raise


@contextlib.contextmanager
def one_run_at_a_time(target, doing: str, *, received=None):
    """Hold the lock on writing ``target`` (a file, or a folder filled file by file) for the ``with`` block, waiting
    while another run holds it, which is said in one line on stderr: "another run (process N) is ``doing``; waiting
    for it to finish ...". Yields whether it waited. ``received`` (a function returning ``(what, bytes, total)``:
    what the other run is fetching, the bytes of it written so far and its size, None when not known) draws a bar
    of them on a terminal once the wait is slow: ``bytes/total`` with the size, a count of bytes without. The run
    holding the lock of a file says its size there (:func:`download_progress`). Where no lock can be taken (no
    fcntl, as on Windows; a cache folder that cannot be written), the work goes on without one, as it did before."""
    if importlib.util.find_spec("fcntl") is None:  # (_take_lock imports it)
        yield False
        return
    lock_path = _lock_path(target)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock, waited = _take_lock(lock_path, doing, received)
    except OSError:
        yield False
        return
    try:
        os.ftruncate(lock, 0)
        os.pwrite(lock, str(os.getpid()).encode("ascii"), 0)  # who holds it, for the next run's line
        _held_locks[lock_path] = lock
        yield waited
    finally:
        _held_locks.pop(lock_path, None)
        # The lock file is removed, while still held, so that the folder does not gain a file per file ever
        # downloaded. A run that opened this file before the removal and waits on it takes a lock on a file no
        # longer at lock_path; _take_lock sees that and opens the path again, so only one run ever holds the
        # lock of the path (removing it without that check would let two runs hold "the" lock at once).
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        os.close(lock)  # (closing releases the lock; a run that dies releases it the same way, its file kept)


_held_locks: dict[pathlib.Path, int] = {}  # the lock files this process holds, by path: where sizes are said


def _lock_path(target) -> pathlib.Path:
    """The lock file of writing ``target``: named by a hash of its real path (a folder named through a symbolic
    link, ~/models -> /data/models, is still the one folder)."""
    key = hashlib.sha256(os.fsencode(os.path.realpath(target))).hexdigest()[:16]
    return temporary_cache_root() / "download-locks" / f"{key}.lock"


def _say_size(dest: pathlib.Path, total: int | None) -> None:
    """Write the size of the file this run is fetching to ``dest`` (the server's Content-Length) after its
    process id in the lock file it holds, for a run waiting for it to draw a bar with a total."""
    lock = _held_locks.get(_lock_path(dest))
    if lock is None or total is None:
        return
    with contextlib.suppress(OSError):  # (a size not said costs only the waiting run's total)
        os.pwrite(lock, f"{os.getpid()} {total}".encode("ascii"), 0)


def download_progress(dest) -> tuple[int, int | None]:
    """How far a download to ``dest``, by whichever run, has come: ``(bytes received, size)``, the size None when
    not known (no run has said it, or the server did not). A file in place is whole: its size twice."""
    dest = pathlib.Path(dest)
    part = dest.with_name(dest.name + ".part")
    for path, whole in ((part, False), (dest, True)):
        with contextlib.suppress(OSError):
            size = path.stat().st_size
            return (size, size) if whole else (size, _said_size(dest))
    return 0, _said_size(dest)


def _said_size(dest: pathlib.Path) -> int | None:
    """The size the run fetching ``dest`` said in its lock file (:func:`_say_size`), or None."""
    try:
        lock = os.open(_lock_path(dest), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fields = os.pread(lock, 64, 0).split()
    except OSError:
        return None
    finally:
        os.close(lock)
    return int(fields[1]) if len(fields) == 2 and fields[1].isdigit() else None


def _take_lock(lock_path: pathlib.Path, doing: str, received) -> tuple[int, bool]:
    """Open ``lock_path`` (made if missing) and flock it, waiting for the run that holds it; returns the file and
    whether this run waited. A lock taken on a file that is no longer the one at ``lock_path`` (its holder
    removed it when done) guards nothing: it is let go and the path opened again."""
    import fcntl

    waited = False
    while True:
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not waited:  # said once, however often the path is opened again
                    holder = (os.pread(lock, 64, 0).decode("ascii", "replace").split() or [""])[0]  # (PID [SIZE])
                    by = f" (process {holder})" if holder.isdigit() else ""
                    command_line.say(f"another run{by} is {doing}; waiting for it to finish ...")
                    waited = True
                _wait_for_lock(lock, received)  # (Ctrl-C while waiting ends this run, the other goes on)
            if _same_file(lock, lock_path):
                return lock, waited
        except BaseException:
            os.close(lock)
            raise
        os.close(lock)


def _same_file(descriptor: int, path: pathlib.Path) -> bool:
    """Whether the open file ``descriptor`` is the file at ``path`` (False when ``path`` is gone)."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    opened = os.fstat(descriptor)
    return (opened.st_dev, opened.st_ino) == (at_path.st_dev, at_path.st_ino)


WAIT_POLL_SECONDS = 0.25  # how often a run waiting for another's download looks at its lock and its bytes


def _wait_for_lock(lock: int, received) -> None:
    """Take the lock on the file ``lock``, waiting as long as another run holds it: asleep in flock, or, when there
    is a bar to draw (``received``, on a terminal), looking every WAIT_POLL_SECONDS at the lock and the bytes."""
    import fcntl

    if received is None or not command_line.show_progress():
        fcntl.flock(lock, fcntl.LOCK_EX)
        return
    what, done, total = received()
    # (initial: the bytes already there are no speed of this wait's)
    bar = command_line.bar_if_slow(desc=what, total=total, initial=done, unit="B", unit_scale=True, unit_divisor=1024)
    try:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                what, done, total = received()
                if what != bar.desc:  # (the other run is on its next file)
                    bar.set_description_str(what, refresh=False)
                bar.total = total  # (learnt once the other run's server has answered)
                bar.update(done - bar.n)
                time.sleep(WAIT_POLL_SECONDS)
    finally:
        bar.close()


def _download(url: str, dest: pathlib.Path, *, sha256, progress, retries, timeout, desc) -> pathlib.Path:
    """download_file's work, once this run holds the lock on ``dest``."""
    part = dest.with_name(dest.name + ".part")
    # imported here: it takes ~0.1 s (tqdm too, imported by the bar), and a warm start (a file already in
    # place) needs neither
    import requests

    # Drawn once the server has answered with the file, so that an offline attempt shows no empty bar; the
    # folder is made only when the .part file is written, so that it leaves no empty folder either.
    bar = _LazyBar(desc or dest.name, url, progress)
    try:
        for attempt in range(retries + 1):
            try:
                _fetch_into(url, part, timeout, bar)
                bar.finish()
                break
            except (_Transient, requests.ConnectionError, requests.Timeout,
                    requests.exceptions.ChunkedEncodingError) as exc:
                refusal = _connection_refusal(exc)
                if refusal is not None:
                    reason = f"cannot connect to {_server(url)}: {refusal}"
                    raise CannotConnect(
                        f"could not download {url}: {reason}; are you offline? {_by_hand(url, dest)}",
                        reason=reason,
                    ) from exc
                why = f"the server sent nothing for {timeout:g} s" if isinstance(exc, requests.Timeout) else str(exc)
                if attempt == retries:
                    have = part.stat().st_size if part.exists() else 0
                    kept = f"; the {have:,} bytes received are kept in {part}, run again to resume" if have else ""
                    tries = f"{retries + 1} attempt{'s' if retries else ''}"
                    reason = f"{why} (after {tries}){kept}"
                    raise KeptFailing(f"could not download {url}: {reason}. {_by_hand(url, dest)}",
                                      reason=reason) from exc
                delay = BACKOFF_SECONDS * 2**attempt
                if progress:  # (no bar is drawn before the file comes: a 500's backoff would pass in silence)
                    command_line.say(f"{desc or dest.name}: {why}; trying again in {delay:g} s (attempt "
                                     f"{attempt + 2} of {retries + 1})")
                _sleep(delay)
    except KeyboardInterrupt:  # Ctrl-C mid-transfer: what was received stays, and the next run goes on from it
        have = part.stat().st_size if part.exists() else 0
        if not have:
            raise
        raise command_line.Interrupted(f"the {have:,} bytes of {desc or dest.name} received so far are kept in "
                                       f"{part}; run again to resume from there") from None
    finally:
        bar.close()

    if sha256 is not None:
        actual = sha256_file(part)
        if actual != sha256:
            # Resuming from these bytes could never produce the right file, so drop them.
            part.unlink()
            raise ChecksumError(
                f"{url} downloaded to {dest} has the wrong sha256: expected {sha256}, got {actual}. "
                f"The download was deleted; try again, and if it keeps failing the file on the server "
                f"differs from the one this code expects.",
                actual=actual,
            )
    os.replace(part, dest)
    return dest


class _LazyBar:
    """What a download says on stderr, begun on its first :meth:`start` (when the server has answered): a tqdm
    bar in bytes on a terminal (:func:`tokenizer.command_line.show_progress`), else a line at the start of each
    transfer and one at the end, so that a log holds no bar redrawn with ``\\r``s and still says what waits."""

    def __init__(self, desc: str, url: str, enabled: bool):
        self.desc, self.url, self.enabled, self.bar = desc, url, enabled, None
        self.as_lines = enabled and not command_line.show_progress()
        self.started, self.total = False, None

    def start(self, total: int | None, done: int) -> None:
        self.started, self.total = True, total
        if self.as_lines:
            size = f"{total:,} bytes" if total is not None else "size unknown"
            resumed = f", resuming at byte {done:,}" if done else ""
            command_line.say(f"downloading {self.desc} from {self.url} ({size}{resumed}) ...")
            return
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(desc=self.desc, unit="B", unit_scale=True, unit_divisor=1024, disable=not self.enabled)
        self.bar.reset(total=total)
        self.bar.update(done)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def finish(self) -> None:
        """The transfer is complete: said once, as a line (a bar shows it already)."""
        if self.as_lines and self.started:  # (a .part found whole already was never started: nothing to say)
            size = f" ({self.total:,} bytes)" if self.total is not None else ""
            command_line.say(f"downloaded {self.desc}{size}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _fetch_into(url: str, part: pathlib.Path, timeout: float, bar: _LazyBar) -> None:
    """One attempt: append the missing bytes of ``url`` to ``part``; return only when it is complete."""
    have = part.stat().st_size if part.exists() else 0
    # "identity" keeps the body byte-for-byte what is stored, so sizes and offsets mean file bytes.
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
    import requests

    with requests.get(url, headers=headers, stream=True, timeout=timeout) as resp:
        if resp.status_code == 416 and have:
            # Nothing left after byte `have`: either the .part is already whole, or it is longer than
            # the file (a different file was there before). Content-Range "bytes */SIZE" tells which.
            size = _total_from_content_range(resp.headers.get("Content-Range", ""))
            if size == have:
                return
            part.unlink()
            raise _Transient(f"{part} did not fit the file on the server; starting again")
        if resp.status_code >= 500:
            raise _Transient(f"HTTP {resp.status_code} {resp.reason}")
        if resp.status_code >= 400:
            reason = f"HTTP {resp.status_code} {resp.reason}"
            raise DownloadError(f"could not download {url}: {reason}. {_by_hand(url, part)}", reason=reason)

        start = 0
        if resp.status_code == 206:
            start = _start_from_content_range(resp.headers.get("Content-Range", ""))
            if start != have:
                part.unlink(missing_ok=True)
                raise _Transient(f"server resumed at byte {start}, not {have}; starting again")
        # Any other success (200) carries the whole file, so what the .part held is thrown away.
        length = resp.headers.get("Content-Length")
        total = start + int(length) if length is not None else None

        part.parent.mkdir(parents=True, exist_ok=True)
        _say_size(part.with_name(part.name[: -len(".part")]), total)
        try:
            with open(part, "ab" if start else "wb") as f:
                bar.start(total, start)  # (once the file is open: a folder that refuses it says only its error)
                for chunk in resp.iter_content(chunk_size=CHUNK_SIZE):
                    f.write(chunk)
                    bar.update(len(chunk))
        except requests.exceptions.ChunkedEncodingError as exc:  # (its text is a tuple of urllib3's reprs)
            raise _Transient(_cut_short(part.stat().st_size, total)) from exc
    size = part.stat().st_size
    if total is not None and size != total:
        raise _Transient(_cut_short(size, total))


def _cut_short(received: int, total: int | None) -> str:
    """Why an attempt ended, in words: the connection broke after ``received`` bytes of the file (``total``)."""
    return f"the connection broke after {received:,} of the file's {total:,} bytes" if total is not None else \
        f"the connection broke after {received:,} bytes"


def _start_from_content_range(value: str) -> int:
    """First byte offset of a 206 answer's ``Content-Range: bytes START-END/SIZE``; -1 if unreadable."""
    match = re.match(r"\s*bytes\s+(\d+)-", value)
    return int(match[1]) if match else -1


def _total_from_content_range(value: str) -> int | None:
    """Full file size from ``Content-Range: bytes .../SIZE`` (as sent with 416); None if unknown."""
    match = re.search(r"/(\d+)\s*$", value)
    return int(match[1]) if match else None


def _connection_refusal(exc: Exception) -> str | None:
    """Why no connection could be made at all (DNS failure, connection refused), or None when ``exc`` is
    something else: a timeout, a reset mid-transfer, an HTTP error, which are worth retrying."""
    import requests
    import urllib3

    if not isinstance(exc, requests.ConnectionError) or isinstance(exc, requests.Timeout):
        return None
    cause = exc.args[0] if exc.args else None
    cause = getattr(cause, "reason", cause)  # requests wraps urllib3's MaxRetryError, which holds the cause
    if not isinstance(cause, urllib3.exceptions.NewConnectionError):  # NameResolutionError is one too
        return None
    # "HTTPConnection(host=..., port=...): Failed to resolve 'x' (...)" -> the part after the address
    return str(cause).split("): ", 1)[-1]


def _server(url: str) -> str:
    """``scheme://host[:port]`` of ``url``."""
    match = re.match(r"[^:/]+://[^/]*", url)
    return match[0] if match else url


def _by_hand(url: str, dest: pathlib.Path) -> str:
    """The advice every DownloadError ends with: how to get past it without this code's help."""
    final = dest.with_name(dest.name[: -len(".part")]) if dest.name.endswith(".part") else dest
    return (
        f"To supply the file yourself, fetch {url} some other way and place it at {final} "
        f"(an existing file is used as is); for files from OpenAI's storage you can instead point "
        f"$OPENAIPUBLIC_URL at a mirror (default {DEFAULT_OPENAIPUBLIC_URL})."
    )
