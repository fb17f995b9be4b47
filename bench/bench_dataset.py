"""What does Ray cost on one machine? ``encode-dataset`` on the local engine vs the Ray engine; prints a table.

    python bench/bench_dataset.py [--mb 200] [--workers 1,2] [--repeat 1] [--encoding gpt2] [--data DIR]

The shards are built first (once; kept in ``--data``, default a folder in the temp directory): the paragraphs of
every file of ``../shared/corpus`` taken in turns, written 25 MB at a time (less for a small ``--mb``: 8 shards
at least) as ``.jsonl`` (even shards) and ``.parquet`` (odd shards, row groups of 2,000 documents) until ``--mb``
MB of text. The corpus holds about
50 MB, so 200 MB repeats it about four times: the piece cache of each worker knows the words after the first
pass, as it would on a large real dataset whose common words recur.

Each run is a fresh ``python -m tokenizer encode-dataset`` process into an empty folder, as a user would start
it; the Ray engine's runs start their own local Ray cluster and stop it after, so that time is included
("ray"), and the cluster's start and stop alone is measured too. Engines alternate within each repeat (local,
ray, local, ray ...), and the fastest run of each is kept. Every run's manifest must list the same SHA-256 per
shard: a speed-up is never bought with different bytes.

The last lines project the Pile (825 GB) at the measured rate of one local worker per core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared_data import CORPUS, REPO

SHARD_MB = 25
THE_PILE_BYTES = 825e9


def build_shards(folder: Path, megabytes: int) -> None:
    """``megabytes`` MB of documents in ``SHARD_MB`` MB shards, alternately .jsonl and .parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    order = documents_in_turns()
    shard_bytes = min(SHARD_MB * 1e6, megabytes * 1e6 / 8)  # at least 8 shards, to spread over the workers
    folder.mkdir(parents=True, exist_ok=True)
    total, shard, docs, size = 0, 0, [], 0
    for doc in order:
        docs.append(doc)
        size += len(doc.encode("utf-8"))
        if size >= shard_bytes or total + size >= megabytes * 1e6:
            if shard % 2 == 0:
                with open(folder / f"shard{shard:03d}.jsonl", "w", encoding="utf-8") as f:
                    f.writelines(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs)
            else:
                pq.write_table(pa.table({"text": docs}), folder / f"shard{shard:03d}.parquet", row_group_size=2000)
            total += size
            shard, docs, size = shard + 1, [], 0
            if total >= megabytes * 1e6:
                break
    (folder / "READY").write_text(json.dumps({"text_bytes": total, "shards": shard}) + "\n")


def documents_in_turns():
    """Endless documents: the paragraphs of every ``CORPUS`` file, the files taken in turns (each starting over
    when it runs out)."""
    paragraphs = []
    for path in sorted(CORPUS.glob("*.txt")):
        text = path.read_bytes().decode("utf-8", errors="ignore").replace("<|endoftext|>", "\n\n")
        paragraphs.append([p for p in text.split("\n\n") if p.strip()])
    return (doc for group in zip(*(iter_forever(p) for p in paragraphs)) for doc in group)


def iter_forever(items):
    while True:
        yield from items


def ready_shards(data: Path, megabytes: float, build) -> int:
    """The bytes of text in the shards of folder ``data``, built first by ``build(data, megabytes)`` unless a
    finished build (its READY file) is there."""
    if not (data / "READY").is_file():
        print(f"building {megabytes:g} MB of shards in {data} ...", file=sys.stderr)
        build(data, megabytes)
    print(f"shards: {data}", file=sys.stderr)
    return json.loads((data / "READY").read_text())["text_bytes"]


def run_once(data: Path, engine: str, workers: int, encoding: str) -> tuple[float, dict]:
    """(wall seconds, manifest) of one encode-dataset process into an empty folder."""
    out = Path(tempfile.mkdtemp(prefix="bench-dataset-out-"))
    try:
        command = [sys.executable, "-m", "tokenizer", "encode-dataset", str(data), "--out", str(out),
                   "--encoding", encoding, "--engine", engine, "--workers", str(workers)]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        wall = time.perf_counter() - start
        if result.returncode != 0:
            sys.exit(f"encode-dataset failed: {result.stderr.strip()}")
        return wall, json.loads((out / "manifest.json").read_text())
    finally:
        shutil.rmtree(out)


def ray_start_stop_seconds(workers: int) -> float:
    """A local Ray cluster's start and stop alone, in a fresh process (what every --engine ray run pays)."""
    code = ("import time; t = time.perf_counter(); from tokenizer.jobs.engines import start_ray; "
            f"ray = start_ray(num_cpus={workers}); ray.shutdown(); print(time.perf_counter() - t)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    return float(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="MB of shards to encode (default 200)")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per engine and worker count; the fastest "
                        "is kept (default 1)")
    parser.add_argument("--encoding", default="gpt2")
    parser.add_argument("--data", type=Path, help="where the shards are built (default: a temp folder by size)")
    args = parser.parse_args()
    data = args.data or Path(tempfile.gettempdir()) / f"bench-dataset-shards-{args.mb}mb"
    text_bytes = ready_shards(data, args.mb, build_shards)

    load_before = os.getloadavg()
    best: dict[tuple[str, int], float] = {}
    manifests = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for _ in range(args.repeat):
            for engine in ("local", "ray"):
                wall, manifest = run_once(data, engine, workers, args.encoding)
                print(f"  {engine}, {workers} worker(s): {wall:.1f} s", file=sys.stderr)
                best[engine, workers] = min(wall, best.get((engine, workers), float("inf")))
                manifests.append(manifest)
    hashes = {tuple(s["sha256"] for s in m["shards"]) for m in manifests}
    assert len(hashes) == 1, "the runs wrote different bytes"
    startup = min(ray_start_stop_seconds(2) for _ in range(max(1, args.repeat)))
    load_after = os.getloadavg()
    totals = manifests[0]["totals"]

    print(f"encode-dataset, {text_bytes / 1e6:.0f} MB of text ({totals['file_bytes'] / 1e6:.0f} MB of files) in "
          f"{totals['shards']} shards (.jsonl and .parquet), {totals['tokens']:,} tokens, {args.encoding}; best of "
          f"{args.repeat}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, on "
          f"{os.cpu_count()} cores")
    print()
    print("| engine | workers | wall s | MB/s of text | tokens/s | wall vs local |")
    print("|---|---:|---:|---:|---:|---:|")
    for (engine, workers), wall in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ratio = wall / best["local", workers]
        print(f"| {engine} | {workers} | {wall:.1f} | {text_bytes / 1e6 / wall:.2f} | "
              f"{totals['tokens'] / wall:,.0f} | {ratio:.2f}x ({(ratio - 1) * 100:+.0f}%) |")
    print()
    print(f"Ray's local cluster start and stop alone: {startup:.1f} s (part of every ray row).")
    per_core = text_bytes / best["local", 1]  # bytes of text per second of one worker
    core_hours = THE_PILE_BYTES / per_core / 3600
    print(f"The Pile (825 GB of text) at one local worker's {per_core / 1e6:.2f} MB/s: {core_hours:,.0f} "
          f"core-hours; {core_hours / 24:,.0f} cores finish it in a day, {core_hours:,.0f} in an hour "
          f"(e.g. {-(-core_hours // 64):,.0f} machines of 64 cores for an hour).")


if __name__ == "__main__":
    main()
