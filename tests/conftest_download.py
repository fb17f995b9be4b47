"""A small, scriptable HTTP file server for testing downloads without the internet.

Real downloads fail in a handful of ways: the connection drops mid-file, the server hiccups with a 500,
the body ends before the announced Content-Length, the file is not there (404), or the server ignores a
range request and sends the whole file again. :class:`FileServer` serves in-memory files from
127.0.0.1 (a free port picked by the OS) and can be told to misbehave in exactly those ways, once per
queued fault, so a test can say "cut the next request for this path, then behave".

It supports ``Range: bytes=N-`` (and ``N-M``) the way real blob storage does: 206 with Content-Range,
or 416 when N is past the end. It records every request so tests can check what the client asked for.

Not a conftest.py on purpose (that file belongs to the lead); tests import the fixture explicitly:
``from conftest_download import file_server``.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# What a queued fault does to one request:
FAULTS = {
    "cut": "send the headers for the full body, half of the body, then close the connection",
    "short": "announce a Content-Length larger than the body that follows, then close",
    "500": "answer 500 Internal Server Error",
    "ignore-range": "answer 200 with the whole file even though a range was asked for",
    "stall": "answer only once the client has asked for the path again (it gave up waiting: a client timeout), "
             "the server closes, or `stall_seconds` pass",
}


class FileServer:
    """Serves ``files`` (URL path -> bytes) over HTTP on 127.0.0.1 until :meth:`close`."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header or None)
        self.stall_seconds = 60.0  # only a bound: a stall ends when the client asks again
        self._asked = threading.Condition()  # told of each request, and of closing
        self._closed = False
        self._faults: dict[str, deque[str]] = defaultdict(deque)
        self._httpd = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True  # a stalled handler must not hold up the test run
        # A short poll interval makes shutdown() (run after every test) quick.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def fault(self, path: str, *modes: str) -> None:
        """Queue faults for ``path``: each of the next requests for it suffers one, in order."""
        for mode in modes:
            if mode not in FAULTS:
                raise ValueError(f"unknown fault {mode!r}; choose from {sorted(FAULTS)}")
            self._faults[path].append(mode)

    def requests_for(self, path: str) -> list[str | None]:
        """The Range headers (None when absent) of every request made for ``path``, in order."""
        return [rng for p, rng in self.requests if p == path]

    def close(self) -> None:
        with self._asked:
            self._closed = True
            self._asked.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _record(self, path: str, range_header: str | None) -> int:
        """Note a request; return how many there have been for ``path``."""
        with self._asked:
            self.requests.append((path, range_header))
            self._asked.notify_all()
            return len(self.requests_for(path))

    def _stall(self, path: str, asked: int) -> None:
        """Wait until ``path`` is asked for more than ``asked`` times, the server closes, or ``stall_seconds``."""
        with self._asked:
            self._asked.wait_for(lambda: self._closed or len(self.requests_for(path)) > asked, self.stall_seconds)

    def _next_fault(self, path: str) -> str | None:
        queue = self._faults[path]
        return queue.popleft() if queue else None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        # Clients hanging up mid-answer (after a timeout, say) are part of these tests, not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _make_handler(server: FileServer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            range_header = self.headers.get("Range")
            asked = server._record(path, range_header)
            fault = server._next_fault(path)
            if fault == "stall":
                server._stall(path, asked)
            if fault == "500":
                return self._plain(500, b"scripted failure\n")
            body = server.files.get(path)
            if body is None:
                return self._plain(404, b"no such file\n")

            status, start, end = 200, 0, len(body)
            match = re.fullmatch(r"bytes=(\d+)-(\d*)", range_header or "")
            if match and fault != "ignore-range":
                start = int(match[1])
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                end = min(len(body), int(match[2]) + 1) if match[2] else len(body)
                status = 206
            chunk = body[start:end]

            self.send_response(status)
            announced = len(chunk) + (1000 if fault == "short" else 0)
            self.send_header("Content-Length", str(announced))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(body)}")
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            if fault == "cut":
                chunk = chunk[: len(chunk) // 2]
            self.wfile.write(chunk)
            if fault in ("cut", "short"):
                self.wfile.flush()
                self.close_connection = True

        def _plain(self, status: int, text: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
            pass  # keep test output clean

    return Handler


@pytest.fixture
def file_server():
    """A fresh :class:`FileServer` per test, shut down afterwards."""
    server = FileServer()
    yield server
    server.close()
