"""Benchmark: decoding with bf16 weights (gpt2_numpy/half.py) against float32, same process, rounds alternated.

    python bench/bench_half.py                           # 124M and 355M (about 2 minutes on 2 quiet cores)
    python bench/bench_half.py --sizes 774M 1558M        # the big sizes: 1558M holds 6.2 GB f32 + 3.1 GB bf16
    python bench/bench_half.py --sizes 124M --tokens 16  # quick check

Each size is a GPT-2-shaped model with random weights made in memory (speed does not depend on the values).
Per size it prints:

- ms/token of greedy decoding (after the prompt's prefill) with kvcache.DecodingWeights in f32 (the plain NumPy
  path), in bf16, and in f32 through the same compiled kernel (float32 weights stored as the kernel reads them),
  rounds alternated, and the ratios f32 / bf16 (the target: >= 1.7) and f32 / f32-kernel, with their spread;
  the two kernel engines read their matrices in the order a long run picks (8 streams or address order, timed);
  and f32 kernel / bf16, float32 as a long run decodes it when the kernel is there;
- a prompt's first pass (its prefill, to the first token's logits), ms, for prompts of --prompt-lengths tokens, f32
  against bf16, rounds alternated: many rows at once, where bf16 widens its weights for NumPy's float32 product;
- the weights' read rate of the products alone (every matrix of the model once, one activation row: what a
  decoding step reads), GB/s, for NumPy's float32 product, and the kernel on float32 and on bf16 in each of its
  two reading orders;
- accuracy (unless --no-accuracy): the largest logit difference between bf16 and f32 on a prompt, and the
  perplexity of a text (the shared corpus's English sample) with each. Random weights: real GPT-2 weights
  give other differences (run `gpt2 --score FILE --dtype bf16` on a real checkpoint for those).
"""
import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpt2_numpy import blas_threads, half, kvcache  # noqa: E402
from gpt2_numpy.scoring import score  # noqa: E402

SHAPES = {"124M": (768, 12), "355M": (1024, 24), "774M": (1280, 36), "1558M": (1600, 48)}  # n_embd, n_layer
N_VOCAB, N_CTX, HEAD_SIZE = 50257, 1024, 64


def random_params(size, seed=0):
    """A GPT-2 of `size`'s shape with random float32 weights (std 0.02, layer-norm gains 1, as at init)."""
    n_embd, n_layer = SHAPES[size]
    rng = np.random.default_rng(seed)

    def normal(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    def norm():
        return {"g": np.ones(n_embd, np.float32), "b": np.zeros(n_embd, np.float32)}

    def dense(nx, nf):
        return {"w": normal(nx, nf), "b": np.zeros(nf, np.float32)}

    blocks = [{"ln_1": norm(), "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
               "ln_2": norm(), "mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)}}
              for _ in range(n_layer)]
    return {"wte": normal(N_VOCAB, n_embd), "wpe": normal(N_CTX, n_embd), "blocks": blocks, "ln_f": norm()}


class F32KernelMatrix:
    """A float32 matrix stored [n_out, n_in] whose `x @ m` runs the bf16 kernel's loop on float32 weights."""

    __array_ufunc__ = None

    def __init__(self, rows):
        self.rows, self.shape, self.kernel = rows, (rows.shape[1], rows.shape[0]), half.load_kernel()

    def __rmatmul__(self, x):
        flat = np.ascontiguousarray(x.reshape(-1, x.shape[-1]), dtype=np.float32)
        if flat.shape[0] > half.KERNEL_MAX_ROWS:  # prefill: NumPy's product, as the bf16 path does
            out = flat @ self.rows.T
        else:
            out = np.empty((flat.shape[0], self.shape[1]), np.float32)
            self.kernel.matmul_f32(flat, self.rows, out)
        return out.reshape(*x.shape[:-1], self.shape[1])


def f32_kernel_weights(params):
    """DecodingWeights whose matrices go through the kernel in float32 (the bf16 path's wrapping, f32 rows)."""
    weights = kvcache.DecodingWeights(params)
    as_rows = {"wte": params["wte"]}
    blocks = half.tree_with_matrices(params, lambda name, w: w if name == "wte" else
                                     F32KernelMatrix(np.ascontiguousarray(w.T)))["blocks"]
    weights.head = F32KernelMatrix(as_rows["wte"])
    weights.blocks_in_order = {"C": blocks, "F": blocks}
    weights.dtype = "f32-kernel"  # (no float32 relayout copies: the rows are stored as the kernel reads them)
    return weights


def ms_per_token(weights, n_head, prompt, n_tokens):
    times = [time.perf_counter() for _ in kvcache.iter_generate_batch([prompt], weights, n_head, n_tokens)]
    return (times[-1] - times[0]) / (len(times) - 1) * 1e3


def prefill_ms(weights, n_head, prompt):
    start = time.perf_counter()
    kvcache.KVDecoder([prompt], weights, n_head, 1).prefill()
    return (time.perf_counter() - start) * 1e3


def products_read_rate(params, rounds):
    """GB/s of weights read by one activation row times every matrix: NumPy f32, and the kernel on f32 and on
    bf16, in 8 streams and in address order."""
    kernel = half.load_kernel()
    f32 = [params["wte"].T] + [block[part][layer]["w"] for block in params["blocks"]
                               for part, layers in (("attn", ("c_attn", "c_proj")), ("mlp", ("c_fc", "c_proj")))
                               for layer in layers]
    f32_rows = [np.ascontiguousarray(w.T) for w in f32]
    bf16_rows = [half.to_bf16(w) for w in f32_rows]
    outs = [np.empty((1, w.shape[0]), np.float32) for w in f32_rows]
    xs = [np.ones((1, w.shape[1]), np.float32) for w in f32_rows]
    runs = {"numpy f32": (lambda: [x @ w for x, w in zip(xs, f32)], sum(w.nbytes for w in f32)),
            "kernel f32": (lambda: [kernel.matmul_f32(x, w, o) for x, w, o in zip(xs, f32_rows, outs)],
                           sum(w.nbytes for w in f32_rows)),
            "kernel bf16": (lambda: [kernel.matmul_bf16(x, w, o) for x, w, o in zip(xs, bf16_rows, outs)],
                            sum(w.nbytes for w in bf16_rows)),
            "in order f32": (lambda: [kernel.matmul_f32(x, w, o, True) for x, w, o in zip(xs, f32_rows, outs)],
                             sum(w.nbytes for w in f32_rows)),
            "in order bf16": (lambda: [kernel.matmul_bf16(x, w, o, True) for x, w, o in zip(xs, bf16_rows, outs)],
                              sum(w.nbytes for w in bf16_rows))}
    rates = {name: [] for name in runs}
    # each kind's rounds back to back, the kernel's first: after NumPy's products OpenBLAS's idle threads spin for
    # a while on the cores, and a kernel pass timed then would time them (as would one after the decoding rounds
    # before, on NumPy's products: their threads are ended first)
    blas_threads.stop_idle_threads()
    for name in ("kernel bf16", "in order bf16", "kernel f32", "in order f32", "numpy f32"):
        run, n_bytes = runs[name]
        for _ in range(rounds + 1):
            start = time.perf_counter()
            run()
            rates[name].append(n_bytes / (time.perf_counter() - start) / 1e9)
    return {name: values[1:] for name, values in rates.items()}  # the first round pages things in


def accuracy(params, bf16_weights, n_head, text_ids):
    prompt = text_ids[:64]
    exact = kvcache.KVDecoder([prompt], params, n_head, 1).prefill()
    rounded = kvcache.KVDecoder([prompt], bf16_weights, n_head, 1).prefill()
    ppl = {"f32": math.exp(score(text_ids, params, n_head)),
           "bf16": math.exp(score(text_ids, half.rounded_params(params), n_head))}
    return float(np.abs(exact - rounded).max()), float(np.abs(exact).max()), ppl


def spread(values, digits=2):
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["124M", "355M"], choices=list(SHAPES))
    parser.add_argument("--tokens", type=int, default=64, help="tokens per decoding run")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds per size")
    parser.add_argument("--prompt-lengths", nargs="*", type=int, default=[8, 32, 100, 400],
                        help="prompts whose first pass is timed (none: skip)")
    parser.add_argument("--no-accuracy", action="store_true", help="speed only")
    args = parser.parse_args()
    import numba

    print(f"numba {numba.__version__}, {numba.get_num_threads()} threads; threading layer set on first use")
    from tokenizer import get_encoding

    corpus = REPO.parent / "shared" / "corpus" / "en_docs.txt"
    text_ids = get_encoding("gpt2").encode_ordinary(corpus.read_text(encoding="utf-8"))[:1024]
    for size in args.sizes:
        params = random_params(size)
        n_head = SHAPES[size][0] // HEAD_SIZE
        start = time.perf_counter()
        engines = {"f32": kvcache.DecodingWeights(params), "bf16": kvcache.DecodingWeights(params, dtype="bf16"),
                   "f32 kernel": f32_kernel_weights(params)}
        print(f"\n{size}: weights prepared in {time.perf_counter() - start:.1f} s (bf16 converted in memory)")
        for name in ("bf16", "f32 kernel"):  # as a long run does first: time both reading orders, keep the faster
            engines[name].for_run(1, kvcache.RELAYOUT_MIN_STEPS)
        orders = {name: "address order" if engines[name].reads_in_order else "8 streams"
                  for name in ("bf16", "f32 kernel")}
        print("  reading order (a long run's choice): " + ", ".join(f"{n} {order}" for n, order in orders.items()))
        prompt = text_ids[:32]
        for weights in engines.values():  # warm-up: page in, compile, make the f32 relayout copies
            ms_per_token(weights, n_head, prompt, args.tokens)
        times = {name: [] for name in engines}
        for _ in range(args.rounds):
            for name, weights in engines.items():
                times[name].append(ms_per_token(weights, n_head, prompt, args.tokens))
        for name, values in times.items():
            print(f"  {name:>10}: {spread(values, 1)} ms/token")
        print(f"  f32 / bf16:       {spread([a / b for a, b in zip(times['f32'], times['bf16'])])}x  (target >= 1.7)")
        print(f"  f32 / f32 kernel: {spread([a / b for a, b in zip(times['f32'], times['f32 kernel'])])}x")
        print(f"  f32 kernel / bf16: {spread([a / b for a, b in zip(times['f32 kernel'], times['bf16'])])}x")
        for length in args.prompt_lengths:
            long_prompt = (text_ids * (length // len(text_ids) + 1))[:length]
            first = {name: [] for name in ("f32", "bf16")}
            for _ in range(args.rounds + 1):  # the first round warms up
                for name in first:
                    first[name].append(prefill_ms(engines[name], n_head, long_prompt))
            print(f"  first pass of a {length}-token prompt: f32 {spread(first['f32'][1:], 0)} ms, bf16 "
                  f"{spread(first['bf16'][1:], 0)} ms, f32 / bf16 "
                  f"{spread([a / b for a, b in zip(first['f32'][1:], first['bf16'][1:])])}x")
        for name, rates in products_read_rate(params, args.rounds).items():
            print(f"  products alone, {name:>13}: {spread(rates, 1)} GB/s")
        if not args.no_accuracy:
            diff, largest, ppl = accuracy(params, engines["bf16"], n_head, text_ids)
            print(f"  largest logit difference bf16 vs f32: {diff:.4f} (largest |logit| {largest:.2f}); perplexity "
                  f"of {len(text_ids)} tokens: f32 {ppl['f32']:.4f}, bf16 {ppl['bf16']:.4f} "
                  f"({ppl['bf16'] / ppl['f32'] - 1:+.4%}); random weights")
        del engines, params


if __name__ == "__main__":
    main()
