"""Benchmark: what speculative decoding (gpt2_numpy/speculative.py, `gpt2 --draft` / `--lookup`) costs and gives.

    python bench/bench_speculative.py                  # 124M and 355M (about 3 minutes on 2 cores)
    python bench/bench_speculative.py --sizes 124M --rounds 2 --tokens 16    # quick check

Random weights (124M- and 355M-shaped, made in memory), greedy, float32, the same run:

1. The cost of verifying: one pass of the model over k + 1 new positions (KVDecoder.extend, then rollback)
   against one position, k = 1..8, after a 64-token prompt. This is the mechanism's price: a pass that keeps
   all k drafts gives k + 1 tokens for this ratio of one token's time.
2. Whole runs, ms/token against plain decoding (kvcache), alternated round by round:
   - a draft equal to the model: every draft is kept (100% acceptance, the upper bound), but the draft costs
     as much as the model, so this shows the verify side's best case, not a speed-up to expect;
   - 124M drafting for 355M: with random weights the two never agree (acceptance ~0): the pure overhead;
   - prompt lookup on a prompt that repeats itself (code): with random weights the model does not repeat it,
     so acceptance is ~0 here too: the overhead of drafts that fail.
   Random weights make acceptance meaningless: a trained model's is what decides the speed-up.
3. Prompt lookup on the text itself: walking through a code-like text that repeats itself with edits, how
   many drafted tokens match the text's own next tokens (what a model that writes this text would accept),
   tokens per pass, and the ms/token that many passes would take at the measured pass times (an estimate).
"""
import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpt2_numpy import compiled_matvec, kvcache, speculative  # noqa: E402

SHAPES = {"124M": dict(n_embd=768, n_head=12, n_layer=12), "355M": dict(n_embd=1024, n_head=16, n_layer=24)}
N_VOCAB, N_CTX = 50257, 1024
KS = range(1, 9)

# a code-like text that repeats itself with edits: the second function is the first with another name and field
CODE = '''def total_price(items):
    """The sum of the items' prices, with tax."""
    total = 0.0
    for item in items:
        total += item.price * item.quantity
    return round(total * (1 + TAX_RATE), 2)


def total_weight(items):
    """The sum of the items' weights, with packing."""
    total = 0.0
    for item in items:
        total += item.weight * item.quantity
    return round(total * (1 + PACKING_RATE), 2)
'''


def random_weights(shape, seed):
    """A GPT-2 of `shape` with random weights (scaled as GPT-2's initialisation), as kvcache.DecodingWeights."""
    rng = np.random.default_rng(seed)
    d = shape["n_embd"]

    def normal(*dims, scale=0.02):
        out = rng.standard_normal(dims, dtype=np.float32)
        out *= scale
        return out

    def norm():
        return {"g": np.ones(d, np.float32), "b": np.zeros(d, np.float32)}

    def dense(nx, nf):
        return {"w": normal(nx, nf), "b": np.zeros(nf, np.float32)}

    params = {"wte": normal(N_VOCAB, d), "wpe": normal(N_CTX, d, scale=0.01), "ln_f": norm(),
              "blocks": [{"ln_1": norm(), "ln_2": norm(),
                          "attn": {"c_attn": dense(d, 3 * d), "c_proj": dense(d, d)},
                          "mlp": {"c_fc": dense(d, 4 * d), "c_proj": dense(4 * d, d)}}
                         for _ in range(shape["n_layer"])]}
    weights = kvcache.DecodingWeights(params)
    compiled_matvec.wait_until_loaded()  # (None without numba, or with GPT2_COMPILED_MATVEC=0: NumPy's products)
    weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)  # a long run's weights now, so every run below has them
    return weights


# ---------------------------------------------------------------------------- 1. verify cost
def verify_times(weights, n_head, rounds, prompt_len=64):
    """{n_positions: [seconds per pass, one per round]}, n_positions = 1 (plain decoding's pass) and k + 1."""
    decoder = kvcache.KVDecoder([list(range(1, prompt_len + 1))], weights, n_head, max(KS) + 1)
    decoder.prefill()
    times = {n: [] for n in [1, *(k + 1 for k in KS)]}
    for _ in range(rounds):
        order = list(times)
        random.shuffle(order)  # interleaved, in a new order each round
        for n in order:
            best = float("inf")
            for _ in range(3):  # the best of 3: a pass is short, and the machine is shared
                start = time.perf_counter()
                decoder.extend([[7] * n])
                best = min(best, time.perf_counter() - start)
                decoder.rollback(n)
            times[n].append(best)
    return times


# ---------------------------------------------------------------------------- 2. whole runs
def timed_run(weights, n_head, prompt, n_tokens, draft, k):
    counts = speculative.Counts()
    start = time.perf_counter()
    if draft is None:
        kvcache.generate(prompt, weights, n_head, n_tokens)
    else:
        speculative.generate(prompt, weights, n_head, n_tokens, draft, draft_tokens=k, counts=counts)
    return (time.perf_counter() - start) / n_tokens, counts


def runs(models, prompt_ids, code_ids, n_tokens, rounds, k):
    """{row name: ([ms/token per round], Counts summed)}, every row alternated with the others each round."""
    rows = {}
    for size, (weights, n_head) in models.items():
        rows[f"{size} plain"] = (weights, n_head, prompt_ids, None)
        rows[f"{size} --draft itself"] = (weights, n_head, prompt_ids, (weights, n_head))
        rows[f"{size} --lookup 2, code prompt"] = (weights, n_head, code_ids, 2)
    if "124M" in models and "355M" in models:
        rows["355M --draft 124M"] = (*models["355M"], prompt_ids, models["124M"])
    results = {name: ([], speculative.Counts()) for name in rows}
    for _ in range(rounds):
        order = list(rows)
        random.shuffle(order)
        for name in order:
            weights, n_head, prompt, draft_of = rows[name]
            if draft_of is None:
                draft = None
            elif isinstance(draft_of, int):
                draft = speculative.PromptLookup(draft_of)
            else:
                draft = speculative.DraftModel(*draft_of)
            seconds, counts = timed_run(weights, n_head, prompt, n_tokens, draft, k)
            times, total = results[name]
            times.append(seconds * 1e3)
            for field in ("passes", "drafted", "accepted"):
                setattr(total, field, getattr(total, field) + getattr(counts, field))
    return results


# ---------------------------------------------------------------------------- 3. lookup on the text itself
def lookup_on_text(ids, n_prompt, n, k):
    """(drafted, accepted, positions run by each pass, tokens) of prompt lookup over ids[n_prompt:] when the
    model's choice is always the text's next token: the greedy rule of speculative.accepted_greedy, on the text."""
    drafted = accepted = 0
    positions = []
    end = n_prompt
    while end < len(ids):
        draft = speculative.lookup(ids[:end], n, min(k, len(ids) - end - 1))
        kept = 0
        while kept < len(draft) and draft[kept] == ids[end + kept]:
            kept += 1
        drafted, accepted = drafted + len(draft), accepted + kept
        positions.append(len(draft) + 1)
        end += kept + 1
    return drafted, accepted, positions, len(ids) - n_prompt


def spread(values):
    return f"{statistics.median(values):8.2f} ({min(values):.2f}-{max(values):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per run (default 32)")
    parser.add_argument("--k", type=int, default=speculative.DEFAULT_DRAFT_TOKENS, help="draft tokens per pass")
    args = parser.parse_args()
    random.seed(0)
    print(f"load average at start: {os.getloadavg()[0]:.1f} (cores: {os.cpu_count()}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}); random weights, greedy")

    from tokenizer import get_encoding

    encoding = get_encoding("gpt2")
    prompt_ids = encoding.encode("Alan Turing theorized that computers would one day become")
    code_ids = encoding.encode(CODE)
    models = {size: (random_weights(SHAPES[size], seed=i), SHAPES[size]["n_head"]) for i, size in enumerate(args.sizes)}

    print("\n1. one pass over k + 1 positions against one position (ms, median and range over rounds; ratio)")
    pass_ms = {}
    for size, (weights, n_head) in models.items():
        times = verify_times(weights, n_head, args.rounds)
        one = statistics.median(times[1]) * 1e3
        pass_ms[size] = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        print(f"  {size}: 1 position {spread([t * 1e3 for t in times[1]])} ms")
        for k in KS:
            ms = [t * 1e3 for t in times[k + 1]]
            print(f"  {size}: k={k} ({k + 1} positions) {spread(ms)} ms   {statistics.median(ms) / one:5.2f}x one "
                  f"position, {one * (k + 1) / statistics.median(ms):5.2f}x its throughput if all are kept")

    print(f"\n2. whole runs: {args.tokens} tokens, k={args.k}, ms/token (median, range over {args.rounds} rounds)")
    results = runs(models, prompt_ids, code_ids, args.tokens, args.rounds, args.k)
    for name, (ms, counts) in results.items():
        size = name.split()[0]
        plain = statistics.median(results[f"{size} plain"][0])
        rate = f"acceptance {counts.accepted / counts.drafted:6.1%}" if counts.drafted else "acceptance    n/a"
        per_pass = (args.rounds * (args.tokens - 1) / counts.passes) if counts.passes else 1.0
        print(f"  {name:32s} {spread(ms)}  {plain / statistics.median(ms):5.2f}x plain   {rate}   "
              f"{per_pass:4.2f} tokens/pass")

    print("\n3. prompt lookup on the text itself (the code above, prompted with its first function): drafted tokens "
          "that match the text's next ones")
    n_prompt = len(encoding.encode(CODE.split("\n\n\n")[0])) + 3
    for n in (1, 2, 3):
        for k in (2, 4, 8):
            drafted, accepted, positions, tokens = lookup_on_text(code_ids, n_prompt, n, k)
            line = (f"  --lookup {n} --draft_tokens {k}: acceptance {accepted / max(drafted, 1):6.1%}, "
                    f"{tokens / len(positions):4.2f} tokens/pass")
            for size, ms in pass_ms.items():  # each pass priced at the measured time of its number of positions
                spec = sum(ms[n_run] for n_run in positions) / tokens
                line += f"; {size} {spec:6.2f} ms/token vs {ms[1]:6.2f} plain ({ms[1] / spec:4.2f}x)"
            print(line)


if __name__ == "__main__":
    main()
