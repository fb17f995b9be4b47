"""Benchmark: OpenAI's encoder.py algorithm (``Encoder.encode``: pattern, byte map, ``bpe()`` and its cache) against
the same vocabulary through the fast core (``Encoder.encoding.encode_ordinary``), on the shared corpora.

    python bench/bench_encoder_py.py              # 300 kB of each of three corpora, 5 interleaved rounds
    python bench/bench_encoder_py.py --kb 100     # quicker

Each round takes a new slice of the corpus, and the two run in alternating order, so machine load hits both
alike. ``bpe()`` starts each round with an empty cache, as a new ``Encoder`` does; "warm" repeats its slice with
the cache filled. The fast core is GPT-2's shared ``Encoding``, whose piece cache carries over from round to round
(as it does in a process): its column is a warm figure, so the "fresh" ratio favours it. The ids are
checked equal to tiktoken's GPT-2 on every slice. Needs ../shared (the corpora) and tiktoken's offline cache:
TIKTOKEN_CACHE_DIR (see ../shared/encodings/seed_tiktoken_cache.py).
"""
import argparse
import copy
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("TOKENIZER_SHARED_DIR") or REPO.parent / "shared")  # as tests/conftest.py
os.environ.setdefault("TOKENIZER_DATA_DIR", str(SHARED / "encodings"))
CORPORA = ["en_docs.txt", "ru_manpages.txt", "zh_manpages.txt"]


def seconds(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", type=int, default=300, help="size of each slice in kB (default 300)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per corpus (default 5)")
    args = parser.parse_args()
    import tiktoken

    from gpt2_numpy.encoder import get_encoder

    oracle = tiktoken.get_encoding("gpt2")
    enc = get_encoder("124M", "models")
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; best of {args.rounds} rounds, MB/s")
    print(f"{'corpus':<16} {'Encoder.encode':>15} {'warm cache':>11} {'.encoding':>10} {'slower':>7}")
    for name in CORPORA:
        data = (SHARED / "corpus" / name).read_bytes()
        size = args.kb * 1000
        best = {"bpe": [], "warm": [], "core": []}
        for r in range(args.rounds):
            text = data[r * size : (r + 1) * size].decode("utf-8", errors="ignore")
            mb = len(text.encode("utf-8")) / 1e6
            fresh = copy.copy(enc)  # the same tables ...
            fresh.cache = {}  # ... and an empty cache, as a new Encoder has
            for side in (("bpe", "core") if r % 2 == 0 else ("core", "bpe")):
                if side == "bpe":
                    best["bpe"].append(mb / seconds(lambda: fresh.encode(text)))
                    best["warm"].append(mb / seconds(lambda: fresh.encode(text)))
                else:
                    best["core"].append(mb / seconds(lambda: fresh.encoding.encode_ordinary(text)))
            assert fresh.encode(text) == fresh.encoding.encode_ordinary(text) == oracle.encode_ordinary(text)
        bpe, warm, core = (max(best[k]) for k in ("bpe", "warm", "core"))
        print(f"{name:<16} {bpe:>15.2f} {warm:>11.2f} {core:>10.2f} {core / bpe:>6.1f}x")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
