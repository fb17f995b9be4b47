"""Benchmark: GPT-2's many-position work (`gpt2 --score`, a long prompt's prefill) against HF transformers.

    python bench/bench_score.py                          # 124M, 3 alternated rounds (about 6 minutes on 2 cores)
    python bench/bench_score.py --rounds 1 --tokens 2100 # quick check
    python bench/bench_score.py --sizes 355M,774M,1558M --rounds 2 --tokens 1024 --repeats 1   # the larger sizes
    python bench/bench_score.py --baseline /work/main    # adds rows for another checkout's code, same run

What it measures, fp32, per size (--sizes), on the random-weight Hugging Face folders bench_generate.py writes
(its ensure_folder, into --models-dir: speed does not depend on the weights), both engines on the same number of
threads (--threads, default 2: torch.set_num_threads and OPENBLAS_NUM_THREADS):

- score: `gpt2 --score`'s work (scoring.token_nlls) on --tokens ids in windows of 1,024 starting 512 apart,
  against HF's recipe on the same windows (model(input_ids, labels=...) with the overlap's labels -100, as
  HF's perplexity guide does) and against HF computing logits only for the scored positions
  (logits_to_keep, the least work HF can be asked for). Both report the mean NLL: they must agree.
- time to first token of a --prompt-tokens prompt: our KVDecoder prefill + its logits + argmax, against HF's
  forward with logits_to_keep=1 + argmax (what model.generate does for its first token) and
  model.generate(max_new_tokens=1).
- decoding after that prompt: seconds per token of --after-tokens greedy steps that follow its prefill (ours:
  KVDecoder.decode; HF: the model's forward on one id with its past_key_values), the prefill untimed. A long
  prompt's first pass must leave the process as fast at one position per step as a short one's did.

--measures picks some of the three (score, first, after). Every measurement runs in its own subprocess, engines
alternated round by round (torch's OpenMP threads and OpenBLAS's spin-wait, so two engines in one process slow
each other). Ratios are HF's seconds over ours (above 1: we are faster), one per round; the table gives their
median and range.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from bench_generate import SIZES, ensure_folder  # noqa: E402  (one writer of the random folders for every bench)

WINDOW, STRIDE = 1024, 512
MEASURES = {"score": "score", "first": "ttft", "after": "after"}  # --measures' names -> the workers' jobs


# ------------------------------------------------------------------------------ ids
def text_ids(n_tokens):
    """Deterministic ids spread over the vocabulary: the time does not depend on which ids they are."""
    return [(i * 104729 + 7919) % 50257 for i in range(n_tokens)]


# ---------------------------------------------------------------------------- workers
def timed(work, repeats):
    """{"seconds", "cpu_seconds"} (medians of `repeats` runs of work(), after one untimed warm-up), and the
    last run's result. CPU seconds (every thread of the process) barely move with the machine's load; on
    one thread they are the work itself, on more they include threads spin-waiting."""
    result, wall, cpu = work(), [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = work()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return {"seconds": statistics.median(wall), "cpu_seconds": statistics.median(cpu)}, result


def worker_ours(args, what):
    sys.path.insert(0, str(args.repo))  # this checkout's gpt2_numpy, or --baseline's
    from gpt2_numpy import hfmodel, kvcache, scoring

    hparams, params = hfmodel.load_hf_folder(args.folder)
    if what == "score":  # as `gpt2 --score` calls it
        ids = text_ids(args.tokens)
        times, (nlls, _) = timed(lambda: scoring.token_nlls(ids, params, hparams["n_head"], stride=STRIDE),
                                 args.repeats)
        return {**times, "mean_nll": float(nlls.mean())}
    prompt = text_ids(args.prompt_tokens)
    weights = kvcache.DecodingWeights(params)  # built once, as a long-lived program would

    def first_token():
        logits = kvcache.KVDecoder([prompt], weights, hparams["n_head"], 1).prefill()  # [1, n_vocab]
        return int(np.argmax(logits[0]))

    if what == "after":
        def after():  # the steps' seconds, the prefill untimed
            decoder = kvcache.KVDecoder([prompt], weights, hparams["n_head"], args.after_tokens)
            token = int(np.argmax(decoder.prefill()[0]))
            start, start_cpu = time.perf_counter(), time.process_time()
            for _ in range(args.after_tokens):
                token = int(np.argmax(decoder.decode([token])[0]))
            return time.perf_counter() - start, time.process_time() - start_cpu, token

        return per_token(after, args)
    times, token = timed(first_token, args.repeats)
    return {**times, "token": token}


def per_token(run, args):
    """{"seconds", "cpu_seconds"} per step of run() (which returns its steps' wall and CPU seconds and the last
    token), medians of --repeats after a warm-up run."""
    run()
    wall, cpu, token = zip(*(run() for _ in range(args.repeats)))
    return {"seconds": statistics.median(wall) / args.after_tokens,
            "cpu_seconds": statistics.median(cpu) / args.after_tokens, "token": token[-1]}


def worker_hf(args, what):
    import torch
    from transformers import GPT2LMHeadModel

    sys.path.insert(0, str(REPO))
    from gpt2_numpy.scoring import windows  # the windows `gpt2 --score` reads

    torch.set_num_threads(args.threads)
    model = GPT2LMHeadModel.from_pretrained(args.folder).eval()  # HF's default attention (sdpa)
    with torch.inference_mode():
        if what in ("score", "score_keep"):
            ids = torch.tensor([text_ids(args.tokens)])

            def score():  # summed NLL over the scored ids, divided by their count
                total, count = 0.0, 0
                for start, end, first in windows(ids.shape[1], WINDOW, stride=STRIDE):
                    window = ids[:, start:end]
                    n_scored = end - first
                    if what == "score":  # HF's perplexity guide: labels, the overlap's set to -100
                        labels = window.clone()
                        labels[:, : first - start] = -100
                        loss = model(window, labels=labels).loss  # mean over the n_scored labels
                    else:  # logits only for the positions that predict the scored ids
                        logits = model(window[:, :-1], logits_to_keep=n_scored).logits[0]  # [n_scored, n_vocab]
                        loss = torch.nn.functional.cross_entropy(logits, window[0, first - start :])
                    total += float(loss) * n_scored
                    count += n_scored
                return total / count

            times, mean_nll = timed(score, args.repeats)
            return {**times, "mean_nll": mean_nll}
        prompt = torch.tensor([text_ids(args.prompt_tokens)])
        if what == "after":
            def after():  # the steps' seconds, the prefill untimed
                out = model(prompt, use_cache=True, logits_to_keep=1)
                past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)  # [1, 1]
                start, start_cpu = time.perf_counter(), time.process_time()
                for _ in range(args.after_tokens):
                    out = model(token, past_key_values=past, use_cache=True)
                    past, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
                return time.perf_counter() - start, time.process_time() - start_cpu, int(token)

            return per_token(after, args)
        if what == "ttft":  # the first step of generate: the prompt's forward, the last position's logits
            times, token = timed(lambda: int(model(prompt, logits_to_keep=1).logits[0, -1].argmax()), args.repeats)
        else:
            times, token = timed(lambda: int(model.generate(prompt, attention_mask=torch.ones_like(prompt),
                                                              max_new_tokens=1, do_sample=False,
                                                              pad_token_id=0)[0, -1]), args.repeats)
        return {**times, "token": token}


# ------------------------------------------------------------------------------- main
def run_worker(args, engine, what, repo):
    command = [sys.executable, __file__, "--worker", f"{engine}:{what}", "--repo", str(repo),
               "--folder", str(args.folder), "--tokens", str(args.tokens), "--prompt-tokens", str(args.prompt_tokens),
               "--repeats", str(args.repeats), "--threads", str(args.threads), "--after-tokens", str(args.after_tokens)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env)
    if done.returncode:
        sys.exit(f"the {engine} {what} worker failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def spread(values):
    return f"{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="124M", help=f"comma-separated, of {', '.join(SIZES)} (default 124M)")
    parser.add_argument("--measures", default=",".join(MEASURES),
                        help=f"comma-separated, of {', '.join(MEASURES)} (default all)")
    parser.add_argument("--tokens", type=int, default=8030, help="ids scored (default 8030, 16 windows)")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="prompt length for the first token")
    parser.add_argument("--after-tokens", type=int, default=16,
                        help="greedy steps timed after the prompt (the prompt and they fit in 1,024 positions)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (one ratio each)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per process, after a warm-up (median)")
    parser.add_argument("--threads", type=int, default=2, help="threads for both engines")
    parser.add_argument("--models-dir", type=Path, default=Path.home() / ".cache" / "gpt2-bench" / "hf",
                        help="where the random folders are (bench_generate.py's, written on first use)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout (e.g. the main branch) whose gpt2_numpy is timed too, same rounds")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        engine, what = args.worker.split(":")
        print(json.dumps((worker_ours if engine == "ours" else worker_hf)(args, what)))
        return
    sizes, measures = args.sizes.split(","), args.measures.split(",")
    for name, given, known in (("--sizes", sizes, SIZES), ("--measures", measures, MEASURES)):
        if not set(given) <= set(known):
            parser.error(f"{name} takes {', '.join(known)}; got {', '.join(sorted(set(given) - set(known)))}")
    load_before = os.getloadavg()[0]
    sections = [(size, bench_size(args, size, [MEASURES[m] for m in MEASURES if m in measures])) for size in sizes]
    print(f"\n`{' '.join([Path(sys.executable).name, 'bench/bench_score.py'] + sys.argv[1:])}` "
          f"({args.threads} threads each; {args.rounds} alternated rounds, median (range); 1-min load "
          f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after: other work on the machine skews "
          f"every wall-clock figure; CPU seconds, of every thread of the process, much less)")
    for size, section in sections:
        print(f"\n{size}:\n")
        print(section)


def bench_size(args, size, whats):
    """One size's rounds (its folder written first if missing); its tables, as text."""
    sys.path.insert(0, str(REPO))
    from gpt2_numpy.scoring import windows

    args.folder = ensure_folder(args.models_dir, size)
    ours = {"ours": REPO} if args.baseline is None else {"ours": REPO, "baseline": args.baseline.resolve()}
    hf_jobs = {"score": ("score", "score_keep"), "ttft": ("ttft", "generate"), "after": ("after",)}
    jobs = [(name, what, repo) for what in whats for name, repo in ours.items()]
    jobs += [("hf", job, REPO) for what in whats for job in hf_jobs[what]]
    results = {}  # (name, what) -> [result per round]
    for round_number in range(args.rounds):
        for name, what, repo in jobs if round_number % 2 == 0 else reversed(jobs):  # alternate the order too
            print(f"  {size} round {round_number + 1}/{args.rounds}: {name} {what} ...", file=sys.stderr, flush=True)
            engine = "hf" if name == "hf" else "ours"
            results.setdefault((name, what), []).append(run_worker(args, engine, what, repo))

    def seconds(name, what, kind):
        return [r[kind] for r in results[(name, what)]]

    def ratios(peer, name, what, kind):  # peer's seconds over ours, round by round
        return [p / o for p, o in zip(seconds(*peer, kind), seconds(name, what, kind))]

    n_windows = len(windows(args.tokens, WINDOW, stride=STRIDE))
    lines = []
    for kind, title in (("seconds", "wall-clock seconds"), ("cpu_seconds", "CPU seconds")):
        lines += [f"| measure | engine | {title} | HF's recipe / this | HF's leanest / this |",
                  "| --- | --- | --- | --- | --- |"]
        for label, what, recipe, leanest in (
                (f"score {args.tokens} ids ({n_windows} windows of {WINDOW}, stride {STRIDE})", "score",
                 ("hf", "score"), ("hf", "score_keep")),
                (f"first token of a {args.prompt_tokens}-token prompt", "ttft", ("hf", "generate"), ("hf", "ttft")),
                (f"a step after that prompt, in ms (median of {args.after_tokens})", "after", ("hf", "after"),
                 ("hf", "after"))):
            if what not in whats:
                continue
            scale = 1000 if what == "after" else 1  # a step's time in milliseconds
            for name in ours:
                s = [scale * value for value in seconds(name, what, kind)]
                lines.append(f"| {label} | {name} ({'this checkout' if name == 'ours' else args.baseline}) | "
                             f"{statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | "
                             f"{spread(ratios(recipe, name, what, kind))} | "
                             f"{spread(ratios(leanest, name, what, kind))} |")
            hf_rows = {"score": ((recipe, "labels="), (leanest, "logits_to_keep")),
                       "ttft": ((recipe, "generate()"), (leanest, "logits_to_keep")),
                       "after": ((recipe, "past_key_values"),)}[what]
            for peer, how in hf_rows:
                s = [scale * value for value in seconds(*peer, kind)]
                lines.append(f"| {label} | HF transformers ({how}) | "
                             f"{statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | | |")
        lines.append("")
    agree = []  # what both engines computed, from the first round: equal, or the bench is comparing unlike work
    for what, field, label in (("score", "mean_nll", "mean NLL (nats/token)"), ("ttft", "token", "first token"),
                               ("after", "token", f"token after {args.after_tokens} steps")):
        if what in whats:
            values = {name: results[(name, what)][0][field] for name in list(ours) + ["hf"]}
            shown = {name: f"{v:.6f}" if isinstance(v, float) else str(v) for name, v in values.items()}
            agree.append(f"{label}: {', '.join(f'{k} {v}' for k, v in shown.items())}")
    lines.append("; ".join(agree))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
