"""How much faster does ``encode-file`` get with a second worker process? Prints a markdown table.

    python bench/bench_encode_file.py [FILE] [--encoding gpt2] [--workers 1,2] [--repeat 3]

Every run is a fresh ``python -m tokenizer encode-file`` process, as a user would start it: the vocabulary
load, the workers' start-up and their cold piece caches are all part of the time. Two figures per run:

* **wall seconds**, what the user waits for (the best of ``--repeat`` runs is kept), and
* **CPU seconds**, summed over the process and its workers. Extra workers cost some extra CPU (each learns
  the pieces of its own chunks), so ``CPU(1 worker) / CPU(N workers) * N`` is the speed-up N idle cores
  would give. On a machine busy with other work the wall-clock speed-up falls short of it; the table prints
  the load average beside the figures for that reason.

All runs' outputs are compared byte for byte: a speed-up is never bought with a wrong answer.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shared_data import CORPUS, REPO

DEFAULT_FILE = CORPUS / "en_docs.txt"


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(path: str, out: Path, encoding: str, workers: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one encode-file process (its workers included)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tokenizer", "encode-file", path, "--out", str(out),
               "--encoding", encoding, "--workers", str(workers), "--allowed_special", "all", "--force"]
    cpu_before = children_cpu_seconds()
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"encode-file failed: {result.stderr.strip()}")
    return wall, children_cpu_seconds() - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    parser.add_argument("--encoding", default="gpt2")
    parser.add_argument("--repeat", type=int, default=3, help="runs per worker count; the fastest is kept")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to compare")
    args = parser.parse_args()
    if not Path(args.file).is_file():
        sys.exit(f"no such file: {args.file}")

    worker_counts = [int(w) for w in args.workers.split(",")]
    best: dict[int, tuple[float, float]] = {}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        outputs = []
        for run in range(args.repeat):
            for workers in worker_counts:  # interleaved, so a burst of other load hits every count alike
                out = Path(tmp) / f"w{workers}-{run}.bin"
                wall, cpu = run_once(args.file, out, args.encoding, workers)
                outputs.append(out)
                if workers not in best or wall < best[workers][0]:
                    best[workers] = (wall, cpu)
        identical = all(filecmp.cmp(outputs[0], other, shallow=False) for other in outputs[1:])

    size_mb = Path(args.file).stat().st_size / 1e6
    base_wall, base_cpu = best[worker_counts[0]]
    print(f"`{Path(args.file).name}` ({size_mb:.1f} MB), {args.encoding}, {os.cpu_count()} CPUs, load average "
          f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}, best of {args.repeat}; outputs identical: {identical}\n")
    print("| workers | wall seconds | MB/s | speed-up | CPU seconds | speed-up on idle cores |")
    print("|---:|---:|---:|---:|---:|---:|")
    for workers in worker_counts:
        wall, cpu = best[workers]
        idle = base_cpu / cpu * workers / worker_counts[0]
        print(f"| {workers} | {wall:.2f} | {size_mb / wall:.2f} | {base_wall / wall:.2f}x | {cpu:.2f} | {idle:.2f}x |")
    if not identical:
        sys.exit("outputs differ between runs: a bug")


if __name__ == "__main__":
    main()
