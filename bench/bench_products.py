"""Benchmark: a long prompt's matrix products alone, NumPy's BLAS (OpenBLAS) against torch's (MKL), in GFLOPS.

    python bench/bench_products.py                         # 124M's shapes, a 1,000-token prompt, 3 rounds
    python bench/bench_products.py --sizes 124M 355M --rounds 5

A long prompt's first pass (its first token, a --score window) is mostly four matrix products per block, each
positions x weights plus a bias: c_attn [n, d] @ [d, 3d], attention's c_proj [n, d] @ [d, d], the MLP's c_fc
[n, d] @ [d, 4d] and its c_proj [n, 4d] @ [4d, d]. How fast the BLAS library runs them bounds how fast the prefill
can be, whatever the code around them does; this bench times them alone, at GPT-2's shapes, random numbers,
float32, 2 threads, so that the bound can be read off (docs/performance.md, the scoring section):

- "NumPy": ``x @ w + b`` on NumPy's OpenBLAS with 2 threads;
- "NumPy in bands": the same in two bands of positions, each on one BLAS thread (``gpt2_numpy.bands.in_bands``:
  how kvcache.py and scoring.py run a prompt's products);
- "torch": ``torch.addmm(b, x, w)`` (the bias added by the product itself), what HF transformers' GPT-2 runs,
  on torch's MKL with 2 threads (torch.set_num_threads(2)).

Each engine runs in its own process (both libraries' idle threads spin, so sharing one process would slow
both), the engines in an order that turns by one each round. Each figure is the median over the rounds of each
round's median of --repeats timings. torch is the test extra's (``pip install -e ".[test]"``).
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SIZES = {"124M": 768, "355M": 1024, "774M": 1280, "1558M": 1600}  # n_embd
ENGINES = {"numpy": "NumPy", "bands": "NumPy in bands", "torch": "torch"}
THREADS = 2


def shapes(n_embd, n_tokens):  # product -> (rows, n_in, n_out)
    d = n_embd
    return {"c_attn": (n_tokens, d, 3 * d), "attn c_proj": (n_tokens, d, d), "c_fc": (n_tokens, d, 4 * d),
            "mlp c_proj": (n_tokens, 4 * d, d)}


def worker(engine, n_embd, n_tokens, repeats):  # -> {product: median seconds}
    rng = np.random.default_rng(0)
    if engine == "torch":
        import torch

        torch.set_num_threads(THREADS)
    else:
        sys.path.insert(0, str(REPO))
        from gpt2_numpy import bands
    seconds = {}
    for name, (n, n_in, n_out) in shapes(n_embd, n_tokens).items():
        x = rng.standard_normal((n, n_in), dtype=np.float32)
        w = rng.standard_normal((n_in, n_out), dtype=np.float32)
        b = rng.standard_normal(n_out, dtype=np.float32)
        if engine == "torch":
            tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

            def product():
                with torch.inference_mode():
                    torch.addmm(tb, tx, tw)
        elif engine == "bands":
            out = np.empty((n, n_out), np.float32)

            def product():
                bands.in_bands(lambda rows: rows @ w + b, x, axis=0, out=out)
        else:
            def product():
                x @ w + b
        product()  # warm-up: threads started, memory touched
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            product()
            times.append(time.perf_counter() - start)
        seconds[name] = statistics.median(times)
    return seconds


def run_worker(engine, n_embd, args):
    command = [sys.executable, __file__, "--worker", engine, "--n-embd", str(n_embd), "--tokens", str(args.tokens),
               "--repeats", str(args.repeats)]
    threads = {"OPENBLAS_NUM_THREADS": str(THREADS), "OMP_NUM_THREADS": str(THREADS), "MKL_NUM_THREADS": str(THREADS)}
    out = subprocess.run(command, check=True, capture_output=True, text=True, env={**os.environ, **threads}).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["124M"], choices=list(SIZES))
    parser.add_argument("--tokens", type=int, default=1000, help="the prompt's positions (rows of every product)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=9, help="timings per product in each process")
    parser.add_argument("--worker", choices=list(ENGINES), help=argparse.SUPPRESS)
    parser.add_argument("--n-embd", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n_embd, args.tokens, args.repeats)))
        return
    if args.tokens < 2 or args.rounds < 1 or args.repeats < 1:
        parser.error("--tokens must be at least 2, --rounds and --repeats at least 1")
    if importlib.util.find_spec("torch") is None:
        parser.error("torch is not installed: it is the test extra's (pip install -e \".[test]\")")
    load_before = os.getloadavg()[0]
    results = {size: {engine: [] for engine in ENGINES} for size in args.sizes}
    for round_ in range(args.rounds):
        turn = round_ % len(ENGINES)
        order = list(ENGINES)[turn:] + list(ENGINES)[:turn]
        for size in args.sizes:
            for engine in order:
                print(f"  round {round_ + 1}/{args.rounds}: {size} {engine} ...", file=sys.stderr, flush=True)
                results[size][engine].append(run_worker(engine, SIZES[size], args))
    print(f"\n`{' '.join(['python', 'bench/bench_products.py'] + sys.argv[1:])}` ({os.cpu_count()} cores, "
          f"{THREADS} threads per engine; a {args.tokens}-position prompt's products, float32, with the bias; GFLOPS, "
          f"median of {args.rounds} rounds, each the median of {args.repeats}; 1-min load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after)\n")
    head = ["size", "product", "shape"] + [f"{label} GFLOPS" for label in ENGINES.values()]
    head += ["NumPy in bands / torch"]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for size in args.sizes:
        products = shapes(SIZES[size], args.tokens)
        rows = [(name, f"[{n}, {n_in}] @ [{n_in}, {n_out}]", 2 * n * n_in * n_out)
                for name, (n, n_in, n_out) in products.items()]
        rows.append(("a block's four", "", sum(flops for _, _, flops in rows)))
        for name, shape, flops in rows:
            names = list(products) if name == "a block's four" else [name]
            rate = {engine: statistics.median(flops / 1e9 / sum(r[p] for p in names) for r in results[size][engine])
                    for engine in ENGINES}
            print(f"| {size} | {name} | {shape} | " + " | ".join(f"{rate[e]:.0f}" for e in ENGINES)
                  + f" | {rate['bands'] / rate['torch']:.2f}x |")


if __name__ == "__main__":
    main()
