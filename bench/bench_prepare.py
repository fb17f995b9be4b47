"""Preparing training data: ``encode-dataset`` against a tiktoken prepare script, same JSONL, same bytes out.

    python bench/bench_prepare.py [--mb 60] [--workers 1,2] [--repeat 3] [--encoding gpt2] [--data DIR]

The JSONL shards are built first (once; kept in ``--data``, default a folder in the temp directory): the
paragraphs of every file of ``../shared/corpus`` taken in turns, one document per line, 8 shards. The peer is
what a nanoGPT user writes with tiktoken: read a shard's lines, ``encode_ordinary_batch`` of their texts (its
default threads, which run in parallel: tiktoken releases the GIL), ``<|endoftext|>`` after each document, the
ids written as a flat uint16 (or uint32) ``.bin`` per shard. Ours is ``python -m tokenizer encode-dataset`` with
``--workers`` worker processes (it also writes a manifest with each shard's SHA-256).

Each run is a fresh process into an empty folder, as a user would start it: imports and vocabulary loads count.
The two alternate within each repeat, and the fastest run of each is kept. Every run must write the same bytes
per shard as tiktoken's: a speed-up is never bought with different ids. Needs tiktoken's offline cache
(``TIKTOKEN_CACHE_DIR``, see ../shared/encodings/seed_tiktoken_cache.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_dataset import documents_in_turns, ready_shards

REPO = Path(__file__).resolve().parents[1]
SHARDS = 8

# The peer, run as `python -c PEER DATA OUT ENCODING`: a prepare script as a tiktoken user writes it.
PEER = """
import json, sys
from pathlib import Path
import numpy as np
import tiktoken
data, out, name = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
enc = tiktoken.get_encoding(name)
dtype = np.uint16 if enc.n_vocab <= 1 << 16 else np.uint32
for shard in sorted(data.glob("*.jsonl")):
    with open(shard, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    ids = []
    for doc in enc.encode_ordinary_batch(texts):
        ids.extend(doc)
        ids.append(enc.eot_token)
    np.array(ids, dtype=dtype).tofile(out / (shard.stem + ".bin"))
"""


def build_shards(folder: Path, megabytes: float) -> None:
    """``megabytes`` MB of documents (the corpus's paragraphs, its files taken in turns) in ``SHARDS`` JSONL files."""
    turns = documents_in_turns()
    per_shard = megabytes * 1e6 / SHARDS
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for shard in range(SHARDS):
        size = 0
        with open(folder / f"shard{shard:03d}.jsonl", "w", encoding="utf-8") as f:
            while size < per_shard:
                doc = next(turns)
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
                size += len(doc.encode("utf-8"))
        total += size
    (folder / "READY").write_text(json.dumps({"text_bytes": total}) + "\n")


def run(name: str, command: list) -> tuple[float, Path]:
    """(wall seconds, the output folder) of ``name``'s one fresh process writing into an empty folder (the caller
    removes it): the folder goes where ``command`` holds None."""
    out = Path(tempfile.mkdtemp(prefix="bench-prepare-out-"))
    command = [out if part is None else part for part in command]
    start = time.perf_counter()
    result = subprocess.run(list(map(str, command)), check=False, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    wall = time.perf_counter() - start
    if result.returncode != 0:
        shutil.rmtree(out)
        sys.exit(f"{name} failed: {result.stderr.strip()}")
    return wall, out


def digests(out: Path) -> dict[str, str]:
    """SHA-256 of each .bin in ``out``, by file name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("*.bin"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=60, help="MB of text in the JSONL shards (default 60)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts of ours (default 1,2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the fastest is kept (default 3)")
    parser.add_argument("--encoding", default="gpt2")
    parser.add_argument("--data", type=Path, help="where the shards are built (default: a temp folder by size)")
    args = parser.parse_args()
    data = args.data or Path(tempfile.gettempdir()) / f"bench-prepare-shards-{args.mb:g}mb"
    text_bytes = ready_shards(data, args.mb, build_shards)

    commands = {("tiktoken", "threads: its default"): [sys.executable, "-c", PEER, data, None, args.encoding]}
    for workers in [int(w) for w in args.workers.split(",")]:
        commands["ours", f"{workers} worker(s)"] = [sys.executable, "-m", "tokenizer", "encode-dataset", data,
                                                    "--encoding", args.encoding, "--workers", workers, "--out", None]
    load_before = os.getloadavg()
    best: dict[tuple[str, str], float] = {}
    expected = None
    for _ in range(args.repeat):
        for key, command in commands.items():
            wall, out = run(key[0], command)
            try:
                written = digests(out)
            finally:
                shutil.rmtree(out)
            expected = expected or written
            if written != expected or len(written) != SHARDS:
                sys.exit(f"{key[0]} ({key[1]}) wrote other bytes than the first run: the ids differ")
            print(f"  {key[0]}, {key[1]}: {wall:.2f} s", file=sys.stderr)
            best[key] = min(wall, best.get(key, float("inf")))
    load_after = os.getloadavg()

    peer = best["tiktoken", "threads: its default"]
    print(f"`python bench/bench_prepare.py --mb {args.mb:g} --repeat {args.repeat}`: {text_bytes / 1e6:.0f} MB of "
          f"text in {SHARDS} JSONL shards, {args.encoding}; best of {args.repeat}, a fresh process each; every run "
          f"wrote the same bytes; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, on "
          f"{os.cpu_count()} cores")
    print()
    print("| program | runs on | wall s | MB/s of text | ratio (tiktoken's time / this) |")
    print("|---|---|---:|---:|---:|")
    for (program, runs_on), wall in best.items():
        print(f"| {program} | {runs_on} | {wall:.2f} | {text_bytes / 1e6 / wall:.2f} | {peer / wall:.2f}x |")


if __name__ == "__main__":
    main()
