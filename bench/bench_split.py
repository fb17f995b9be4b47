"""Pre-tokenization speed: this checkout's split vs another checkout's (e.g. main) vs tiktoken's whole encode.

    python bench/bench_split.py [--before ../main] [--mb 4] [--repeat 3] [--encodings gpt2,cl100k_base,o200k_base]
    python bench/bench_split.py --array [--mb 4] [--repeat 5]

For each shared corpus (the first N MB) and encoding it times, alternated in one process, best of --repeat:
``Pretokenizer.split`` of this checkout, the same of ``--before``'s checkout (loaded as a second package), the
``regex`` reference (``split_reference``), and tiktoken's whole ``encode_ordinary`` (split and BPE) for scale.
Then, in fresh processes, alternated: ``import tokenizer`` and ``get_encoding`` for both checkouts.
With ``--array``, instead: :func:`tokenizer.fast.array_split.piece_starts` (and the UTF-32 encoding it starts from)
beside ``split`` and tiktoken's ``encode_ordinary``, alternated, best of --repeat.
Needs tiktoken's offline cache (TIKTOKEN_CACHE_DIR) and TOKENIZER_DATA_DIR=../shared/encodings.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from shared_data import REPO, SHARED

sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZER_DATA_DIR", str(SHARED / "encodings"))

import tiktoken  # noqa: E402

from tokenizer import get_encoding  # noqa: E402
from tokenizer.pretokenize import compile_pattern  # noqa: E402


def load_checkout(path: Path, alias: str):
    """The tokenizer package of another checkout, imported under ``alias`` beside this one."""
    spec = importlib.util.spec_from_file_location(
        alias, path / "tokenizer" / "__init__.py", submodule_search_locations=[str(path / "tokenizer")]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{alias}.pretokenize")


def best_time(fn, text: str) -> float:
    start = time.perf_counter()
    fn(text)
    return time.perf_counter() - start


def fresh_process_time(checkout: Path, code: str) -> float:
    """Wall time of ``python -c code`` with ``checkout`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd="/")
    return time.perf_counter() - start


def array_table(args) -> None:
    """piece_starts (the array split) beside split and tiktoken's whole encode, per corpus and encoding."""
    import numpy as np

    from tokenizer.fast.array_split import class_table, has_array_split, o200k_class_table, piece_starts

    start = time.perf_counter()
    class_table()
    o200k_class_table()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.mb} MB of each corpus; best of {args.repeat}; "
          f"class tables built in {time.perf_counter() - start:.3f} s")
    print("| corpus | encoding | utf-32 encode (s) | piece_starts (s) | split (s) | split / (encode + piece_starts) "
          "| tiktoken encode (s) |")
    print("|---|---|---|---|---|---|---|")
    for path in sorted((SHARED / "corpus").glob("*.txt")):
        text = path.read_bytes()[: int(args.mb * 1e6)].decode("utf-8", errors="ignore")
        code_points = np.frombuffer(text.encode("utf-32-le"), np.uint32)
        for name in args.encodings.split(","):
            pat = get_encoding(name).pat_str
            pre = compile_pattern(pat)
            tk = tiktoken.get_encoding(name)
            times = {"encode": [], "array": [], "split": [], "tiktoken": []}
            for _ in range(args.repeat):
                times["encode"].append(best_time(lambda t: t.encode("utf-32-le"), text))
                if has_array_split(pat):
                    times["array"].append(best_time(lambda t: piece_starts(code_points, pat), text))
                times["split"].append(best_time(pre.split, text))
                times["tiktoken"].append(best_time(tk.encode_ordinary, text))
            e, s, t = min(times["encode"]), min(times["split"]), min(times["tiktoken"])
            if times["array"]:
                a = min(times["array"])
                print(f"| {path.stem} | {name} | {e:.3f} | {a:.3f} | {s:.3f} | {s / (e + a):.1f}× | {t:.3f} |")
            else:
                print(f"| {path.stem} | {name} | {e:.3f} | (none) | {s:.3f} | | {t:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, default=REPO.parent / "main")
    parser.add_argument("--mb", type=float, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--encodings", default="gpt2,cl100k_base,o200k_base")
    parser.add_argument("--array", action="store_true", help="time tokenizer.fast.array_split instead")
    args = parser.parse_args()
    if args.array:
        array_table(args)
        return
    before = load_checkout(args.before.resolve(), "tokenizer_before")
    names = args.encodings.split(",")
    print(f"load average {os.getloadavg()[0]:.2f}; {args.mb} MB of each corpus; best of {args.repeat}")
    print("| corpus | encoding | split before (s) | split after (s) | after/before speed-up | regex reference (s) "
          "| tiktoken encode (s) | split after / tiktoken encode |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sorted((SHARED / "corpus").glob("*.txt")):
        text = path.read_bytes()[: int(args.mb * 1e6)].decode("utf-8", errors="ignore")
        for name in names:
            pat = get_encoding(name).pat_str
            after = compile_pattern(pat)
            old = before.compile_pattern(pat)
            tk = tiktoken.get_encoding(name)
            times = {"before": [], "after": [], "reference": [], "tiktoken": []}
            for _ in range(args.repeat):
                times["before"].append(best_time(old.split, text))
                times["after"].append(best_time(after.split, text))
                times["reference"].append(best_time(after.split_reference, text))
                times["tiktoken"].append(best_time(tk.encode_ordinary, text))
            b, a, r, t = (min(times[k]) for k in ("before", "after", "reference", "tiktoken"))
            print(f"| {path.stem} | {name} | {b:.3f} | {a:.3f} | {b / a:.2f}× | {r:.3f} | {t:.3f} | {a / t:.2f} |")
    print()
    print("| fresh process | before (s) | after (s) |")
    print("|---|---|---|")
    probes = {"import tokenizer": "import tokenizer"}
    probes |= {f"import + get_encoding({n!r})": f"import tokenizer; tokenizer.get_encoding({n!r})" for n in names}
    for label, code in probes.items():
        runs = {"before": [], "after": []}
        for i in range(max(args.repeat, 7)):
            order = [("before", args.before.resolve()), ("after", REPO)]
            for label_, checkout in order[:: 1 if i % 2 else -1]:  # alternate which goes first
                runs[label_].append(fresh_process_time(checkout, code))
        print(f"| {label} | {min(runs['before']):.3f} | {min(runs['after']):.3f} |")


if __name__ == "__main__":
    main()
