"""Benchmark: GPT-2 124M decoding speed of this project (gpt2_numpy/kvcache.py, behind gpt2) against its peers.

    python bench/bench_generate.py                # full run (about 3 minutes on 2 cores)
    python bench/bench_generate.py --tokens 16    # quick check

What it measures, all greedy, fp32, on a 124M-shaped checkpoint with random weights (real
weights are not needed for speed; the first run writes it to ~/.cache/gpt2-bench/124M with
tests/tiny_checkpoint.py and checks it once with gpt2_numpy/checkpoints.py):

- decode tok/s of gpt2_numpy/kvcache.py (KV cache; the weights prepared once, kvcache.DecodingWeights),
  of HF transformers' GPT2LMHeadModel with the same weights (KV cache, torch using every core)
  and of picoGPT's method (gpt2_numpy/model.py's readable gpt2(), no cache: the whole sequence again for
  every token). Decode excludes the prompt's prefill.
- the memory-bandwidth bound: decoding one token must read every weight once, so
  bound = bandwidth / fp32 weight bytes per token, with the bandwidth of a large
  np.copyto (bytes read + bytes written). np.copyto runs on one thread; the same copy
  split over every core, and a read-only pass (np.add.reduce) split over every core,
  give stricter bounds, shown too.
- a batch of 8 prompts decoded together vs one stream.
- process start -> first token: `python gpt2.py ... --n_tokens_to_generate 1` (the gpt2 command, from
  the checkout) on the warm (CRC-stamped) checkpoint, wall clock.

Every engine runs in its own subprocess: torch's OpenMP threads and OpenBLAS's threads
spin-wait, and sharing a process (2 cores) slowed HF down 5x in a trial.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHAPE_124M = dict(n_ctx=1024, n_embd=768, n_head=12, n_layer=12)


# ------------------------------------------------------------------------- checkpoint
def ensure_checkpoint(models_dir):
    """Write the random 124M checkpoint once and load it once (checking its CRCs); later runs reuse it."""
    model_dir = Path(models_dir) / "124M"
    if not (model_dir / "model.ckpt.crc32c-ok.json").is_file():
        if not (model_dir / "checkpoint").is_file():
            from tests.tiny_checkpoint import write_tiny_checkpoint

            print(f"writing a random 124M-shaped checkpoint to {model_dir} (once) ...", file=sys.stderr)
            write_tiny_checkpoint(model_dir, **SHAPE_124M, seed=0)
        load_params(models_dir)  # the first load checks the CRCs and stamps the checkpoint
    return model_dir


def load_params(models_dir):
    from gpt2_numpy.checkpoints import load_encoder_hparams_and_params

    encoder, hparams, params = load_encoder_hparams_and_params("124M", models_dir)
    return hparams, params


def prompt_ids(n_tokens, row=0):
    return [(row * 7919 + i * 104729) % 50000 for i in range(n_tokens)]


# ---------------------------------------------------------------------------- workers
def timed_steps(steps):
    """Times (from start) at which each item of the iterator `steps` arrived."""
    start, times = time.perf_counter(), []
    for _ in steps:
        times.append(time.perf_counter() - start)
    return times


def decode_rate(times, n_rows=1):
    """Tokens per second after the first step (the first includes the prompt's prefill)."""
    return n_rows * (len(times) - 1) / (times[-1] - times[0])


def worker_ours(args, batch):
    from gpt2_numpy import kvcache

    hparams, params = load_params(args.models_dir)
    weights = kvcache.DecodingWeights(params)  # built once for every run, as a long-lived program would
    prompts = [prompt_ids(args.prompt_tokens, row) for row in range(batch)]
    # warm-up, same sizes: page in the weights, make the decoding layouts
    list(kvcache.iter_generate_batch(prompts, weights, hparams["n_head"], args.tokens))
    rates, firsts = [], []
    for _ in range(args.repeats):
        times = timed_steps(kvcache.iter_generate_batch(prompts, weights, hparams["n_head"], args.tokens))
        rates.append(decode_rate(times, batch))
        firsts.append(times[0])
    ids = kvcache.generate(prompts[0], weights, hparams["n_head"], 8)
    return {"tok_s": statistics.median(rates), "prefill_s": statistics.median(firsts), "first_ids": ids}


def worker_nocache(args):
    from gpt2_numpy.model import gpt2

    hparams, params = load_params(args.models_dir)

    def steps():  # model.generate_reference, picoGPT's loop: the whole sequence again for every token
        ids = prompt_ids(args.prompt_tokens)
        for _ in range(args.baseline_tokens):
            logits = gpt2(ids, **params, n_head=hparams["n_head"])
            ids.append(int(np.argmax(logits[-1])))
            yield ids[-1]

    list(steps())
    return {"tok_s": decode_rate(timed_steps(steps()))}


def worker_hf(args):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.set_num_threads(os.cpu_count())
    hparams, params = load_params(args.models_dir)
    config = GPT2Config(vocab_size=hparams["n_vocab"], n_positions=hparams["n_ctx"], n_embd=hparams["n_embd"],
                        n_layer=hparams["n_layer"], n_head=hparams["n_head"], activation_function="gelu_new",
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)
    model = GPT2LMHeadModel(config).eval()
    state = {"transformer.wte.weight": params["wte"], "transformer.wpe.weight": params["wpe"],
             "transformer.ln_f.weight": params["ln_f"]["g"], "transformer.ln_f.bias": params["ln_f"]["b"]}
    for i, block in enumerate(params["blocks"]):
        for part, names in (("ln_1", ()), ("ln_2", ()), ("attn", ("c_attn", "c_proj")), ("mlp", ("c_fc", "c_proj"))):
            if not names:
                state[f"transformer.h.{i}.{part}.weight"] = block[part]["g"]
                state[f"transformer.h.{i}.{part}.bias"] = block[part]["b"]
            for name in names:  # HF's Conv1D keeps w as [nx, nf], like ours
                state[f"transformer.h.{i}.{part}.{name}.weight"] = block[part][name]["w"]
                state[f"transformer.h.{i}.{part}.{name}.bias"] = block[part][name]["b"]
    with torch.no_grad():
        for name, array in state.items():
            model.get_parameter(name).copy_(torch.from_numpy(np.array(array)))
    inputs = torch.tensor([prompt_ids(args.prompt_tokens)])

    def loop_steps(n):  # the lean way: forward + past_key_values, one token at a time
        out = model(inputs, use_cache=True)
        for _ in range(n):
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            yield int(token)
            out = model(token, past_key_values=out.past_key_values, use_cache=True)

    def generate_seconds(n):  # the usual way: model.generate
        start = time.perf_counter()
        model.generate(inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, pad_token_id=0)
        return time.perf_counter() - start

    with torch.inference_mode():  # HF's fastest no-autograd mode
        list(loop_steps(args.tokens))
        loop = [decode_rate(timed_steps(loop_steps(args.tokens))) for _ in range(args.repeats)]
        generate_seconds(4)
        one = statistics.median(generate_seconds(1) for _ in range(args.repeats))
        many = statistics.median(generate_seconds(args.tokens) for _ in range(args.repeats))
        first_ids = list(loop_steps(8))
    return {"loop_tok_s": statistics.median(loop), "generate_tok_s": (args.tokens - 1) / (many - one),
            "first_ids": first_ids, "threads": torch.get_num_threads()}


def worker_bandwidth(args):
    from gpt2_numpy.model import as_float32

    hparams, params = load_params(args.models_dir)
    weights = as_float32(params)
    blocks = [a for block in weights["blocks"] for a in leaves(block)]
    # per token: every block weight, ln_f, the whole wte (output head), one row each of wte/wpe
    per_token = sum(a.nbytes for a in blocks) + sum(a.nbytes for a in leaves(weights["ln_f"])) \
        + weights["wte"].nbytes + 2 * weights["wte"][0].nbytes
    src = np.ones(2**27, dtype=np.float32)  # 512 MiB, far past the caches
    dst = np.zeros_like(src)

    def best_seconds(work, n_threads):  # `work(lo, hi)` on n_threads slices of the arrays at once
        cuts = np.linspace(0, src.size, n_threads + 1).astype(int)
        best = float("inf")
        for _ in range(5):
            threads = [threading.Thread(target=work, args=(lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            best = min(best, time.perf_counter() - start)
        return best

    def copy(lo, hi):  # bytes read + bytes written
        np.copyto(dst[lo:hi], src[lo:hi])

    def read(lo, hi):  # bytes read only, as decoding does
        np.add.reduce(src[lo:hi])

    cores = os.cpu_count()
    gbs = {"copy_1": 2 * src.nbytes / best_seconds(copy, 1) / 1e9,
           "copy_all": 2 * src.nbytes / best_seconds(copy, cores) / 1e9,
           "read_all": src.nbytes / best_seconds(read, cores) / 1e9}
    return {"bytes_per_token": per_token, "GBs": gbs, "bound_tok_s": {k: v * 1e9 / per_token for k, v in gbs.items()}}


def leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from leaves(value)
    else:
        yield tree


def first_token_seconds(args):
    """Wall time of `python gpt2.py PROMPT --n_tokens_to_generate 1` on the warm cache."""
    command = [sys.executable, str(REPO / "gpt2.py"), "Hello, my name is", "--n_tokens_to_generate", "1",
               "--model_size", "124M", "--models_dir", str(args.models_dir)]
    subprocess.run(command, check=True, capture_output=True, cwd=REPO)  # warm the page cache
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, cwd=REPO)
        times.append(time.perf_counter() - start)
    python_alone = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        python_alone.append(time.perf_counter() - start)
    return statistics.median(times), statistics.median(python_alone), " ".join(command[1:])


# ------------------------------------------------------------------------------- main
def run_worker(args, name):
    command = [sys.executable, __file__, "--worker", name, "--tokens", str(args.tokens),
               "--prompt-tokens", str(args.prompt_tokens), "--baseline-tokens", str(args.baseline_tokens),
               "--batch", str(args.batch), "--repeats", str(args.repeats), "--models-dir", str(args.models_dir)]
    print(f"  {name} ...", file=sys.stderr, flush=True)
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per decode run")
    parser.add_argument("--prompt-tokens", type=int, default=16, help="prompt length")
    parser.add_argument("--baseline-tokens", type=int, default=16, help="new tokens for the slow no-cache baseline")
    parser.add_argument("--batch", type=int, default=8, help="prompts decoded together in the batch run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per figure (median reported)")
    parser.add_argument("--models-dir", type=Path, default=Path.home() / ".cache" / "gpt2-bench")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tokens < 2 or args.baseline_tokens < 2:
        parser.error("--tokens and --baseline-tokens must be at least 2 (decode speed excludes the first)")

    if args.worker:
        work = {"ours": lambda: worker_ours(args, 1), "ours_batch": lambda: worker_ours(args, args.batch),
                "nocache": lambda: worker_nocache(args), "hf": lambda: worker_hf(args),
                "bandwidth": lambda: worker_bandwidth(args)}[args.worker]
        print(json.dumps(work()))
        return

    ensure_checkpoint(args.models_dir)
    load_before = os.getloadavg()[0]
    print("measuring (each in its own process):", file=sys.stderr)
    r = {name: run_worker(args, name) for name in ("bandwidth", "ours", "ours_batch", "hf", "nocache")}
    print("  first token ...", file=sys.stderr, flush=True)
    first, python_alone, cli = first_token_seconds(args)

    ours, hf = r["ours"]["tok_s"], max(r["hf"]["loop_tok_s"], r["hf"]["generate_tok_s"])
    batch, per_token, cores = r["ours_batch"]["tok_s"], r["bandwidth"]["bytes_per_token"], os.cpu_count()
    gbs, bound = r["bandwidth"]["GBs"], r["bandwidth"]["bound_tok_s"]
    rows = [
        ("decode tok/s, 1 stream, KV cache", f"{ours:.1f}",
         f"HF transformers {hf:.1f} (forward loop {r['hf']['loop_tok_s']:.1f}, "
         f"generate() {r['hf']['generate_tok_s']:.1f}; torch threads {r['hf']['threads']})", f"{ours / hf:.2f}x"),
        ("decode tok/s vs no cache", f"{ours:.1f}", f"picoGPT method (full recompute) {r['nocache']['tok_s']:.1f}",
         f"{ours / r['nocache']['tok_s']:.1f}x"),
        ("memory-bandwidth bound (np.copyto)", f"{ours:.1f}",
         f"bound {bound['copy_1']:.1f} tok/s = {gbs['copy_1']:.1f} GB/s (np.copyto, read + write) / "
         f"{per_token / 1e6:.0f} MB of fp32 weights per token", f"{100 * ours / bound['copy_1']:.0f}% of bound"),
        (f"memory-bandwidth bound, {cores} cores", f"{ours:.1f}",
         f"copying on {cores} threads {gbs['copy_all']:.1f} GB/s: bound {bound['copy_all']:.1f} tok/s; "
         f"only reading (np.add.reduce) on {cores} threads {gbs['read_all']:.1f} GB/s: bound {bound['read_all']:.1f} tok/s",
         f"{100 * ours / bound['copy_all']:.0f}% / {100 * ours / bound['read_all']:.0f}%"),
        (f"batch of {args.batch}, aggregate decode tok/s", f"{batch:.1f}", f"1 stream {ours:.1f}",
         f"{batch / ours:.2f}x"),
        ("process start -> first token, warm cache", f"{first:.2f} s", f"`python -c pass` {python_alone:.2f} s", ""),
    ]
    print(f"\n`{' '.join([Path(sys.executable).name, 'bench/bench_generate.py'] + sys.argv[1:])}` "
          f"({os.cpu_count()} cores; {args.tokens} new tokens after a {args.prompt_tokens}-token prompt, "
          f"no-cache baseline {args.baseline_tokens}; median of {args.repeats}; 1-min load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after: other work on the machine skews every figure)\n")
    print("| measure | this project | peer | ratio |\n| --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    same = r["ours"]["first_ids"] == r["hf"]["first_ids"]
    warm = (Path(args.models_dir) / "124M" / "model.ckpt.crc32c-ok.json").is_file()
    print(f"\ngreedy ids, first 8, ours == HF: {same}; prefill of the prompt: {r['ours']['prefill_s'] * 1e3:.0f} ms; "
          f"first-token command (CRCs already checked: {'yes' if warm else 'NO, the CRC check included'}): python {cli}")


if __name__ == "__main__":
    main()
