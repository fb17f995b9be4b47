"""Encoding speed: this project vs tiktoken vs HF tokenizers, single process, same run, as ratios.

    python bench/bench_encode.py [--mb 4] [--repeat 3] [--encodings gpt2,cl100k_base,o200k_base]

Texts: the first N MB of ../shared/corpus/en_docs.txt and zh_manpages.txt. Ours is timed three ways:

- cold:     a fresh Encoding (empty piece cache) encoding the text once — what a one-off call costs;
- long job: a fresh Encoding encoding the whole file in N MB pieces, as a dataset job does (the cache fills
            as it goes); tiktoken does the same file the same way;
- repeat:   encoding the same text a second time (every piece cached) — the upper bound.

tiktoken and HF tokenizers have no such cache; each is timed as the best of --repeat runs. For gpt2 the CS336
face (``tokenizer.Tokenizer.from_files`` on GPT-2's encoder.json + vocab.bpe, <|endoftext|> special) is timed
cold too: it runs on the same Encoding machinery, plus a search for its special tokens.
Needs tiktoken's offline cache: TIKTOKEN_CACHE_DIR (see ../shared/encodings/seed_tiktoken_cache.py) and
TOKENIZER_DATA_DIR=../shared/encodings for the non-GPT-2 encodings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers: one thread, like the others
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZER_DATA_DIR", str(SHARED / "encodings"))

from tokenizer import Encoding, Tokenizer, get_encoding  # noqa: E402


def read_prefix(name: str, start: int, size: int) -> str:
    data = (SHARED / "corpus" / name).read_bytes()[start : start + size]
    return data.decode("utf-8", errors="ignore")


def best_time(fn, text: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(text)
        best = min(best, time.perf_counter() - t0)
    return best


def fresh(name: str) -> Encoding:
    """A new Encoding with an empty piece cache, sharing the loaded vocabulary."""
    enc = get_encoding(name)
    return Encoding(enc.name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)


def hf_gpt2():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from tokenizer.vocab_files import token_to_gpt2_str

    enc = get_encoding("gpt2")
    vocab = {token_to_gpt2_str(t): i for t, i in enc.token_ids.items()}
    merges_path = REPO / "tokenizer" / "data" / "vocab.bpe"
    with tempfile.TemporaryDirectory() as tmp:
        vocab_path = Path(tmp) / "vocab.json"
        vocab_path.write_text(json.dumps(vocab))
        tok = Tokenizer(models.BPE.from_file(str(vocab_path), str(merges_path)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def cs336_gpt2() -> Tokenizer:
    """CS336's Tokenizer on GPT-2's own files (a fresh one: empty piece cache)."""
    data = REPO / "tokenizer" / "data"
    return Tokenizer.from_files(data / "encoder.json", data / "vocab.bpe", special_tokens=["<|endoftext|>"])


def heap_crossover(merge_ranks, lengths=(8, 16, 32, 64, 256, 1024, 4096)) -> list[tuple[int, float, float]]:
    """(piece length, rescan seconds, heap seconds): where bpe.HEAP_THRESHOLD should sit on this machine.

    The pieces are runs of letters taken from en_docs (spaces and punctuation dropped), so that no pre-tokenizer
    would cut them: what a long identifier, base64 blob or run of one character looks like to BPE.
    """
    from tokenizer import bpe

    letters = "".join(ch for ch in read_prefix("en_docs.txt", 0, 200_000) if ch.isascii() and ch.isalpha())
    rows = []
    for n in lengths:
        piece = letters[:n].encode("ascii")
        repeat = max(3, 20_000 // n)
        saved, bpe.HEAP_THRESHOLD = bpe.HEAP_THRESHOLD, len(piece)  # make merge() rescan even this long piece
        try:
            t_rescan = best_time(lambda p: [bpe.merge(p, merge_ranks) for _ in range(repeat)], piece, 3) / repeat
        finally:
            bpe.HEAP_THRESHOLD = saved
        t_heap = best_time(lambda p: [bpe.merge_heap(p, merge_ranks) for _ in range(repeat)], piece, 3) / repeat
        rows.append((n, t_rescan, t_heap))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--encodings", default="gpt2,cl100k_base,o200k_base")
    args = parser.parse_args()
    import tiktoken

    size = int(args.mb * 1_000_000)
    texts = {"en_docs": "en_docs.txt", "zh_manpages": "zh_manpages.txt"}
    rows = []
    for label, filename in texts.items():
        text = read_prefix(filename, 0, size)
        mb = len(text.encode("utf-8")) / 1e6
        whole = (SHARED / "corpus" / filename).read_bytes()
        parts = [whole[i : i + size].decode("utf-8", errors="ignore") for i in range(0, len(whole), size)]
        whole_mb = len(whole) / 1e6
        for name in args.encodings.split(","):
            oracle = tiktoken.get_encoding(name)
            oracle.encode_ordinary("warm up")
            t_tik = best_time(oracle.encode_ordinary, text, args.repeat)

            ours = fresh(name)
            t0 = time.perf_counter()
            ids = ours.encode_ordinary(text)
            t_cold = time.perf_counter() - t0
            assert ids == oracle.encode_ordinary(text), f"ids differ from tiktoken for {name} on {label}"
            t_repeat = best_time(ours.encode_ordinary, text, args.repeat)

            t0 = time.perf_counter()
            for part in parts:
                oracle.encode_ordinary(part)
            t_tik_long = time.perf_counter() - t0
            ours = fresh(name)
            t0 = time.perf_counter()
            for part in parts:
                ours.encode_ordinary(part)
            t_long = time.perf_counter() - t0

            t_hf = t_cs336 = None
            if name == "gpt2":
                hf = hf_gpt2()
                assert hf.encode(text[:100_000]).ids == oracle.encode_ordinary(text[:100_000])
                t_hf = best_time(lambda s: hf.encode(s).ids, text, args.repeat)
                cs336 = cs336_gpt2()
                t0 = time.perf_counter()
                ids = cs336.encode(text)
                t_cs336 = time.perf_counter() - t0
                assert ids == oracle.encode(text, allowed_special="all"), f"CS336 Tokenizer differs on {label}"
            rows.append((label, name, mb, whole_mb, t_tik, t_hf, t_cold, t_cs336, t_tik_long, t_long, t_repeat))
            print(f"done {label} {name}", file=sys.stderr, flush=True)

    def rate(mb, t):
        return f"{mb / t:.1f}" if t else "–"

    def ratio(t_tik, t):
        return f"{t_tik / t:.2f}×" if t else "–"

    print(f"\n`python bench/bench_encode.py --mb {args.mb:g}` (MB/s, one process; ratio = ours / tiktoken)\n")
    print("| text | encoding | tiktoken | HF tokenizers | ours cold | **cold ratio** | CS336 Tokenizer cold | long job: tiktoken | long job: ours | long job ratio | ours repeat | repeat ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, name, mb, whole_mb, t_tik, t_hf, t_cold, t_cs336, t_tik_long, t_long, t_repeat in rows:
        print(
            f"| {label} | {name} | {rate(mb, t_tik)} | {rate(mb, t_hf)} | {rate(mb, t_cold)} | {ratio(t_tik, t_cold)} "
            f"| {rate(mb, t_cs336)} "
            f"| {rate(whole_mb, t_tik_long)} | {rate(whole_mb, t_long)} | {ratio(t_tik_long, t_long)} "
            f"| {rate(mb, t_repeat)} | {ratio(t_tik, t_repeat)} |"
        )

    from tokenizer.bpe import HEAP_THRESHOLD

    print(f"\nBPE of one long piece (gpt2 ranks), µs: rescanning the pair list vs the heap (HEAP_THRESHOLD = {HEAP_THRESHOLD})\n")
    print("| piece bytes | rescan | heap | faster |")
    print("|---|---|---|---|")
    for n, t_rescan, t_heap in heap_crossover(dict(get_encoding("gpt2").merge_ranks)):
        print(f"| {n} | {t_rescan * 1e6:.0f} | {t_heap * 1e6:.0f} | {'heap' if t_heap < t_rescan else 'rescan'} |")


if __name__ == "__main__":
    main()
