"""How much faster does ``encode-file`` get with a second worker process? Prints a markdown table.

    python bench/bench_encode_file.py [FILE] [--encoding gpt2] [--repeat 2]

Each run encodes the whole file into a temporary ``.bin`` (the vocabulary load and the worker start-up are
part of the time: that is what a user waits for). The outputs of all runs are compared, so the speed-up is
never bought with a wrong answer. On a machine whose cores are busy with other work the speed-up shrinks;
the table prints the CPU count and load average next to the figures for that reason.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tokenizer.dataset import encode_file  # noqa: E402

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "en_docs.txt"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    parser.add_argument("--encoding", default="gpt2")
    parser.add_argument("--repeat", type=int, default=2, help="runs per worker count; the fastest is kept")
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts to compare")
    args = parser.parse_args()

    worker_counts = [int(w) for w in args.workers.split(",")]
    best: dict[int, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        outputs = []
        for workers in worker_counts:
            for run in range(args.repeat):
                out = Path(tmp) / f"w{workers}-{run}.bin"
                stats = encode_file(args.file, out, encoding=args.encoding, workers=workers, progress=False)
                outputs.append(out)
                if workers not in best or stats["seconds"] < best[workers]["seconds"]:
                    best[workers] = stats
        identical = all(filecmp.cmp(outputs[0], other, shallow=False) for other in outputs[1:])

    base = best[worker_counts[0]]["seconds"]
    size_mb = best[worker_counts[0]]["bytes"] / 1e6
    print(f"`{Path(args.file).name}` ({size_mb:.1f} MB), {args.encoding}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}, best of {args.repeat}; outputs identical: {identical}\n")
    print("| workers | seconds | MB/s | speed-up |")
    print("|---:|---:|---:|---:|")
    for workers in worker_counts:
        s = best[workers]
        print(f"| {workers} | {s['seconds']:.2f} | {s['mb_per_s']:.2f} | {base / s['seconds']:.2f}x |")
    if not identical:
        sys.exit("outputs differ between runs: a bug")


if __name__ == "__main__":
    main()
