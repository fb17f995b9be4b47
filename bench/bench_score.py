"""Benchmark: GPT-2 124M's many-position work (`gpt2 --score`, a long prompt's prefill) against HF transformers.

    python bench/bench_score.py                          # 3 alternated rounds (about 6 minutes on 2 cores)
    python bench/bench_score.py --rounds 1 --tokens 2100 # quick check
    python bench/bench_score.py --baseline /work/main    # adds rows for another checkout's code, same run

What it measures, fp32, on a 124M-shaped Hugging Face folder of random weights (speed does not depend on
them; the first run writes it with gpt2_numpy.hfmodel.save_hf_folder to ~/.cache/gpt2-bench/124M-hf-random),
both engines on the same number of threads (--threads, default 2: torch.set_num_threads and OPENBLAS_NUM_THREADS):

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

Every measurement runs in its own subprocess, engines alternated round by round (torch's OpenMP threads
and OpenBLAS's spin-wait, so two engines in one process slow each other). Ratios are HF's seconds over
ours (above 1: we are faster), one per round; the table gives their median and range.
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
SHAPE_124M = dict(n_vocab=50257, n_ctx=1024, n_embd=768, n_head=12, n_layer=12)
WINDOW, STRIDE = 1024, 512


# ------------------------------------------------------------------------- checkpoint
def ensure_hf_folder(folder):
    """A random 124M-shaped Hugging Face folder, written once (GPT-2's init: std 0.02, layer norms 1 and 0)."""
    if (folder / "model.safetensors").is_file():
        return folder
    from gpt2_numpy.hfmodel import save_hf_folder

    print(f"writing a random 124M-shaped Hugging Face folder to {folder} (once) ...", file=sys.stderr)
    rng = np.random.default_rng(0)
    d = SHAPE_124M["n_embd"]

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    def norm():
        return {"g": np.ones(d, np.float32), "b": np.zeros(d, np.float32)}

    def dense(n_in, n_out):
        return {"w": normal(n_in, n_out), "b": normal(n_out)}

    params = {"wte": normal(SHAPE_124M["n_vocab"], d), "wpe": normal(SHAPE_124M["n_ctx"], d), "ln_f": norm(),
              "blocks": [{"ln_1": norm(), "ln_2": norm(),
                          "attn": {"c_attn": dense(d, 3 * d), "c_proj": dense(d, d)},
                          "mlp": {"c_fc": dense(d, 4 * d), "c_proj": dense(4 * d, d)}}
                         for _ in range(SHAPE_124M["n_layer"])]}
    vocab = json.loads((REPO / "tokenizer" / "data" / "encoder.json").read_text(encoding="utf-8"))
    lines = (REPO / "tokenizer" / "data" / "vocab.bpe").read_text(encoding="utf-8").split("\n")
    merges = [tuple(line.split(" ")) for line in lines[1:] if line]
    save_hf_folder(folder, SHAPE_124M, params, vocab, merges)
    return folder


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
    parser.add_argument("--tokens", type=int, default=8030, help="ids scored (default 8030, 16 windows)")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="prompt length for the first token")
    parser.add_argument("--after-tokens", type=int, default=16,
                        help="greedy steps timed after the prompt (the prompt and they fit in 1,024 positions)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (one ratio each)")
    parser.add_argument("--repeats", type=int, default=1, help="timed runs per process, after a warm-up (median)")
    parser.add_argument("--threads", type=int, default=2, help="threads for both engines")
    parser.add_argument("--models-dir", type=Path, default=Path.home() / ".cache" / "gpt2-bench")
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
    sys.path.insert(0, str(REPO))
    from gpt2_numpy.scoring import windows

    args.folder = ensure_hf_folder(args.models_dir / "124M-hf-random")
    ours = {"ours": REPO} if args.baseline is None else {"ours": REPO, "baseline": args.baseline.resolve()}
    jobs = [(name, what, repo) for what in ("score", "ttft", "after") for name, repo in ours.items()]
    jobs += [("hf", what, REPO) for what in ("score", "score_keep", "ttft", "generate", "after")]
    load_before = os.getloadavg()[0]
    results = {}  # (name, what) -> [result per round]
    for round_number in range(args.rounds):
        for name, what, repo in jobs if round_number % 2 == 0 else reversed(jobs):  # alternate the order too
            print(f"  round {round_number + 1}/{args.rounds}: {name} {what} ...", file=sys.stderr, flush=True)
            engine = "hf" if name == "hf" else "ours"
            results.setdefault((name, what), []).append(run_worker(args, engine, what, repo))

    def seconds(name, what, kind):
        return [r[kind] for r in results[(name, what)]]

    def ratios(peer, name, what, kind):  # peer's seconds over ours, round by round
        return [p / o for p, o in zip(seconds(*peer, kind), seconds(name, what, kind))]

    n_windows = len(windows(args.tokens, WINDOW, stride=STRIDE))
    print(f"\n`{' '.join([Path(sys.executable).name, 'bench/bench_score.py'] + sys.argv[1:])}` "
          f"({args.threads} threads each; {args.rounds} alternated rounds, median (range); 1-min load "
          f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after: other work on the machine skews "
          f"every wall-clock figure; CPU seconds, of every thread of the process, much less)\n")
    for kind, title in (("seconds", "wall-clock seconds"), ("cpu_seconds", "CPU seconds")):
        print(f"| measure | engine | {title} | HF's recipe / this | HF's leanest / this |")
        print("| --- | --- | --- | --- | --- |")
        for label, what, recipe, leanest in (
                (f"score {args.tokens} ids ({n_windows} windows of {WINDOW}, stride {STRIDE})", "score",
                 ("hf", "score"), ("hf", "score_keep")),
                (f"first token of a {args.prompt_tokens}-token prompt", "ttft", ("hf", "generate"), ("hf", "ttft")),
                (f"a step after that prompt, in ms (median of {args.after_tokens})", "after", ("hf", "after"),
                 ("hf", "after"))):
            scale = 1000 if what == "after" else 1  # a step's time in milliseconds
            for name in ours:
                s = [scale * value for value in seconds(name, what, kind)]
                print(f"| {label} | {name} ({'this checkout' if name == 'ours' else args.baseline}) | "
                      f"{statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) | "
                      f"{spread(ratios(recipe, name, what, kind))} | {spread(ratios(leanest, name, what, kind))} |")
            hf_rows = {"score": ((recipe, "labels="), (leanest, "logits_to_keep")),
                       "ttft": ((recipe, "generate()"), (leanest, "logits_to_keep")),
                       "after": ((recipe, "past_key_values"),)}[what]
            for peer, how in hf_rows:
                s = [scale * value for value in seconds(*peer, kind)]
                print(f"| {label} | HF transformers ({how}) | {statistics.median(s):.2f} ({min(s):.2f}-{max(s):.2f}) "
                      f"| | |")
        print()
    nll = {name: results[(name, "score")][0]["mean_nll"] for name in list(ours) + ["hf"]}
    tokens = {name: results[(name, "ttft")][0]["token"] for name in list(ours) + ["hf"]}
    last = {name: results[(name, "after")][0]["token"] for name in list(ours) + ["hf"]}
    print(f"mean NLL (nats/token): {', '.join(f'{k} {v:.6f}' for k, v in nll.items())}; "
          f"first token: {', '.join(f'{k} {v}' for k, v in tokens.items())}; "
          f"token after {args.after_tokens} steps: {', '.join(f'{k} {v}' for k, v in last.items())}")


if __name__ == "__main__":
    main()
