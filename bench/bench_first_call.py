"""The first ``get_encoding(name)`` of a fresh process: before the vocabulary files shipped, now, and tiktoken.

    python bench/bench_first_call.py [--names o200k_base cl100k_base] [--old-rev f6bce0f~1] [--rounds 5]

Each figure is one fresh interpreter timing ``import tokenizer; tokenizer.get_encoding(name)`` (the import
included, the interpreter's own start not), with an empty user cache unless it says warm:

* before, cold: the checkout at ``--old-rev`` (``git archive``), where offline the file had to come from a
  folder the user named: ``TOKENIZER_DATA_DIR`` pointed at ``../shared/encodings``;
* now, cold: this checkout, no variable set: the file shipped in the package, checked (sha256) and parsed;
* now, warm: the same again with the user cache the cold run filled (the parsed tokens, no file read);
* tiktoken, cold: ``import tiktoken; tiktoken.get_encoding(name)`` reading its cache (seeded from
  ``../shared/encodings``), which it checks (sha256) and parses every time.

Rounds interleave the four; the median of ``--rounds`` is printed with the min-max, and the ratios to "now, cold".
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_ENCODINGS = ROOT.parent / "shared" / "encodings"
TIMED = ("import sys, time; t = time.perf_counter(); import {module}; {module}.get_encoding(sys.argv[1]); "
         "print(time.perf_counter() - t)")


def seconds(module: str, name: str, pythonpath: Path, **env: str) -> float:
    """One fresh interpreter's import and first ``get_encoding(name)``, in seconds."""
    clean = {k: v for k, v in os.environ.items() if k not in ("TOKENIZER_DATA_DIR", "TIKTOKEN_CACHE_DIR",
                                                                "DATA_GYM_CACHE_DIR", "TOKENIZER_CACHE_DIR")}
    proc = subprocess.run([sys.executable, "-c", TIMED.format(module=module), name], capture_output=True, text=True,
                          env={**clean, "PYTHONPATH": str(pythonpath), "OPENAIPUBLIC_URL": "http://127.0.0.1:9",
                               **env}, check=True, cwd=pythonpath)
    return float(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", nargs="+", default=["o200k_base", "cl100k_base"])
    parser.add_argument("--old-rev", default="f6bce0f~1", help="the checkout before the files shipped")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before = tmp / "before"
        before.mkdir()
        archive = subprocess.run(["git", "archive", args.old_rev, "tokenizer"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        tiktoken_cache = tmp / "tiktoken-cache"
        subprocess.run([sys.executable, str(SHARED_ENCODINGS / "seed_tiktoken_cache.py"), str(tiktoken_cache)],
                       check=True, capture_output=True)
        times: dict[tuple[str, str], list[float]] = {}
        for run in range(args.rounds):
            for name in args.names:
                fresh = {"TOKENIZER_CACHE_DIR": str(tmp / f"cache-{run}-{name}"), "TIKTOKEN_CACHE_DIR": ""}
                old_cache = {"TOKENIZER_CACHE_DIR": str(tmp / f"old-cache-{run}-{name}"), "TIKTOKEN_CACHE_DIR": ""}
                row = {
                    "before, cold (TOKENIZER_DATA_DIR)": lambda: seconds(
                        "tokenizer", name, before, TOKENIZER_DATA_DIR=str(SHARED_ENCODINGS), **old_cache),
                    "now, cold (package, no setting)": lambda: seconds("tokenizer", name, ROOT, **fresh),
                    "now, warm (parsed tokens saved)": lambda: seconds("tokenizer", name, ROOT, **fresh),
                    "tiktoken, cold (its cache)": lambda: seconds(
                        "tiktoken", name, ROOT, TIKTOKEN_CACHE_DIR=str(tiktoken_cache)),
                }
                for label, measure in row.items():
                    times.setdefault((name, label), []).append(measure())
    print(f"load average {os.getloadavg()[0]:.2f}; median (min-max) of {args.rounds} fresh processes, "
          "import + first get_encoding:")
    for name in args.names:
        now = statistics.median(times[(name, "now, cold (package, no setting)")])
        print(name)
        for (row_name, label), values in times.items():
            if row_name == name:
                median = statistics.median(values)
                print(f"  {label:36s} {median * 1e3:7.0f} ms  ({min(values) * 1e3:.0f}-{max(values) * 1e3:.0f})"
                      f"  {median / now:5.2f}x now-cold")


if __name__ == "__main__":
    main()
