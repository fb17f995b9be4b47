"""Benchmark: GPT-2 decoding at every size (124M-1558M) against the machine's read bandwidth and the peers.

    python bench/bench_generate.py                          # every size, 3 rounds (about half an hour)
    python bench/bench_generate.py --sizes 124M,355M --rounds 2 --tokens 32   # a quick look
    LLAMA_BENCH=/path/to/llama-bench python bench/bench_generate.py         # with ggml's f32 and f16 columns

Decoding one token reads every weight once (and the keys and values cached so far, much less), so its speed is
bounded by how fast the machine reads memory. Per size (random weights in Hugging Face's layout, written on the
fly into --models-dir, one tensor at a time), greedy, float32, one stream, 2 threads everywhere, it measures:

- ms/token of gpt2_numpy (kvcache.py's decoder, with the compiled matrix-vector kernel when numba is installed)
  and of the same decoder on NumPy's products alone (GPT2_COMPILED_MATVEC=0: the plain path, the before);
- the weights' bytes streamed per token / ms per token, in GB/s, and its share of the ceiling: the machine's
  read bandwidth with both cores, the best of a streaming read (np.add.reduce on 2 threads over 2 GB) and of a
  matrix-vector product over the largest size's weights (OpenBLAS, and the kernel on the [n_out, n_in] copies
  it decodes with), several runs each; and, since the memory's speed drifts from one minute to the next, the
  share of the same moment's ceiling: every STEPS_PER_PAIR decoding steps of a timed run are followed by the
  kernel's products alone over the same matrices, one pass in each of its two reading orders (which goes first
  alternates), and the faster order's passes, weighed by the steps they follow, are set against those steps'
  time: each pass paired with the steps of the same fraction of a second. Beside each pass, the same bytes read
  in one sweep (the layers' rows, which lie one after another in the file beside the checkpoint, seen as one
  matrix, then the head): the ceiling's kind of read, at the same moment, so that "% of the same moment's
  sweep" is the share of the ceiling without the drift; what a step loses to it is its 49-193 products'
  starts and ends, attention, the layer norms and gelu;
- HF transformers (GPT2LMHeadModel, same weights, KV cache, torch on 2 threads) and, with LLAMA_BENCH or
  --llama-bench, ggml (llama.cpp's `llama-bench -p 0 -n N -t 2`: token generation) in f32 and f16;
- the KV cache's size at n_ctx, and the decoder's peak RSS (weights mapped from the files: the checkpoint's and
  the kernel's rows beside it, as the `gpt2` command maps them; + cache + Python).

Engines alternate round by round, in an order that turns by one engine each round, each in its own process
(torch's and OpenBLAS's threads spin-wait; sharing one process slows both). Every process decodes after a
16-token prompt; prefill is excluded.

ggml is not installed with this project. To build its bench (the commands used; nothing of it is kept here):

    pip download --no-deps --no-binary :all: llama-cpp-python     # an sdist with llama.cpp in vendor/llama.cpp
    tar xzf llama_cpp_python-*.tar.gz && cd llama_cpp_python-*/vendor/llama.cpp
    cmake -B build -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release
    cmake --build build --target llama-bench -j2                  # -> build/bin/llama-bench

The bench converts each size's folder to GGUF with that checkout's convert_hf_to_gguf.py (found beside
build/bin/..; it reads vocab.json and merges.txt, which the folders carry) once, into the same cache folder.
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SIZES = {"124M": dict(n_layer=12, n_embd=768, n_head=12), "355M": dict(n_layer=24, n_embd=1024, n_head=16),
         "774M": dict(n_layer=36, n_embd=1280, n_head=20), "1558M": dict(n_layer=48, n_embd=1600, n_head=25)}
N_VOCAB, N_CTX = 50257, 1024
THREADS = 2
STEPS_PER_PAIR = 4  # decoding steps of ours, then one pass of the kernel's products in each reading order


# ---------------------------------------------------------------------------- folders
class RandomTensors:
    """GPT-2's tensors in HF's names, each made when asked for (write_safetensors asks one at a time)."""

    def __init__(self, shapes, seed=0):
        self.shapes, self.seed = shapes, seed

    def __getitem__(self, name):
        rng = np.random.default_rng([self.seed, list(self.shapes).index(name)])
        noise = rng.standard_normal(self.shapes[name], dtype=np.float32)
        is_gain = name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
        return 1 + 0.1 * noise if is_gain else 0.02 * noise  # GPT-2's initialisation scale


def ensure_folder(models_dir, size):
    """The random `size` model as an HF folder (config, safetensors, GPT-2's vocab.json/merges.txt), written once."""
    from gpt2_numpy import hfmodel
    from tokenizer.outputs import replaced_folder_files

    folder = Path(models_dir) / size
    if (folder / hfmodel.SAFETENSORS).is_file():
        return folder
    hparams = dict(n_vocab=N_VOCAB, n_ctx=N_CTX, **SIZES[size])
    shapes = hfmodel.hf_shapes(hparams)
    print(f"writing a random {size} model to {folder} (once) ...", file=sys.stderr, flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = REPO / "tokenizer" / "data"  # OpenAI's encoder.json and vocab.bpe are HF's vocab.json and merges.txt
    with replaced_folder_files(folder) as partial:
        (partial / "config.json").write_text(json.dumps(hfmodel.hf_config(hparams), indent=2) + "\n")
        hfmodel.write_safetensors(partial / hfmodel.SAFETENSORS, RandomTensors(shapes), {"format": "pt"},
                                  shapes=shapes)
        shutil.copyfile(vocab / "encoder.json", partial / "vocab.json")
        shutil.copyfile(vocab / "vocab.bpe", partial / "merges.txt")
    return folder


def ensure_gguf(folder, llama_bench, outtype):
    """`folder` converted to GGUF `outtype` (f32/f16) with the llama.cpp checkout that built `llama_bench`."""
    out = folder / f"ggml-{outtype}.gguf"
    if not out.is_file():
        converter = Path(llama_bench).resolve().parents[2] / "convert_hf_to_gguf.py"
        print(f"converting {folder.name} to {out.name} ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, str(converter), str(folder), "--outtype", outtype, "--outfile", str(out)],
                       check=True, capture_output=True)
    return out


def prompt_ids(n_tokens):
    return [(i * 104729) % 50000 for i in range(n_tokens)]


def weight_bytes_per_token(hparams):
    """Float32 bytes every decoding step reads: each block's weights, ln_f, the output head (all of wte)."""
    d, n_layer = hparams["n_embd"], hparams["n_layer"]
    per_block = 4 * (d * 3 * d + 3 * d + d * d + d + d * 4 * d + 4 * d + 4 * d * d + d + 4 * d)
    return 4 * (N_VOCAB * d + 2 * d) + n_layer * per_block


# ---------------------------------------------------------------------------- workers
def worker_ours(args):
    from gpt2_numpy import blas_threads, compiled_matvec, hfmodel, kvcache

    compiled_matvec.wait_until_loaded()  # (None when GPT2_COMPILED_MATVEC=0 or without numba)
    hparams, params = hfmodel.load_hf_folder(args.folder)
    # as the gpt2 command decodes: given the checkpoint's folder, the kernel's rows mapped from beside it (made by
    # the first run); the NumPy path (GPT2_COMPILED_MATVEC=0), the before, reads the checkpoint as loaded
    plain = os.environ.get("GPT2_COMPILED_MATVEC") == "0"
    weights = kvcache.DecodingWeights(params, folder=None if plain else Path(args.folder))
    # a long generation's weights (the copies, made once, kept): the kernel's if it was measured faster here
    blocks, head = weights.for_run(1, kvcache.RELAYOUT_MIN_STEPS)
    uses_kernel = isinstance(head, kvcache.KernelMatrix)
    prompt = prompt_ids(args.prompt_tokens)
    steps, shares, sweep_shares = [], [], []
    matrices = kernel_matrices(blocks, head) if uses_kernel else []
    sweep = in_one_sweep(matrices)
    for _ in range(args.repeats + 1):  # the first: warm-up (pages the weights in)
        decoder = kvcache.KVDecoder([prompt], weights, hparams["n_head"], args.tokens + 1)
        logits = decoder.prefill()
        step_seconds, pass_seconds, sweep_seconds = 0.0, {False: 0.0, True: 0.0}, {False: 0.0, True: 0.0}
        for first in range(0, args.tokens, STEPS_PER_PAIR):
            n_steps = min(STEPS_PER_PAIR, args.tokens - first)
            start = time.perf_counter()
            for _ in range(n_steps):
                logits = decoder.decode([int(np.argmax(logits[0]))])
            step_seconds += time.perf_counter() - start
            # the same moment's ceiling, right after: the memory's speed drifts from one second to the next
            orders = (False, True) if first // STEPS_PER_PAIR % 2 == 0 else (True, False)
            for in_order in orders if uses_kernel else ():
                pass_seconds[in_order] += n_steps * kernel_pass_seconds(matrices, in_order)
                sweep_seconds[in_order] += n_steps * kernel_pass_seconds(sweep, in_order)
        steps.append(step_seconds / args.tokens)
        if uses_kernel:
            shares.append(min(pass_seconds.values()) / step_seconds)
            sweep_shares.append(min(sweep_seconds.values()) / step_seconds)
            # (numba's threads spin after the passes: a prompt at once would stall the next run's first step)
            blas_threads.let_compiled_threads_sleep()
    ids = kvcache.generate(prompt, weights, hparams["n_head"], 8)
    return {"ms": 1e3 * statistics.median(steps[1:]), "ids": ids, "kernel": uses_kernel,
            "share_of_pass": statistics.median(shares[1:]) if shares else None,
            "share_of_sweep": statistics.median(sweep_shares[1:]) if sweep_shares else None,
            "rss_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "kv_cache_n_ctx": kvcache.kv_cache_bytes(hparams["n_layer"], hparams["n_embd"], hparams["n_ctx"])}


def kernel_matrices(blocks, head):
    """Every matrix a decoding step reads, as the kernel reads it ([n_out, n_in]): each block's four, the head."""
    matrices = [layer["w"].rows for block in blocks for part in ("attn", "mlp") for layer in block[part].values()]
    return matrices + [head.rows]


SWEEP_WIDTH = 1024  # numbers a row of the sweep's matrices: 4 kB (a row's width reads alike from 768 to 4,096)


def in_one_sweep(matrices):
    """The bytes of float32 `matrices`, each run of them that lie one after another in memory seen as one matrix
    [n, SWEEP_WIDTH] (and a last row for the run's rest): the layers' rows, mapped from the file beside the
    checkpoint, become one matrix, read in one sweep as the ceiling's are. Matrices apart (copies made in memory,
    or the head) stay as they are."""
    runs = []  # [start address, end address, first matrix]; matrices not float32 rows in one piece stand alone
    for m in matrices:
        if not (m.flags.c_contiguous and m.dtype == np.float32):
            runs.append([None, None, m])
            continue
        address = m.__array_interface__["data"][0]
        if runs and runs[-1][1] == address:
            runs[-1][1] += m.nbytes
        else:
            runs.append([address, address + m.nbytes, m])
    swept = []
    for start, end, first in runs:
        if start is None or (end - start) // 4 == first.size:
            swept.append(first)
            continue
        n = (end - start) // 4  # float32 numbers in the run
        whole = np.lib.stride_tricks.as_strided(first, shape=(n // SWEEP_WIDTH, SWEEP_WIDTH),
                                                strides=(4 * SWEEP_WIDTH, 4), writeable=False)
        swept.append(whole)
        if n % SWEEP_WIDTH:
            rest = np.lib.stride_tricks.as_strided(first, shape=(1, n), strides=(4 * n, 4), writeable=False)
            swept.append(rest[:, n - n % SWEEP_WIDTH:])
    return swept


def kernel_pass_seconds(matrices, in_order):
    """The time of one pass of the kernel's products alone over `matrices`, one row each, in one reading order."""
    from gpt2_numpy import matvec_kernel

    x = {n: np.ones((1, n), np.float32) for n in {m.shape[1] for m in matrices}}
    start = time.perf_counter()
    for m in matrices:
        matvec_kernel.times_transposed(x[m.shape[1]], m, in_order=in_order)
    return time.perf_counter() - start


def worker_hf(args):
    import torch
    from transformers import GPT2LMHeadModel

    torch.set_num_threads(THREADS)
    model = GPT2LMHeadModel.from_pretrained(args.folder, torch_dtype=torch.float32).eval()
    inputs = torch.tensor([prompt_ids(args.prompt_tokens)])
    steps, ids = [], []
    with torch.inference_mode():
        for _ in range(args.repeats + 1):
            out = model(inputs, use_cache=True)
            start = time.perf_counter()
            ids = []
            for _ in range(args.tokens):
                token = out.logits[:, -1].argmax(-1, keepdim=True)
                ids.append(int(token))
                out = model(token, past_key_values=out.past_key_values, use_cache=True)
            steps.append((time.perf_counter() - start) / args.tokens)
    return {"ms": 1e3 * statistics.median(steps[1:]), "ids": ids[:8]}


def worker_ggml(args):
    runs = {}
    for outtype in ("f32", "f16"):
        gguf = ensure_gguf(Path(args.folder), args.llama_bench, outtype)
        out = subprocess.run([args.llama_bench, "-m", str(gguf), "-p", "0", "-n", str(args.tokens), "-t",
                              str(THREADS), "-r", str(args.repeats), "-o", "json"], check=True,
                             capture_output=True, text=True).stdout
        result = json.loads(out)[0]
        runs[outtype] = 1e3 / result["avg_ts"]  # tokens/s -> ms/token
    return runs


def worker_ceiling(args):
    """The machine's read bandwidth with both cores: best of a streaming read and of matrix-vector products."""
    from gpt2_numpy import compiled_matvec, hfmodel

    best = {"stream": streaming_read_bandwidth(args.repeats + 2)}
    _, params = hfmodel.load_hf_folder(args.folder)  # the largest size's weights, mapped from the file
    matrices = [layer["w"] for block in params["blocks"] for part in ("attn", "mlp")
                for layer in block[part].values()]
    nbytes = sum(w.nbytes for w in matrices)
    x = {n: np.ones((1, n), np.float32) for n in {w.shape[0] for w in matrices}}
    kernel = compiled_matvec.wait_until_loaded()
    if kernel is not None:  # on the copies the decoder gives it: each matrix stored [n_out, n_in]
        # timed before OpenBLAS's products: after them, OpenBLAS's idle threads spin on the cores for a while
        stored = [np.ascontiguousarray(w.T) for w in matrices]
        for name, in_order in (("gemv_kernel", False), ("gemv_kernel_in_order", True)):  # both reading orders
            best[name] = nbytes / best_seconds(
                lambda: [kernel.times_transposed(x[wt.shape[1]], wt, in_order=in_order) for wt in stored],
                args.repeats + 2)
        del stored
    best["gemv_openblas"] = nbytes / best_seconds(lambda: [x[w.shape[0]] @ w for w in matrices], args.repeats + 2)
    return {name: value / 1e9 for name, value in best.items()}


def streaming_read_bandwidth(runs):
    """Bytes a second of np.add.reduce on THREADS threads, each over its part of 2 GiB (far past the caches)."""
    src = np.ones(2**29, dtype=np.float32)

    def read(lo, hi):
        np.add.reduce(src[lo:hi])

    def two_threads():
        cuts = np.linspace(0, src.size, THREADS + 1).astype(int)
        threads = [threading.Thread(target=read, args=(lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    return src.nbytes / best_seconds(two_threads, runs)


def best_seconds(work, runs):
    work()  # warm-up: page in, start threads
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


# ------------------------------------------------------------------------------- main
def run_worker(args, name, folder, env=None):
    command = [sys.executable, __file__, "--worker", name, "--folder", str(folder), "--tokens", str(args.tokens),
               "--prompt-tokens", str(args.prompt_tokens), "--repeats", str(args.repeats)]
    if args.llama_bench:
        command += ["--llama-bench", args.llama_bench]
    print(f"  {name} {folder.name} ...", file=sys.stderr, flush=True)
    threads = {"OPENBLAS_NUM_THREADS": str(THREADS), "NUMBA_NUM_THREADS": str(THREADS), "OMP_NUM_THREADS": str(THREADS)}
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **threads, **(env or {})}).stdout
    return json.loads(out.strip().splitlines()[-1])


def spread(values, fmt="{:.1f}"):
    """The median, and the range when there are several rounds."""
    median = fmt.format(statistics.median(values))
    return median if len(values) == 1 else f"{median} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per timed decode run")
    parser.add_argument("--prompt-tokens", type=int, default=16, help="prompt length")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per engine per round (median)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; engines alternate within each")
    parser.add_argument("--models-dir", type=Path, default=Path.home() / ".cache" / "gpt2-bench" / "hf")
    parser.add_argument("--llama-bench", default=os.environ.get("LLAMA_BENCH"),
                        help="llama.cpp's llama-bench binary, for ggml's columns (default: $LLAMA_BENCH)")
    parser.add_argument("--no-hf", action="store_true", help="leave HF transformers out")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work = {"ours": worker_ours, "hf": worker_hf, "ggml": worker_ggml, "ceiling": worker_ceiling}[args.worker]
        print(json.dumps(work(args)))
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        parser.error(f"--sizes: {', '.join(unknown) or 'none given'}; choose among {', '.join(SIZES)}")
    if args.llama_bench and not Path(args.llama_bench).is_file():
        parser.error(f"--llama-bench / LLAMA_BENCH: no file {args.llama_bench}; build llama-bench (see --help)")
    if args.tokens < 2:
        parser.error("--tokens must be at least 2")
    folders = {size: ensure_folder(args.models_dir, size) for size in sizes}
    engines = {"ours": {}, "kernel": {"GPT2_COMPILED_MATVEC": "1"}, "numpy": {"GPT2_COMPILED_MATVEC": "0"}}
    if not args.no_hf:
        engines["hf"] = None
    if args.llama_bench:
        engines["ggml"] = None
    load_before = os.getloadavg()[0]
    results = {size: {name: [] for name in engines} for size in sizes}
    ceilings = []
    for round_ in range(args.rounds):
        print(f"round {round_ + 1} of {args.rounds}:", file=sys.stderr, flush=True)
        ceilings.append(run_worker(args, "ceiling", folders[sizes[-1]]))
        # the order turns by one engine each round, so that no engine always runs right after the same neighbour
        # (the ceiling's or another engine's large reads and frees): in a fixed order "ours", always first, read
        # 0.78-0.94x the NumPy path, always third, though both decoded on NumPy's products (docs/performance.md)
        turn = round_ % len(engines)
        order = list(engines.items())[turn:] + list(engines.items())[:turn]
        for size in sizes:
            for name, env in order:
                worker = name if name in ("hf", "ggml") else "ours"
                results[size][name].append(run_worker(args, worker, folders[size], env))
    ceiling_by_kind = {kind: max(c[kind] for c in ceilings) for kind in ceilings[0]}
    ceiling = max(ceiling_by_kind.values())
    print(f"\n`{' '.join(['python', 'bench/bench_generate.py'] + sys.argv[1:])}` ({os.cpu_count()} cores, "
          f"{THREADS} threads per engine; greedy, {args.tokens} new tokens after a {args.prompt_tokens}-token prompt; "
          f"median (range) of {args.rounds} alternating rounds, each the median of {args.repeats}; 1-min load "
          f"average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)\n")
    print("ceiling, read bandwidth with both cores (best of the rounds): " + ", ".join(
        f"{kind} {value:.1f} GB/s" for kind, value in ceiling_by_kind.items()) + f" -> {ceiling:.1f} GB/s\n")
    head = ["size", "weights MB/token", "ours ms/token", "ours took", "ours GB/s (% of ceiling)",
            "% of the same moment's kernel pass", "% of the same moment's sweep",
            "kernel (forced) ms/token", "NumPy path ms/token", "ours vs NumPy path"]
    if "hf" in engines:
        head += ["HF ms/token", "ours vs HF"]
    if "ggml" in engines:
        head += ["ggml f32 ms/token", "ggml f16 ms/token", "ours vs ggml f32"]
    head += ["KV cache at n_ctx", "peak RSS (ours)"]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    same_ids = []
    for size in sizes:
        r = results[size]
        hparams = dict(n_vocab=N_VOCAB, n_ctx=N_CTX, **SIZES[size])
        per_token = weight_bytes_per_token(hparams)
        ours = [x["ms"] for x in r["ours"]]
        rates = [per_token / ms / 1e6 for ms in ours]
        took = {"kernel" if x["kernel"] else "NumPy" for x in r["ours"]}
        shares = [100 * x["share_of_pass"] for x in r["ours"] if x["share_of_pass"]]  # the kernel's runs only
        sweep_shares = [100 * x["share_of_sweep"] for x in r["ours"] if x["share_of_sweep"]]
        row = [size, f"{per_token / 1e6:.0f}", spread(ours), "/".join(sorted(took)),
               f"{spread(rates)} ({100 * statistics.median(rates) / ceiling:.0f}%)",
               spread(shares, "{:.0f}%") if shares else "n/a",
               spread(sweep_shares, "{:.0f}%") if sweep_shares else "n/a",
               spread([x["ms"] for x in r["kernel"]]),
               spread([x["ms"] for x in r["numpy"]]),
               spread([b["ms"] / a["ms"] for a, b in zip(r["ours"], r["numpy"])], "{:.2f}x")]
        if "hf" in engines:
            row += [spread([x["ms"] for x in r["hf"]]),
                    spread([b["ms"] / a["ms"] for a, b in zip(r["ours"], r["hf"])], "{:.2f}x")]
        if "ggml" in engines:
            row += [spread([x["f32"] for x in r["ggml"]]), spread([x["f16"] for x in r["ggml"]]),
                    spread([b["f32"] / a["ms"] for a, b in zip(r["ours"], r["ggml"])], "{:.2f}x")]
        same_ids.append(r["ours"][0]["ids"] == r["numpy"][0]["ids"] == r.get("hf", r["numpy"])[0]["ids"][:8])
        row += [f"{r['ours'][0]['kv_cache_n_ctx'] / 2**20:.0f} MiB",
                f"{max(x['rss_peak'] for x in r['ours']) / 2**30:.2f} GiB"]
        print("| " + " | ".join(row) + " |")
    forced = all(x["kernel"] for r in results.values() for x in r["kernel"])
    print(f"\nours: the compiled kernel where it measured faster than NumPy's products on the weights (\"ours "
          f"took\"); kernel (forced): GPT2_COMPILED_MATVEC=1{'' if forced else ' (NOT LOADED: numba missing?)'}; "
          f"greedy ids, first 8, ours == NumPy path{' == HF' if 'hf' in engines else ''} at every size: "
          f"{all(same_ids)}")


if __name__ == "__main__":
    main()
