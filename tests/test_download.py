"""Tests for tokenizer/download.py against a local, scriptable HTTP server (no internet needed).

Each failure mode a real download meets is staged on purpose (see conftest_download.FileServer) and the
test checks the promise that matters: ``dest`` appears only complete and correct, and otherwise the
error says what went wrong and where.
"""

import hashlib
import io
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tqdm

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # let `import tokenizer` work however pytest was started
    sys.path.insert(0, str(ROOT))

from conftest_download import file_server  # noqa: E402,F401 - a fixture, used by name
from tokenizer import command_line, download  # noqa: E402
from tokenizer.download import CannotConnect, ChecksumError, DownloadError, download_file  # noqa: E402

# Several read chunks long, so a cut in the middle leaves a useful partial file to resume from.
BODY = bytes(range(256)) * (4 * 1024 * 3 + 7)  # about 3 MiB, not a round number
PATH = "/gpt-2/models/124M/model.ckpt.data-00000-of-00001"


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    """Record retry delays instead of sleeping them, so retry tests are instant."""
    delays = []
    monkeypatch.setattr(download, "_sleep", delays.append)
    return delays


@pytest.fixture
def served(file_server, monkeypatch):
    file_server.files[PATH] = BODY
    monkeypatch.setenv("OPENAIPUBLIC_URL", file_server.url)
    return file_server


def _get(tmp_path, **kwargs):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    kwargs.setdefault("progress", False)
    return dest, download_file(download.openai_public_url(PATH), dest, **kwargs)


def _no_part_files(directory: Path) -> bool:
    return not list(directory.rglob("*.part"))


def test_openai_public_url_default_and_override(monkeypatch):
    monkeypatch.delenv("OPENAIPUBLIC_URL", raising=False)
    assert download.openai_public_url("gpt-2/x") == "https://openaipublic.blob.core.windows.net/gpt-2/x"
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://mirror.local/base/")
    assert download.openai_public_url("/gpt-2/x") == "http://mirror.local/base/gpt-2/x"


def test_sha256_file(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(BODY)
    assert download.sha256_file(path) == hashlib.sha256(BODY).hexdigest()


def test_plain_download_creates_dirs_and_leaves_no_part(served, tmp_path):
    dest, returned = _get(tmp_path)
    assert returned == dest
    assert dest.read_bytes() == BODY
    assert _no_part_files(tmp_path)
    assert served.requests_for(PATH) == [None]


def test_cut_connection_resumes_with_range(served, tmp_path, no_backoff):
    served.fault(PATH, "cut")
    dest, _ = _get(tmp_path)
    assert dest.read_bytes() == BODY
    assert _no_part_files(tmp_path)
    first, second = served.requests_for(PATH)
    assert first is None
    resumed_at = int(second.removeprefix("bytes=").removesuffix("-"))
    assert 0 < resumed_at <= len(BODY) // 2  # continued the partial file instead of starting over
    assert no_backoff == [download.BACKOFF_SECONDS]


def test_existing_part_file_is_resumed(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    (dest.parent / (dest.name + ".part")).write_bytes(BODY[:12345])
    _get(tmp_path)
    assert dest.read_bytes() == BODY
    assert served.requests_for(PATH) == ["bytes=12345-"]


def test_server_ignoring_range_restarts_from_zero(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    # Garbage that must not end up in front of the real bytes.
    (dest.parent / (dest.name + ".part")).write_bytes(b"x" * 999)
    served.fault(PATH, "ignore-range")
    _get(tmp_path)
    assert dest.read_bytes() == BODY


def test_complete_part_file_is_finished_without_a_body(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    (dest.parent / (dest.name + ".part")).write_bytes(BODY)
    _get(tmp_path, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY
    assert served.requests_for(PATH) == [f"bytes={len(BODY)}-"]  # answered 416, nothing re-sent


def test_overlong_part_file_is_discarded(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    (dest.parent / (dest.name + ".part")).write_bytes(BODY + b"extra")
    _get(tmp_path)
    assert dest.read_bytes() == BODY


def test_500_once_is_retried(served, tmp_path, no_backoff):
    served.fault(PATH, "500")
    dest, _ = _get(tmp_path)
    assert dest.read_bytes() == BODY
    assert served.requests_for(PATH) == [None, None]
    assert no_backoff == [download.BACKOFF_SECONDS]


def test_backoff_doubles_and_gives_up_after_retries(served, tmp_path, no_backoff):
    served.fault(PATH, *["500"] * 10)
    with pytest.raises(DownloadError) as info:
        _get(tmp_path, retries=3)
    assert len(served.requests_for(PATH)) == 4
    base = download.BACKOFF_SECONDS
    assert no_backoff == [base, 2 * base, 4 * base]
    assert download.openai_public_url(PATH) in str(info.value)
    assert not (tmp_path / "deep" / "dir" / "model.ckpt.data").exists()


def test_short_body_is_an_error_and_keeps_the_part_for_resume(served, tmp_path):
    served.fault(PATH, *["short"] * 3)
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    with pytest.raises(DownloadError) as info:
        _get(tmp_path, retries=2)
    assert "resume" in str(info.value)
    assert not dest.exists()
    part = dest.with_name(dest.name + ".part")
    # Every real byte arrived, but the HTTP stack may drop its last unfinished read when the
    # connection dies, so expect a non-empty prefix of the file rather than all of it.
    kept = part.read_bytes()
    assert 0 < len(kept) <= len(BODY) and BODY.startswith(kept)
    # Once the server behaves, the next call finishes from the kept bytes.
    _get(tmp_path)
    assert dest.read_bytes() == BODY
    assert served.requests_for(PATH)[-1] == f"bytes={len(kept)}-"


@pytest.mark.parametrize("fault", ["short", "cut"])
def test_a_body_cut_short_on_every_attempt_is_said_in_words(served, tmp_path, fault):
    """A body that ended early through every retry was told as requests' tuple, "('Connection broken:
    IncompleteRead(99136 bytes read, 1000 more expected)', IncompleteRead(...))", and the bytes kept as "3145728":
    now in words, with the bytes received of how many."""
    served.fault(PATH, *[fault] * 3)
    with pytest.raises(DownloadError) as info:
        _get(tmp_path, retries=2)
    part = tmp_path / "deep" / "dir" / "model.ckpt.data.part"
    have = part.stat().st_size
    announced = len(BODY) + (1000 if fault == "short" else 0)  # (a "short" answer promises 1,000 bytes more)
    assert 0 < have < len(BODY)
    assert info.value.reason == (f"the connection broke after {have:,} of the file's {announced:,} bytes (after 3 "
                                 f"attempts); the {have:,} bytes received are kept in {part}, run again to resume")


def test_404_fails_at_once_naming_url_and_remedy(served, tmp_path):
    url = download.openai_public_url("/gpt-2/models/124M/missing.bin")
    dest = tmp_path / "missing.bin"
    with pytest.raises(DownloadError) as info:
        download_file(url, dest, progress=False)
    message = str(info.value)
    assert url in message and "404" in message
    assert str(dest) in message and "OPENAIPUBLIC_URL" in message
    assert served.requests_for("/gpt-2/models/124M/missing.bin") == [None]  # no retries
    assert isinstance(info.value, OSError)
    assert not dest.exists()


def free_port() -> int:
    """A port nobody listens on (the OS picked it free, and it is closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("url", [f"http://127.0.0.1:{free_port()}/x", "http://nonexistent.invalid/x"],
                         ids=["connection refused", "unknown host"])
def test_unreachable_server_fails_fast_without_retries(tmp_path, no_backoff, monkeypatch, url):
    lookups = []  # each attempt to connect, ours or one requests makes by itself, starts with one
    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kwargs: lookups.append(args[0])
                        or real_getaddrinfo(*args, **kwargs))
    with pytest.raises(CannotConnect) as info:
        download_file(url, tmp_path / "x", progress=False, retries=4)
    # one attempt, no pause: asking again would meet the same answer
    assert len(lookups) == 1 and no_backoff == []
    message = str(info.value)
    assert url in message and "cannot connect to" in message and "OPENAIPUBLIC_URL" in message
    assert info.value.reason.startswith(f"cannot connect to {url.rsplit('/', 1)[0]}: ")
    assert isinstance(info.value, DownloadError) and not (tmp_path / "x").exists()


def test_reason_is_the_cause_alone(served, tmp_path, no_backoff):
    with pytest.raises(DownloadError) as info:
        download_file(download.openai_public_url("/nothing/here"), tmp_path / "x", progress=False)
    assert info.value.reason == "HTTP 404 Not Found"
    served.fault(PATH, *["500"] * 3)
    with pytest.raises(DownloadError) as info:
        _get(tmp_path, retries=2)
    assert "HTTP 500" in info.value.reason and "after 3 attempts" in info.value.reason
    assert "OPENAIPUBLIC_URL" not in info.value.reason and "OPENAIPUBLIC_URL" in str(info.value)


def test_timeout_is_retried(served, tmp_path, no_backoff):
    served.fault(PATH, "stall")  # the first request is answered only once the client has asked again
    dest, _ = _get(tmp_path, timeout=0.2)
    assert dest.read_bytes() == BODY
    # the stalled request and its retry; each request after the first is a retry, after a pause (a machine too
    # busy to answer the retry in 0.2 s may see it time out too, and ask a third time)
    asked = served.requests_for(PATH)
    assert len(asked) >= 2 and len(no_backoff) == len(asked) - 1


def test_wrong_sha256_names_both_hashes_and_leaves_nothing(served, tmp_path):
    expected = "0" * 64
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    with pytest.raises(ValueError) as info:
        _get(tmp_path, sha256=expected)
    assert isinstance(info.value, ChecksumError)
    message = str(info.value)
    assert expected in message and hashlib.sha256(BODY).hexdigest() in message
    assert download.openai_public_url(PATH) in message
    assert not dest.exists() and _no_part_files(tmp_path)


def test_right_sha256_accepts_any_case(served, tmp_path):
    dest, _ = _get(tmp_path, sha256=hashlib.sha256(BODY).hexdigest().upper())
    assert dest.read_bytes() == BODY


def test_existing_file_is_not_downloaded_again(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"already here")
    _get(tmp_path)
    _get(tmp_path, sha256=hashlib.sha256(b"already here").hexdigest())
    assert served.requests == []
    assert dest.read_bytes() == b"already here"


def test_existing_file_with_wrong_sha256_is_replaced(served, tmp_path):
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"stale copy")
    _get(tmp_path, sha256=hashlib.sha256(BODY).hexdigest())
    assert dest.read_bytes() == BODY


def test_progress_bar_counts_exact_bytes(served, tmp_path, monkeypatch):
    monkeypatch.setattr(command_line, "show_progress", lambda: True)  # on a terminal: a bar
    bars = []

    class RecordingBar(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append((self, kwargs))

    monkeypatch.setattr(tqdm, "tqdm", RecordingBar)  # download_file imports it when it runs
    served.fault(PATH, "cut")  # the bar must also be right across a resume
    _get(tmp_path, progress=True, desc="weights")
    (bar, kwargs), = bars
    assert kwargs["unit"] == "B" and kwargs["unit_scale"] and kwargs["desc"] == "weights"
    assert bar.total == len(BODY) and bar.n == len(BODY)


def test_progress_false_prints_nothing(served, tmp_path, capsys):
    _get(tmp_path, progress=False)
    assert capsys.readouterr().err == ""
    os.remove(tmp_path / "deep" / "dir" / "model.ckpt.data")
    _get(tmp_path, progress=True, desc="weights")
    assert "weights" in capsys.readouterr().err


def test_off_a_terminal_a_download_says_one_line_at_its_start_and_one_at_its_end(served, tmp_path, monkeypatch,
                                                                                capsys):
    """A log or a pipe gets no bar redrawn with carriage returns, yet a long wait still says what it is; a transfer
    cut and resumed says so too."""
    monkeypatch.setattr(command_line, "show_progress", lambda: False)
    served.fault(PATH, "cut")
    _get(tmp_path, progress=True, desc="weights")
    said = capsys.readouterr().err
    assert "\r" not in said and "B/s" not in said
    lines = said.splitlines()
    url = download.openai_public_url(PATH)
    assert lines[0] == f"downloading weights from {url} ({len(BODY):,} bytes) ..."
    assert lines[1].startswith("weights: the connection broke after ") and lines[1].endswith(
        f" of the file's {len(BODY):,} bytes; trying again in 0.5 s (attempt 2 of 5)")
    assert lines[2].startswith(f"downloading weights from {url} ({len(BODY):,} bytes, resuming at byte ")
    assert lines[3:] == [f"downloaded weights ({len(BODY):,} bytes)"]


def test_a_wait_before_a_retry_is_said(served, tmp_path, monkeypatch, capsys, no_backoff):
    """A server answering 500 was retried in silence (0.5 + 1 + 2 + 4 s before the error, and nothing drawn, since
    no bar starts before the file comes): each wait now says why and for how long."""
    monkeypatch.setattr(command_line, "show_progress", lambda: False)
    served.fault(PATH, "500", "500")
    _get(tmp_path, progress=True, desc="weights")
    lines = capsys.readouterr().err.splitlines()
    assert lines[:2] == ["weights: HTTP 500 Internal Server Error; trying again in 0.5 s (attempt 2 of 5)",
                         "weights: HTTP 500 Internal Server Error; trying again in 1 s (attempt 3 of 5)"], lines
    assert lines[2].startswith("downloading weights from ") and len(lines) == 4
    assert no_backoff == [0.5, 1.0]
    served.fault(PATH, "500")
    os.remove(tmp_path / "deep" / "dir" / "model.ckpt.data")
    _get(tmp_path, progress=False)
    assert capsys.readouterr().err == ""  # progress=False: nothing said, retries included


@pytest.mark.parametrize("how", ["offline", "404"])
def test_a_failed_download_draws_no_bar_and_makes_no_folder(served, tmp_path, monkeypatch, capsys, how):
    """The bar is drawn only once the server sends the file, and the folder made only for the .part file:
    an offline attempt (or a 404) leaves nothing on stderr before its error, and nothing on disk."""
    bars = []
    monkeypatch.setattr(tqdm, "tqdm", lambda *args, **kwargs: bars.append(kwargs))
    url = f"http://127.0.0.1:{free_port()}/x" if how == "offline" else served.url + "/no/such/file"
    with pytest.raises(CannotConnect if how == "offline" else DownloadError):
        download_file(url, tmp_path / "deep" / "dir" / "x", progress=True)
    assert bars == [] and capsys.readouterr().err == ""
    assert list(tmp_path.iterdir()) == []


def test_get_encoding_offline_prints_only_its_error(tmp_path):
    """Offline, with no copy anywhere (a copy of the package without its data files): one error line, no empty
    progress bar before it, no empty folder."""
    (tmp_path / "no-data").mkdir()
    code = (f"import pathlib, tokenizer, tokenizer.registry; tokenizer.registry.PACKAGE_DATA = "
            f"pathlib.Path({str(tmp_path / 'no-data')!r}); tokenizer.get_encoding('cl100k_base')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENAIPUBLIC_URL": f"http://127.0.0.1:{free_port()}",
           "TOKENIZER_CACHE_DIR": str(tmp_path / "cache"), "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken")}
    env.pop("TOKENIZER_DATA_DIR", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "cl100k_base.tiktoken" not in proc.stderr.split("Traceback")[0]  # nothing (no bar) before the error
    assert "%|" not in proc.stderr and "B/s" not in proc.stderr
    assert "are you offline?" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "cache").exists()


def test_a_second_run_for_the_same_file_waits_for_the_first_and_fetches_nothing(served, tmp_path, capsys,
                                                                                  monkeypatch):
    """Two runs downloading the same file at once both appended to its one .part (the size check caught it, but
    the bytes were lost): the second now waits for the first, saying so in one line naming it, and finds the file
    in place."""
    served.stall_seconds = 1.5
    served.fault(PATH, "stall")  # the first run's request is held while the second one starts
    first = threading.Thread(target=_get, args=(tmp_path,))
    first.start()
    deadline = time.monotonic() + 10
    while not served.requests_for(PATH) and time.monotonic() < deadline:  # the first run holds the lock now
        time.sleep(0.01)
    dest, _ = _get(tmp_path)
    first.join()
    assert dest.read_bytes() == BODY and _no_part_files(tmp_path)
    assert served.requests_for(PATH) == [None]  # the second run asked the server for nothing
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and f"another run (process {os.getpid()}) is downloading" in said, said
    assert "waiting for it to finish" in said, said


class Terminal(io.TextIOWrapper):
    """A stderr that a person watches: progress bars are drawn on it."""

    def isatty(self):
        return True


@pytest.mark.parametrize("size_said", [True, False])
def test_a_run_waiting_for_anothers_download_of_the_file_draws_its_bytes_and_size(served, tmp_path, monkeypatch,
                                                                                  size_said):
    """A run waiting for another run's download of one file (a vocabulary file) drew no bar at all: on a terminal it
    now draws the bytes the other run has received, out of the file's size, which that run says beside its lock
    (the server's Content-Length); a size not said is drawn as a count of bytes."""
    terminal = Terminal(io.BytesIO(), encoding="utf-8", write_through=True)
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0)  # drawn at once
    monkeypatch.setattr(download, "WAIT_POLL_SECONDS", 0.01)
    if not size_said:
        monkeypatch.setattr(download, "_say_size", lambda dest, total: None)
    drawn = threading.Event()
    first = []
    counting = download._LazyBar.update

    def update(self, n):  # the first run, a chunk received: it goes on once the second one has drawn it
        counting(self, n)
        if threading.current_thread() in first:
            text = terminal.buffer.getvalue().decode()
            deadline = time.monotonic() + 10
            while "by the other run" not in text or "1.00M" not in text.rsplit("\r", 1)[-1]:
                assert time.monotonic() < deadline, text
                time.sleep(0.01)
                text = terminal.buffer.getvalue().decode()
            drawn.set()

    monkeypatch.setattr(download._LazyBar, "update", update)
    first.append(threading.Thread(target=_get, args=(tmp_path,)))
    first[0].start()
    deadline = time.monotonic() + 10
    while not served.requests_for(PATH) and time.monotonic() < deadline:  # the first run holds the lock now
        time.sleep(0.01)
    dest, _ = _get(tmp_path, progress=True, desc="weights")
    first[0].join(10)
    assert drawn.is_set() and dest.read_bytes() == BODY and served.requests_for(PATH) == [None]
    bar = [line for line in terminal.buffer.getvalue().decode().split("\r") if "1.00M" in line][0]
    assert bar.startswith("weights, by the other run: ")
    if size_said:
        assert "33%|" in bar and "1.00M/3.00M [" in bar, bar  # a bar: done out of the file's 3 MiB
    else:
        assert "1.00MB [" in bar and "%" not in bar and "/3.00M" not in bar, bar  # a count


def test_ctrl_c_mid_download_keeps_the_part_and_says_the_next_run_resumes(served, tmp_path, monkeypatch):
    """Ctrl-C mid-transfer said only "interrupted": the bytes received stay in the .part, and the next run asks
    only for the rest, which is now said with the interruption."""
    received = []
    counting = download._LazyBar.update  # (put back for the run that resumes)

    def update(self, n):
        received.append(n)
        if sum(received) > len(BODY) // 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(download._LazyBar, "update", update)
    with pytest.raises(command_line.Interrupted) as info:
        _get(tmp_path)
    dest = tmp_path / "deep" / "dir" / "model.ckpt.data"
    part = dest.with_name(dest.name + ".part")
    kept = part.read_bytes()
    assert 0 < len(kept) < len(BODY) and BODY.startswith(kept)
    assert str(info.value) == (f"the {len(kept):,} bytes of {dest.name} received so far are kept in {part}; run "
                               "again to resume from there")
    monkeypatch.setattr(download._LazyBar, "update", counting)
    _get(tmp_path)
    assert dest.read_bytes() == BODY and served.requests_for(PATH)[-1] == f"bytes={len(kept)}-"


def test_lock_files_are_removed_when_done_and_a_run_that_waited_locks_the_file_at_the_path(served, tmp_path,
                                                                                          monkeypatch):
    """download-locks/ in the temporary folder gained a small file per file ever downloaded, never removed. The
    holder now removes its lock file when done; a run that waited on that file (opened before the removal)
    must then hold the lock of the file at the path, not of the removed one, or a third run could take the
    path's new file at once and two runs would write the same file."""
    import fcntl
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    locks = download.temporary_cache_root() / "download-locks"
    dest, _ = _get(tmp_path)
    assert dest.read_bytes() == BODY and list(locks.iterdir()) == []  # downloaded, and its lock file gone

    target = tmp_path / "folder"
    first_holds, first_may_end, second_holds = threading.Event(), threading.Event(), threading.Event()
    taken_by_another = []

    def first():
        with download.one_run_at_a_time(target, "filling the folder"):
            first_holds.set()
            first_may_end.wait(10)

    def second():
        with download.one_run_at_a_time(target, "filling the folder") as waited:
            assert waited
            (lock_path,) = locks.iterdir()  # the file at the path now: a third run opening it must wait
            third = os.open(lock_path, os.O_RDWR)
            try:
                fcntl.flock(third, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken_by_another.append(lock_path)
            except BlockingIOError:
                pass
            finally:
                os.close(third)
            second_holds.set()

    threads = [threading.Thread(target=first)]
    threads[0].start()
    assert first_holds.wait(10)
    threads.append(threading.Thread(target=second))
    threads[1].start()
    time.sleep(0.3)  # the second run has opened the lock file and waits on it
    first_may_end.set()
    for thread in threads:
        thread.join(10)
    assert second_holds.is_set() and taken_by_another == []
    assert list(locks.iterdir()) == []
