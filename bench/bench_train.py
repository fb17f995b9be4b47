"""Benchmark: BPE training, this project vs HF `tokenizers` (BpeTrainer) vs `rustbpe`, in one run.

    python bench/bench_train.py                  # en_docs + en_dictionary (~30 MB), vocab 10,000, + scaling
    python bench/bench_train.py --quick          # 3 MB, vocab 2,000, no scaling runs: a smoke test
    python bench/bench_train.py --mb 10 --vocab 5000 --no-scaling
    python bench/bench_train.py --corpus zh_manpages.txt --vocab 5000   # one shared corpus, whole
    python bench/bench_train.py --scale 1                # ours on 0.25 / 0.5 / 1 GB (64 MB files), vocab 32,000
    python bench/bench_train.py --first-run              # ours on an empty cache folder, then again: small, large

Training data: en_docs.txt without its last ``--heldout-mb`` MB (held back for evaluation) + en_dictionary.txt,
concatenated into a temporary file and cut to ``--mb`` MB (at a newline). Every trainer runs ``--repeat`` times
(rounds alternate between trainers; the best time is kept), each time in its own
subprocess; the parent polls the resident memory of that process and all its children (psutil) every 20 ms and
reports the peak of the sum. Wall time is measured inside the subprocess around the training call only; CPU
time is that of the whole subprocess tree (start-up and imports included; best of the rounds), steadier than
wall time when other programs load the machine.

Compression: bytes per token of each trained tokenizer on held-out text (the end of en_docs, de_manpages.txt,
ru_manpages.txt), documents split at ``<|endoftext|>`` and encoded as ordinary text. This project's and
rustbpe's merges are evaluated with tiktoken (ranks = merge order), HF's with HF.

Peers get the same budget: vocab_size counts 256 bytes + merges + the special token ``<|endoftext|>`` for this
project and HF; rustbpe has no special tokens, so it gets ``vocab_size - 1`` (the same number of merges).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time

from shared_data import CORPUS, REPO

EOT = "<|endoftext|>"
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
MB = 1_000_000


# ---------------------------------------------------------------------------------------------------------
# Subprocess side: train one tokenizer, write it to --out, print {"seconds": ...} as JSON.


def iter_documents(path: str, block: int = 1 << 20):
    """The file's documents (split at <|endoftext|>), read in blocks: bounded memory."""
    rest = ""
    with open(path, encoding="utf-8") as f:
        while True:
            data = f.read(block)
            if not data:
                break
            parts = (rest + data).split(EOT)
            rest = parts.pop()
            yield from (p for p in parts if p)
    if rest:
        yield rest


def run_trainer(name: str, path: str, vocab_size: int, out: str, workers: int | None, baseline: str | None) -> float:
    if name in ("ours", "baseline"):
        sys.path.insert(0, str(REPO) if name == "ours" else baseline)
        from tokenizer.training.train import train_bpe

        t0 = time.perf_counter()
        vocab, merges = train_bpe(path.split(","), vocab_size, [EOT], num_workers=workers, progress=False)
        seconds = time.perf_counter() - t0
        ranks = {tok: i for i, tok in vocab.items() if tok != EOT.encode()}
        write_ranks(ranks, out)
    elif name == "hf":
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        t0 = time.perf_counter()
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[EOT],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train([path], trainer)
        seconds = time.perf_counter() - t0
        tok.save(out)
    elif name == "rustbpe":
        import rustbpe

        t0 = time.perf_counter()
        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(iter_documents(path), vocab_size - 1, pattern=GPT2_PATTERN)
        seconds = time.perf_counter() - t0
        write_ranks(dict(tok.get_mergeable_ranks()), out)
    else:
        raise SystemExit(f"unknown trainer {name!r}")
    return seconds


def write_ranks(ranks: dict, out: str) -> None:
    with open(out, "w") as f:
        for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(f"{base64.b64encode(bytes(tok)).decode()} {rank}\n")


# ---------------------------------------------------------------------------------------------------------
# Parent side


def measure(name: str, path: str, vocab_size: int, out: str, workers: int | None, baseline: str | None = None,
            env: dict | None = None) -> dict:
    """Run one trainer in a subprocess; wall seconds (from inside and of the whole process), peak RSS of the
    process tree, and the processes it left running (``left_running``: psutil processes)."""
    import psutil

    cmd = [sys.executable, __file__, "--worker", name, "--input", path, "--vocab", str(vocab_size), "--out", out]
    if workers:
        cmd += ["--workers", str(workers)]
    if baseline:
        cmd += ["--baseline", baseline]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    peak = 0
    seen: dict[int, psutil.Process] = {}
    while proc.poll() is None:
        total = 0
        try:
            procs = [proc] + proc.children(recursive=True)
        except psutil.NoSuchProcess:
            break
        seen.update((p.pid, p) for p in procs[1:])
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        peak = max(peak, total)
        time.sleep(0.02)
    stdout = proc.stdout.read()
    proc.wait()
    process_seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed with exit code {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(stdout.strip().splitlines()[-1])
    result["process_seconds"] = process_seconds
    result["left_running"] = [p for p in seen.values() if p.is_running()]
    result["peak_rss_mb"] = peak / 2**20
    # CPU time of the whole subprocess tree, start-up and imports included: steadier than wall time on a
    # loaded machine
    result["cpu_seconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return result


def make_training_file(directory: str, mb: float, heldout_mb: float) -> tuple[str, str]:
    """(training file path, held-out English text)."""
    docs = (CORPUS / "en_docs.txt").read_bytes()
    cut = docs.rfind(b"\n", 0, len(docs) - int(heldout_mb * MB)) + 1
    heldout = docs[cut:].decode("utf-8")
    data = docs[:cut] + (CORPUS / "en_dictionary.txt").read_bytes()
    if mb * MB < len(data):
        data = data[: data.rfind(b"\n", 0, int(mb * MB)) + 1]
    path = os.path.join(directory, f"train_{mb:g}MB.txt")
    with open(path, "wb") as f:
        f.write(data)
    return path, heldout


def make_scale_corpus(directory: str, gb: float, file_mb: int = 64, seed: int = 0) -> list[str]:
    """Files of ``file_mb`` MB adding up to ``gb`` GB, made from every shared corpus (how: see --scale).

    The documents are the paragraphs (blank-line separated) of all corpora. Copy ``r`` of the collection is
    shuffled afresh; each document gets a header line with its copy and document numbers, and every 50th word
    (of those under 20 characters) the copy number spelt in letters as a suffix, so new pre-tokens keep appearing as the corpus grows (as in
    real text) instead of the same few hundred thousand repeating. Documents end with <|endoftext|>.
    """
    import random

    docs = []
    for name in sorted(p.name for p in CORPUS.glob("*.txt")):
        text = (CORPUS / name).read_text(encoding="utf-8").replace(EOT, "\n\n")
        docs += [d for d in text.split("\n\n") if d.strip()]
    rng = random.Random(seed)
    paths, copy, out, size, buffered = [], 0, None, 0, []
    target = int(gb * 1e9)
    while size < target:
        copy += 1
        suffix = "".join(chr(97 + int(c)) for c in str(copy))  # 12 -> "bc"
        order = list(range(len(docs)))
        rng.shuffle(order)
        for i in order:
            words = docs[i].split(" ")
            words[copy % 50 :: 50] = [w + suffix if len(w) < 20 else w for w in words[copy % 50 :: 50]]
            buffered.append(f"[{copy}.{i}]\n" + " ".join(words) + EOT)
            if len(buffered) >= 2000:
                data = "".join(buffered).encode("utf-8")
                buffered = []
                if out is None or out.tell() >= file_mb * MB:
                    if out:
                        out.close()
                    paths.append(os.path.join(directory, f"part{len(paths):03d}.txt"))
                    out = open(paths[-1], "wb")
                out.write(data)
                size += len(data)
                if size >= target:
                    break
    out.close()
    return paths


def scale_runs(args) -> None:
    """Our trainer on the --scale corpus: the first files adding up to 1/4, 1/2 and all of it."""
    vocab = args.vocab or 32_000
    with tempfile.TemporaryDirectory(prefix="bench-train-scale-", dir=args.scale_dir) as tmp:
        t0 = time.perf_counter()
        paths = make_scale_corpus(tmp, args.scale)
        print(f"built {len(paths)} files, {sum(map(os.path.getsize, paths)) / 1e9:.2f} GB in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        rows = []
        for fraction in (0.25, 0.5, 1.0):
            chosen, size = [], 0
            for p in paths:
                if size >= fraction * sum(map(os.path.getsize, paths)) - 1:
                    break
                chosen.append(p)
                size += os.path.getsize(p)
            print(f"training ours on {size / 1e9:.2f} GB ...", file=sys.stderr, flush=True)
            r = measure("ours", ",".join(chosen), vocab, os.path.join(tmp, "ours.out"), args.workers)
            rows.append((size / 1e9, len(chosen), r))
            print(rows[-1], file=sys.stderr, flush=True)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nThis project at scale: vocab {vocab:,}, cpus {os.cpu_count()}, load {load} "
          f"(corpus: bench_train.make_scale_corpus)\n")
    print("| GB | files | wall s | s per GB | CPU s | CPU s per GB | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for gb, nfiles, r in rows:
        print(f"| {gb:.2f} | {nfiles} | {r['seconds']:.0f} | {r['seconds'] / gb:.0f} | {r['cpu_seconds']:.0f} "
              f"| {r['cpu_seconds'] / gb:.0f} | {r['peak_rss_mb']:.0f} |")


def first_run_rows(args) -> None:
    """Ours on an empty cache folder (a brand-new machine), then again with what that run left in it.

    Each job gets its own empty folder for this package's cache and numba's ($TOKENIZER_CACHE_DIR,
    $NUMBA_CACHE_DIR). A process the first run leaves running (something it builds in the background) is waited
    for before the later run, and how long that took is reported. Small: 130 KB of en_docs, vocab 500 (CS336's
    speed test's size); large: --mb MB (default 8), vocab --vocab (default 10,000).
    """
    import psutil

    jobs = [("small", 0.13, 500), ("large", args.mb or 8, args.vocab or 10_000)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-train-first-") as tmp:
        for label, mb, vocab in jobs:
            path, _ = make_training_file(tmp, mb, args.heldout_mb)
            env = dict(os.environ, TOKENIZER_CACHE_DIR=os.path.join(tmp, f"cache-{label}"),
                       NUMBA_CACHE_DIR=os.path.join(tmp, f"numba-{label}"))
            runs = []
            for which in ("first", "later", "later"):
                print(f"training ours, {label} job, {which} run ...", file=sys.stderr, flush=True)
                r = measure("ours", path, vocab, os.path.join(tmp, "ours.out"), args.workers, env=env)
                t0 = time.perf_counter()
                psutil.wait_procs(r.pop("left_running"))
                r["background_seconds"] = time.perf_counter() - t0
                runs.append(r)
            first, later = runs[0], min(runs[1:], key=lambda r: r["process_seconds"])
            rows.append((label, os.path.getsize(path) / MB, vocab, first, later))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nThis project on an empty cache folder (first run) and again (later, best of 2): cpus {os.cpu_count()}, "
          f"load {load}\n")
    print("| job | MB | vocab | first: train_bpe s | first: process s | left running after, s "
          "| later: train_bpe s | later: process s | first / later (process) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, mb, vocab, first, later in rows:
        print(f"| {label} | {mb:.2f} | {vocab:,} | {first['seconds']:.2f} | {first['process_seconds']:.2f} "
              f"| {first['background_seconds']:.1f} | {later['seconds']:.2f} | {later['process_seconds']:.2f} "
              f"| {first['process_seconds'] / later['process_seconds']:.2f}x |")


def bytes_per_token(name: str, out: str, texts: list[str]) -> float:
    docs = [d for t in texts for d in t.split(EOT) if d]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    if name == "hf":
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(out)
        ntokens = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
    else:
        import tiktoken

        ranks = {}
        with open(out) as f:
            for line in f:
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
        enc = tiktoken.Encoding(name=f"bench-{name}", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
        ntokens = sum(len(ids) for ids in enc.encode_ordinary_batch(docs))
    return nbytes / ntokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=None, help="training data size in MB (default: all, ~30)")
    ap.add_argument("--vocab", type=int, default=None, help="vocab size (default 10000)")
    ap.add_argument("--quick", action="store_true", help="3 MB, vocab 2000, no scaling runs")
    ap.add_argument("--no-scaling", action="store_true", help="skip our 10/20 MB runs")
    ap.add_argument("--heldout-mb", type=float, default=1.0, help="end of en_docs held back (MB)")
    ap.add_argument("--workers", type=int, default=None, help="num_workers for this project (default: cpu count)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of every trainer, alternated; best time kept")
    ap.add_argument("--corpus", help="train on this shared corpus file instead (e.g. zh_manpages.txt), whole")
    ap.add_argument("--trainers", default="ours,hf,rustbpe",
                    help="comma-separated subset of ours,hf,rustbpe,baseline")
    ap.add_argument("--baseline", metavar="CHECKOUT",
                    help="the trainer 'baseline' is tokenizer.training.train of this checkout (e.g. the main branch's)")
    ap.add_argument("--scale", type=float, metavar="GB",
                    help="instead: build a corpus of GB gigabytes in 64 MB files and train ours (vocab 32,000 "
                         "unless --vocab) on 1/4, 1/2 and all of it")
    ap.add_argument("--scale-dir", help="where to build the --scale corpus (default: the temp folder)")
    ap.add_argument("--first-run", action="store_true",
                    help="instead: ours on an empty cache folder, then again, for a small job (130 KB, vocab 500) "
                         "and a large one (--mb, default 8; --vocab, default 10,000)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--input", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        seconds = run_trainer(args.worker, args.input, args.vocab, args.out, args.workers, args.baseline)
        print(json.dumps({"seconds": seconds}))
        return
    if args.scale:
        scale_runs(args)
        return
    if args.first_run:
        first_run_rows(args)
        return

    mb = args.mb if args.mb is not None else (3 if args.quick else 1000)
    vocab = args.vocab or (2000 if args.quick else 10_000)
    scaling = not (args.quick or args.no_scaling)
    names = [n for n in args.trainers.split(",") if n]
    command = "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO)] + sys.argv[1:])

    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        path, heldout_en = make_training_file(tmp, mb, args.heldout_mb)
        if args.corpus:
            path, scaling = str(CORPUS / args.corpus), False
        size_mb = os.path.getsize(path) / MB
        heldout = {
            "en (held out)": heldout_en,
            "de": (CORPUS / "de_manpages.txt").read_text(encoding="utf-8"),
            "ru": (CORPUS / "ru_manpages.txt").read_text(encoding="utf-8"),
        }
        rows = {}
        for round_ in range(args.repeat):  # trainers alternate, so a burst of load hits all of them alike
            for name in names:
                out = os.path.join(tmp, f"{name}.out")
                print(f"training {name} on {size_mb:.1f} MB ({round_ + 1}/{args.repeat}) ...", file=sys.stderr,
                      flush=True)
                ours = name in ("ours", "baseline")
                r = measure(name, path, vocab, out, args.workers if ours else None, args.baseline if ours else None)
                if name not in rows or r["seconds"] < rows[name]["seconds"]:  # best of the rounds
                    r["peak_rss_mb"] = max(r["peak_rss_mb"], rows.get(name, r)["peak_rss_mb"])
                    r["cpu_seconds"] = min(r["cpu_seconds"], rows.get(name, r)["cpu_seconds"])
                    rows[name] = r
                else:
                    rows[name]["peak_rss_mb"] = max(r["peak_rss_mb"], rows[name]["peak_rss_mb"])
                    rows[name]["cpu_seconds"] = min(r["cpu_seconds"], rows[name]["cpu_seconds"])
        for name in names:
            out = os.path.join(tmp, f"{name}.out")
            rows[name]["bpt"] = {k: bytes_per_token(name, out, [t]) for k, t in heldout.items()}
        scale = []
        if scaling and "ours" in names:
            for smb in (10, 20):
                if smb < size_mb - 1:
                    spath, _ = make_training_file(tmp, smb, args.heldout_mb)
                    print(f"training ours on {smb} MB ...", file=sys.stderr, flush=True)
                    r = measure("ours", spath, vocab, os.path.join(tmp, f"ours{smb}.out"), args.workers)
                    scale.append((os.path.getsize(spath) / MB, r))
            scale.append((size_mb, rows["ours"]))

    labels = {"ours": "this project (tokenizer.training.train)", "hf": "HF tokenizers BpeTrainer", "rustbpe": "rustbpe",
              "baseline": f"baseline ({args.baseline})"}
    source = args.corpus or "en_docs + en_dictionary"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nBPE training, {size_mb:.1f} MB ({source}), vocab {vocab:,}, cpus {os.cpu_count()}, load {load}, "
          f"best of {args.repeat} alternated rounds\n")
    cols = list(heldout)
    print("| trainer | wall s | time / ours | CPU s | peak RSS MB | " + " | ".join(f"bytes/token {c}" for c in cols)
          + " |")
    print("|---|---:|---:|---:|---:|" + "---:|" * len(cols))
    ours_t = rows["ours"]["seconds"] if "ours" in rows else None
    for name, r in rows.items():
        ratio = f"{r['seconds'] / ours_t:.2f}x" if ours_t else "-"
        bpt = " | ".join(f"{r['bpt'][c]:.3f}" for c in cols)
        print(f"| {labels[name]} | {r['seconds']:.2f} | {ratio} | {r['cpu_seconds']:.2f} | {r['peak_rss_mb']:.0f} "
              f"| {bpt} |")
    if "ours" in rows:
        print()
        for peer in ("rustbpe", "hf", "baseline"):
            if peer in rows:
                print(f"- ours / {peer} wall time: {rows['ours']['seconds'] / rows[peer]['seconds']:.2f}x, CPU time: "
                      f"{rows['ours']['cpu_seconds'] / rows[peer]['cpu_seconds']:.2f}x")
        if "hf" in rows:
            diffs = ", ".join(
                f"{c} {100 * (rows['ours']['bpt'][c] / rows['hf']['bpt'][c] - 1):+.2f}%" for c in cols
            )
            print(f"- ours vs HF bytes/token (higher is better compression): {diffs}")
    if scale:
        print("\nThis project, same vocab, growing data:\n")
        print("| MB | wall s | s per MB | peak RSS MB |")
        print("|---:|---:|---:|---:|")
        for smb, r in scale:
            print(f"| {smb:.1f} | {r['seconds']:.2f} | {r['seconds'] / smb:.3f} | {r['peak_rss_mb']:.0f} |")
    print(f"\nCommand: `{command}`")


if __name__ == "__main__":
    main()
