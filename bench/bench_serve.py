"""The playground as a classroom server: many clients at once against ``gpt2-tokenizer serve``, before vs after.

    python bench/bench_serve.py [--clients 32] [--requests 2000] [--rounds 3] [--before REF] [--url URL]

A room of ``--clients`` people, each a thread that sends one request, waits for the whole answer, then sends the
next, until ``--requests`` have gone: a fixed mix (the same list, in the same order, for every server) of POSTs
as the page sends them, over ``/api/encode``, ``/api/compare`` and ``/api/explain``, on texts from "hello world"
to 3,000 spaces and 200 repetitions of a Japanese sentence. Each request opens its own connection, as the server
closes it after each answer. It prints requests/s, the latency's p50, p99 and max, how many answers were 4xx
(a limit said no: counted apart, not as errors) and the errors: a connection refused or reset, a timeout
(``--timeout`` seconds), a 5xx.

Each server runs in a process of its own, started by this script on a free port of 127.0.0.1 and stopped by
it: ``after`` is this checkout's ``tokenizer`` package, ``before`` the one of the git revision ``--before``
(``main`` unless told; ``--before ''`` runs this checkout alone), unpacked into a temporary folder. Both are
warmed first (each distinct request once: the encodings load), then timed in turns, before, after, before,
after, ... for ``--rounds`` rounds, so a machine that slows down slows both; the last lines give each figure's
median over the rounds and its range. ``--url`` times a server that is already running instead (one column).

Clients and server share the machine's cores: on 2 cores the clients take part of them, as a browser on the
teacher's laptop would not. Needs TOKENIZER_DATA_DIR=../shared/encodings (set from ../shared when unset).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from shared_data import REPO, SHARED

JAPANESE = "日本語の文章は単語の間に空白を置かずに書きます。"
TEXTS = {  # name -> text: from one short phrase to the longest a room sends when it pastes
    "hello": "hello world",
    "code": "def f(x):\n    return x  # indented <|endoftext|> Öffnen 😀 12345\n",
    "paragraph": ("Byte pair encoding starts from single bytes and merges the most frequent adjacent pair, "
                  "again and again, until the vocabulary is full. ") * 6,
    "spaces": " " * 3000,
    "japanese": JAPANESE * 200,
}
# (path, fields besides text, share of the mix): the page sends encode on each pause in typing, compare when
# its compare box is ticked, explain on a click on a token
ENDPOINTS = [("/api/encode", {}, 0.5), ("/api/compare", {}, 0.25),
             ("/api/explain", {"token": "0"}, 0.15), ("/api/explain", {"token": "7"}, 0.10)]
SERVER = """
import sys
from tokenizer.serve import Playground, PlaygroundServer
server = PlaygroundServer(Playground(), "127.0.0.1", 0)
print(server.url, flush=True)
server.serve_forever()
"""


def request_mix(count: int, seed: int = 0) -> list[tuple[str, bytes]]:
    """``count`` (path, JSON body) pairs: every text with every endpoint, in the endpoints' shares, shuffled."""
    rng = random.Random(seed)
    paths = rng.choices(range(len(ENDPOINTS)), weights=[share for *_, share in ENDPOINTS], k=count)
    texts = rng.choices(list(TEXTS), k=count)
    return [(ENDPOINTS[p][0], json.dumps({"text": TEXTS[t], **ENDPOINTS[p][1]}).encode()) for p, t in zip(paths, texts)]


def send(address: tuple[str, int], path: str, body: bytes, timeout: float) -> tuple[float, str]:
    """One request on a new connection: (seconds from connecting to the last byte of the answer, outcome)."""
    start = time.perf_counter()
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        response.read()
        outcome = str(response.status)
    except TimeoutError:
        outcome = "timeout"
    except OSError as e:
        outcome = type(e).__name__
    except http.client.HTTPException as e:
        outcome = type(e).__name__
    finally:
        connection.close()
    return time.perf_counter() - start, outcome


def room(url: str, mix: list[tuple[str, bytes]], clients: int, timeout: float) -> dict:
    """Send ``mix`` from ``clients`` threads at once; the figures of the run."""
    parts = urlsplit(url)
    address = (parts.hostname, parts.port)
    results: list[tuple[float, str]] = []
    next_index = iter(range(len(mix)))
    lock = threading.Lock()

    def client():
        while True:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            result = send(address, *mix[i], timeout)
            with lock:
                results.append(result)

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    return figures(results, wall)


def figures(results: list[tuple[float, str]], wall: float) -> dict:
    seconds = sorted(s for s, _ in results)
    outcomes = [o for _, o in results]
    refused = sum(1 for o in outcomes if o.startswith("4"))
    errors = [o for o in outcomes if not (o.startswith("2") or o.startswith("4"))]
    return {"requests": len(results), "per_second": len(results) / wall,
            "p50": quantile(seconds, 0.50), "p99": quantile(seconds, 0.99), "max": seconds[-1],
            "over_5s": sum(1 for s in seconds if s > 5), "refused": refused, "errors": len(errors),
            "error_kinds": ", ".join(f"{kind} x{errors.count(kind)}" for kind in sorted(set(errors)))}


def quantile(sorted_values: list[float], q: float) -> float:
    """The value below which a share ``q`` of the values lie (nearest rank)."""
    return sorted_values[min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))]


class ServerProcess:
    """The playground of the ``tokenizer`` package in folder ``root``, served by a process of its own."""

    def __init__(self, root: Path):
        env = {**os.environ, "PYTHONPATH": str(root)}
        env.setdefault("TOKENIZER_DATA_DIR", str(SHARED / "encodings"))
        self.errors = tempfile.TemporaryFile()  # what it says of clients that left (an old server's tracebacks)
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], env=env, cwd=root, stdout=subprocess.PIPE,
                                        stderr=self.errors, text=True)
        self.url = self.process.stdout.readline().strip()
        if not self.url:
            self.errors.seek(0)
            raise SystemExit(f"the server of {root} did not start (exit {self.process.wait()}): "
                             f"{self.errors.read().decode(errors='replace')[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait()
        self.errors.close()


def unpack_revision(revision: str, into: Path) -> Path:
    """The ``tokenizer`` package as it is at git ``revision``, unpacked into ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "tokenizer"], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"git archive {revision} failed: {archive.stderr.decode().strip()}; pass --before REV")
    path = into / "archive.tar"
    path.write_bytes(archive.stdout)
    with tarfile.open(path) as tar:
        tar.extractall(into, filter="data")
    return into


def warm(url: str, timeout: float) -> None:
    """Each distinct request once, so the encodings load before the clock starts."""
    for path, body in dict.fromkeys(request_mix(400)):
        send((urlsplit(url).hostname, urlsplit(url).port), path, body, timeout)


def row(name: str, f: dict) -> str:
    return (f"{name:<8} {f['per_second']:>9.1f} {f['p50'] * 1000:>8.0f} {f['p99'] * 1000:>8.0f} "
            f"{f['max'] * 1000:>8.0f} {f['over_5s']:>7} {f['refused']:>7} {f['errors']:>6}  {f['error_kinds']}")


HEADER = f"{'server':<8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'over 5s':>7} {'4xx':>7} {'errors':>6}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0, help="a client's timeout per request, seconds")
    parser.add_argument("--before", default="main", help="git revision of the server to compare against ('' none)")
    parser.add_argument("--url", help="time this running server instead of starting any")
    args = parser.parse_args()
    mix = request_mix(args.requests)
    print(f"{args.clients} clients, {args.requests} requests a round ({len(TEXTS)} texts x {len(ENDPOINTS)} kinds), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start", flush=True)
    if args.url:
        warm(args.url, args.timeout)
        print(HEADER)
        for _ in range(args.rounds):
            print(row("given", room(args.url, mix, args.clients, args.timeout)), flush=True)
        return
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        roots = {"after": REPO}
        if args.before:
            roots = {"before": unpack_revision(args.before, Path(tmp)), **roots}
        servers = {name: ServerProcess(root) for name, root in roots.items()}
        try:
            for server in servers.values():
                warm(server.url, args.timeout)
            print(HEADER)
            runs = {name: [] for name in servers}
            for _ in range(args.rounds):
                for name, server in servers.items():
                    runs[name].append(room(server.url, mix, args.clients, args.timeout))
                    print(row(name, runs[name][-1]), flush=True)
        finally:
            for server in servers.values():
                server.stop()
    print(f"\nmedian over {args.rounds} rounds [min-max]; load average {os.getloadavg()[0]:.2f} at the end")
    for name, rounds in runs.items():
        spread = {key: [r[key] for r in rounds] for key in ("per_second", "p50", "p99", "max")}
        scale = {"per_second": 1, "p50": 1000, "p99": 1000, "max": 1000}
        print(f"{name:<8} " + "  ".join(
            f"{key} {statistics.median(v) * scale[key]:.0f} [{min(v) * scale[key]:.0f}-{max(v) * scale[key]:.0f}]"
            for key, v in spread.items()) + f"  errors {sum(r['errors'] for r in rounds)}")
    if "before" in runs:
        ratio = [a["per_second"] / b["per_second"] for a, b in zip(runs["after"], runs["before"])]
        print(f"requests/s after/before: {statistics.median(ratio):.2f} [{min(ratio):.2f}-{max(ratio):.2f}]")


if __name__ == "__main__":
    main()
