"""Encoding speed: this project vs tiktoken vs HF tokenizers, same run, as ratios (ratio = tiktoken's time / ours).

    python bench/bench_encode.py [--mb 4] [--repeat 3] [--encodings gpt2,cl100k_base,o200k_base]
                                 [--texts en_docs,de_manpages,...] [--no-fresh-process] [--no-pathological]
                                 [--no-long] [--no-special] [--no-short] [--no-mid] [--no-decode] [--messages 7587]

Texts: the first N MB of each ../shared/corpus file named. Ours is timed these ways:

- cold:     a fresh Encoding (empty piece cache; the tables of batch BPE and the array path read from the
            disk cache, which counts in the time; found by the vocabulary file's name, as get_encoding's are)
            encoding the text once — what a one-off call costs; the split alone is timed too (the array
            split where the pattern has one, as a long text takes), so "BPE + join" = cold - split;
- fresh process: the same in a new Python process (import, get_encoding, one encode), against tiktoken in
            another new process (best of --repeat processes each). "cold ratio" compares the encode call
            alone; "total ratio" compares import + get_encoding + encode, what a one-off script waits for (work
            moves between the two: tiktoken's get_encoding builds its Rust tables, ours imports NumPy and reads
            its tables at the first long text);
- long job: a fresh Encoding encoding the whole file in N MB pieces, as a dataset job does (the cache fills
            as it goes); tiktoken does the same file the same way;
- repeat:   encoding the same text a second time (every piece cached) — the upper bound.

Special tokens allowed (--no-special to skip): documents joined by ``<|endoftext|>`` (en_docs is that already;
for the other texts, their paragraphs joined so), encoded by a fresh Encoding with ``allowed_special="all"`` and
with ``{"<|endoftext|>"}``, beside ``encode_ordinary`` of the same text, and with ``"all"`` again with compiled
BPE (a fresh Encoding as the others, its kernel taken once its tables load); best of --repeat, alternated with
tiktoken.

Extra peers, where the bench extra installs them: bpe-openai (Rust, tiktoken's API and ids; no gpt2) in the
special-tokens and short-texts tables, and quicktok (C++, minbpe's model format, loaded with each encoding's merges
and pattern) in the short-texts table, with the share of messages where its own regex engine makes other ids.

Short new texts (--no-short to skip): --messages messages of 20 to 2,000 characters (lengths log-uniform) cut from
the six texts, each language timed alone: a fresh Encoding encodes each message in its own call (first pass),
then again (warm), and a fresh one takes them all in one ``encode_batch`` and one ``encode_ordinary_batch``. Then
other new messages, each as a chat template's turn between two ``<|endoftext|>``, with ``allowed_special="all"``.
Every row runs with BPE in Python (``TOKENIZER_COMPILED_BPE=0``); the "compiled BPE" columns (numba installed)
time the same first pass, ``encode_batch`` and ``encode_ordinary_batch`` as a process that has loaded the
compiled kernel (tokenizer/fast/compiled_bpe.py) meets them: a fresh Encoding (piece cache empty) with its
tables loaded.

Mid-size texts (--no-mid to skip): new texts of 16k, 64k and 256k characters, each encoded by an Encoding with
an empty piece cache whose tables are loaded (the array path; again with compiled BPE, which then merges the
array path's segments), and a conversation: 100 short messages, the whole
of it encoded again at each turn by one fresh Encoding (once it passes 8k characters, through the piece cache,
which holds its pieces).

Decoding (--no-decode to skip): ``decode``, ``decode_bytes`` of each text's ids in one call, ``decode`` of each
short message's ids in a call of its own, and ``decode_batch`` of the short messages' ids.

Other families (--no-families to skip): each Hugging Face tokenizer.json in ../shared/encodings/hf (--families),
loaded by ``tokenizer.load``, encoding the first --family-mb MB of each text (``<|endoftext|>`` removed: ordinary
text) against HF tokenizers loaded from the same file (``Tokenizer.encode(text, add_special_tokens=False)``, one text
per call, one thread: RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false), best of --repeat each, alternated, in one
process, a new core each call with its tables loaded (a long text takes no cache: the array path, or the regex
split then array BPE, as the route column says); Llama 3 also against tiktoken built from its ranks and pattern.
The ids are compared: a family whose ids differ from HF's is marked "not yet exact".

Then: the pair table per encoding (pairs, build time, load time from the disk cache), and pathological inputs
(a million spaces, "^" * 1e6, "a" * 1e6, 100k random code points), where tiktoken may fail.

tiktoken and HF tokenizers have no such cache; each is timed as the best of --repeat runs. For gpt2 the CS336
face (``tokenizer.Tokenizer.from_files`` on GPT-2's encoder.json + vocab.bpe, <|endoftext|> special) is timed
cold too: it runs on the same Encoding machinery, plus a search for its special tokens.
Needs tiktoken's offline cache: TIKTOKEN_CACHE_DIR (see ../shared/encodings/seed_tiktoken_cache.py) and
TOKENIZER_DATA_DIR=../shared/encodings for the non-GPT-2 encodings.
"""

from __future__ import annotations

import argparse
from functools import partial
import gc
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # HF tokenizers: one thread, like the others
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every row runs the fast core with BPE in Python, whatever this process has encoded before; the "compiled BPE"
# columns turn the compiled kernel on for their calls (with_compiled_bpe), loaded before they are timed.
os.environ["TOKENIZER_COMPILED_BPE"] = "0"

from shared_data import REPO, SHARED  # noqa: E402
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOKENIZER_DATA_DIR", str(SHARED / "encodings"))

from tokenizer import Encoding, Tokenizer, get_encoding  # noqa: E402
from tokenizer.pretokenize import compile_pattern  # noqa: E402


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
    """A new Encoding with an empty piece cache, sharing the loaded vocabulary: what get_encoding gives a new
    process, so it also names its vocabulary by the checked file (its tables are found without hashing it)."""
    enc = get_encoding(name)
    copy = Encoding(enc.name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)
    copy.core.vocabulary_source = enc.core.vocabulary_source
    return copy


def split_of(enc: Encoding):
    """The split a long text takes: the array split where the pattern has one (its starts from the code
    points), else the stdlib-re split."""
    from tokenizer.fast.array_split import has_array_split, piece_starts
    from tokenizer.fast.piece_arrays import code_points

    if has_array_split(enc.pat_str):
        return lambda text: piece_starts(code_points(text), enc.pat_str)
    return compile_pattern(enc.pat_str).split


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


def bpe_openai_peer(name: str):
    """bpe-openai's (Rust) Encoding of ``name`` (tiktoken's API, its ids equal tiktoken's), or None where it is not
    installed (the bench extra installs it) or has no such encoding (it has none for gpt2)."""
    try:
        import bpe_openai

        peer = bpe_openai.get_encoding(name)
    except (ImportError, ValueError):
        return None
    # it refuses a call that makes more than 200,000 tokens (after encoding it), a limit it has no argument for;
    # the bench's long texts make more
    peer._runtime.config.chunk_limit = 1 << 62
    return peer


class QuicktokPeer:
    """quicktok's (C++) BasicTokenizer loaded with ``enc``'s merges and pattern, written in its model format (as
    minbpe's: a merge per line, the parts named by ids, a single byte's id being its value, the n-th merge's
    256 + n). Its own regex engine splits the text; ``ids(text)`` gives tiktoken's ids back, to count the messages
    where its pieces differ from tiktoken's."""

    def __init__(self, enc: Encoding, folder: Path):
        import quicktok

        minbpe_id = {bytes([b]): b for b in range(256)}
        lines = ["quicktok v1", enc.pat_str, "0"]
        for n, (left, right) in enumerate(enc.merges):
            lines.append(f"{minbpe_id[left]} {minbpe_id[right]}")
            minbpe_id[left + right] = 256 + n
        path = folder / f"{enc.name}.model"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.tokenizer = quicktok.BasicTokenizer()
        self.tokenizer.load(str(path))
        self.encode = self.tokenizer.encode
        self._token_id = {minbpe: enc.token_ids[token] for token, minbpe in minbpe_id.items()}

    @classmethod
    def of(cls, enc: Encoding, folder: Path) -> QuicktokPeer | None:
        """The peer, or None where quicktok is not installed (the bench extra installs it)."""
        try:
            return cls(enc, folder)
        except ImportError:
            return None

    def ids(self, text: str) -> list[int]:
        return list(map(self._token_id.__getitem__, self.encode(text)))


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


FRESH_PROCESS = """
import sys, time
sys.path.insert(0, {repo!r})
text = open({path!r}, "rb").read()[:{size}].decode("utf-8", errors="ignore")
t0 = time.perf_counter()
if {tiktoken}:
    import tiktoken
    enc = tiktoken.get_encoding({name!r})
else:
    from tokenizer import get_encoding
    enc = get_encoding({name!r})
t1 = time.perf_counter()
ids = enc.encode_ordinary(text)
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, len(ids))
"""


def fresh_process(name: str, path: Path, size: int, *, tiktoken: bool) -> tuple[float, float, int]:
    """(get_encoding seconds, encode seconds, number of ids) in a new Python process."""
    code = FRESH_PROCESS.format(repo=str(REPO), path=str(path), size=size, name=name, tiktoken=tiktoken)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def documents_joined(label: str, text: str) -> str:
    """``text`` in the TinyStories layout, documents joined by ``<|endoftext|>``: en_docs is so already; the
    others are cut into paragraphs (at blank lines) joined so."""
    if "<|endoftext|>" in text:
        return text
    return "<|endoftext|>".join(paragraph for paragraph in text.split("\n\n") if paragraph)


def middle(ratios: list[float]) -> float | None:
    """The median of ``ratios`` (the middle attempt: each one's messages are new, so none can be re-timed);
    None if there are none (a peer or the compiled kernel not installed)."""
    return sorted(ratios)[len(ratios) // 2] if ratios else None


def fresh_with_tables(name: str) -> Encoding:
    """A fresh Encoding whose batch BPE tables are loaded (as in a process that has the compiled kernel)."""
    enc = fresh(name)
    enc.core.batch_table()
    return enc


def with_compiled_bpe(call):
    """``call`` run with the compiled BPE kernel on (tokenizer/fast/compiled_bpe.py): a fresh Encoding takes it at
    its first new piece (the kernel loaded before: compiled_bpe_available)."""
    def run():
        os.environ["TOKENIZER_COMPILED_BPE"] = "1"
        try:
            return call()
        finally:
            os.environ["TOKENIZER_COMPILED_BPE"] = "0"
    return run


def compiled_bpe_available() -> bool:
    """Load the compiled BPE kernel now (numba, the train extra); False if it cannot come."""
    from tokenizer.fast import compiled_bpe

    return compiled_bpe.wait_until_loaded() is not None


def messages_of(text: str, count: int, seed: int) -> list[str]:
    """``count`` messages of 20 to 2,000 characters (log-uniform) taken one after another from ``text``, after a
    random gap each, so that no two share text."""
    rng = random.Random(seed)
    messages, at = [], rng.randrange(1000)
    while len(messages) < count:
        length = int(20 * 100 ** rng.random())
        if at + length > len(text):
            at = rng.randrange(1000)  # (a short text is read again: the messages still differ in where they cut)
        messages.append(text[at : at + length])
        at += length + rng.randrange(200)
    return messages


def alternated(timed: dict, repeat: int) -> dict:
    """Best seconds of each of ``timed`` (label -> a function that prepares the call, say makes a fresh Encoding,
    and returns the call to time), run in turn ``repeat`` times, each after a garbage collection."""
    best = dict.fromkeys(timed, float("inf"))
    for _ in range(repeat):
        for label, prepare in timed.items():
            fn = None  # (the last call's Encoding, large tables and cycles, is not collected inside the next one)
            fn = prepare()
            gc.collect()
            t0 = time.perf_counter()
            fn()
            best[label] = min(best[label], time.perf_counter() - t0)
    return best


def special_rows(names, labels, size, repeat):
    """(text, encoding, ratios of ordinary, "all", a set, "all" with compiled BPE (None without numba), and
    bpe-openai's "all"): documents joined by <|endoftext|>."""
    import tiktoken

    compiled = compiled_bpe_available()
    rows = []
    for label in labels:
        text = documents_joined(label, read_prefix(f"{label}.txt", 0, size))
        for name in names:
            oracle = tiktoken.get_encoding(name)
            allowed = {"<|endoftext|>"}
            assert fresh(name).encode(text, allowed_special="all") == oracle.encode(text, allowed_special="all")
            assert fresh(name).encode(text, allowed_special=allowed) == oracle.encode(text, allowed_special=allowed)
            timed = {
                "tik ordinary": lambda: lambda: oracle.encode_ordinary(text),
                "ours ordinary": lambda: partial(fresh(name).encode_ordinary, text),
                "tik all": lambda: lambda: oracle.encode(text, allowed_special="all"),
                "ours all": lambda: partial(fresh(name).encode, text, allowed_special="all"),
                "tik set": lambda: lambda: oracle.encode(text, allowed_special=allowed),
                "ours set": lambda: partial(fresh(name).encode, text, allowed_special=allowed),
            }
            if compiled:
                with_kernel = fresh(name)
                assert with_compiled_bpe(partial(with_kernel.encode, text, allowed_special="all"))() == \
                    oracle.encode(text, allowed_special="all")
                assert with_kernel.core.uses_compiled_bpe
                timed["ours compiled"] = lambda: with_compiled_bpe(partial(fresh(name).encode, text,
                                                                           allowed_special="all"))
            peer = bpe_openai_peer(name)
            if peer is not None:
                assert peer.encode(text, allowed_special="all") == oracle.encode(text, allowed_special="all")
                timed["bpe-openai all"] = lambda: lambda: peer.encode(text, allowed_special="all")
            best = alternated(timed, repeat)
            by_compiled = best["tik all"] / best["ours compiled"] if compiled else None
            by_peer = best["tik all"] / best["bpe-openai all"] if peer is not None else None
            rows.append((label, name, text.count("<|endoftext|>"),
                         *(best[f"tik {kind}"] / best[f"ours {kind}"] for kind in ("ordinary", "all", "set")),
                         by_compiled, by_peer))
            print(f"done special {label} {name}", file=sys.stderr, flush=True)
    return rows


def short_rows(names, labels, count, repeat):
    """(language, encoding, ratios of the first pass, the first pass with compiled BPE, the warm pass,
    encode_batch, encode_batch with compiled BPE, encode_ordinary_batch, the same with compiled BPE; then tiktoken's time / each extra peer's,
    a call each, None where it is not installed: bpe-openai, quicktok; and the share of messages where quicktok's
    ids differ from tiktoken's). The compiled columns are None without numba."""
    import tiktoken

    compiled = compiled_bpe_available()

    per_language = -(-count // len(labels))
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        peers = {name: (bpe_openai_peer(name), QuicktokPeer.of(get_encoding(name), Path(folder))) for name in names}
    for seed, label in enumerate(labels):
        # (messages are ordinary text: encode's default refuses a special token's text)
        text = (SHARED / "corpus" / f"{label}.txt").read_text(encoding="utf-8", errors="ignore")
        text = text.replace("<|endoftext|>", "")
        for name in names:
            oracle = tiktoken.get_encoding(name)
            bpe_openai, quicktok = peers[name]
            firsts, warms, batches, ordinary_batches, by_bpe_openai, by_quicktok = [], [], [], [], [], []
            compiled_firsts, compiled_batches, compiled_ordinary_batches = [], [], []
            quicktok_differs = None
            for attempt in range(repeat):
                # new messages every attempt: new to both sides
                messages = messages_of(text, per_language, seed=1000 * attempt + seed)
                ours, ours_compiled = fresh(name), fresh_with_tables(name)
                timed = {
                    "tik": lambda: lambda: [oracle.encode(m) for m in messages],
                    "first": lambda: lambda: [ours.encode(m) for m in messages],
                    "warm": lambda: lambda: [ours.encode(m) for m in messages],
                }
                if compiled:
                    timed["first compiled"] = lambda: with_compiled_bpe(lambda: [ours_compiled.encode(m) for m in messages])
                # the extra peers keep no cache: their every pass is a first one
                if bpe_openai is not None:
                    timed["bpe-openai"] = lambda: lambda: [bpe_openai.encode(m) for m in messages]
                if quicktok is not None:
                    timed["quicktok"] = lambda: lambda: [quicktok.encode(m) for m in messages]
                best = alternated(timed, 1)
                # (the warm pass is the second pass of one Encoding: timed once per attempt, after the first)
                firsts.append(best["tik"] / best["first"])
                warms.append(best["tik"] / best["warm"])
                expected = [oracle.encode(m) for m in messages]
                assert [ours.encode(m) for m in messages] == expected
                if compiled:
                    compiled_firsts.append(best["tik"] / best["first compiled"])
                    assert [ours_compiled.encode(m) for m in messages] == expected
                    assert ours_compiled.core.uses_compiled_bpe and not ours.core.uses_compiled_bpe
                if bpe_openai is not None:
                    by_bpe_openai.append(best["tik"] / best["bpe-openai"])
                    assert [bpe_openai.encode(m) for m in messages] == expected
                if quicktok is not None:
                    by_quicktok.append(best["tik"] / best["quicktok"])
                    quicktok_differs = sum(map(list.__ne__, map(quicktok.ids, messages), expected)) / len(messages)
                messages = messages_of(text, per_language, seed=1000 * attempt + seed + 500)
                timed = {
                    "tik batch": lambda: lambda: oracle.encode_batch(messages),
                    "ours batch": lambda: partial(fresh(name).encode_batch, messages),
                    "tik ordinary": lambda: lambda: oracle.encode_ordinary_batch(messages),
                    "ours ordinary": lambda: partial(fresh(name).encode_ordinary_batch, messages),
                }
                if compiled:
                    timed["compiled batch"] = lambda: with_compiled_bpe(partial(fresh_with_tables(name).encode_batch, messages))
                    timed["compiled ordinary"] = lambda: with_compiled_bpe(
                        partial(fresh_with_tables(name).encode_ordinary_batch, messages))
                best = alternated(timed, 1)
                if compiled:
                    compiled_batches.append(best["tik batch"] / best["compiled batch"])
                    compiled_ordinary_batches.append(best["tik ordinary"] / best["compiled ordinary"])
                    for method, expected in (("encode_batch", oracle.encode_batch(messages)),
                                             ("encode_ordinary_batch", oracle.encode_ordinary_batch(messages))):
                        with_kernel = fresh(name)
                        assert with_compiled_bpe(partial(getattr(with_kernel, method), messages))() == expected
                        assert with_kernel.core.uses_compiled_bpe, method
                batches.append(best["tik batch"] / best["ours batch"])
                ordinary_batches.append(best["tik ordinary"] / best["ours ordinary"])
                assert fresh(name).encode_batch(messages) == oracle.encode_batch(messages)
            rows.append((label, name, per_language, middle(firsts), middle(compiled_firsts), middle(warms),
                         middle(batches), middle(compiled_batches), middle(ordinary_batches),
                         middle(compiled_ordinary_batches), middle(by_bpe_openai),
                         middle(by_quicktok), quicktok_differs))
            print(f"done short {label} {name}", file=sys.stderr, flush=True)
    return rows


def turn_rows(names, labels, count, repeat):
    """(language, encoding, turns, ratios of the first pass, the first pass with compiled BPE (None without
    numba) and the warm pass): short messages each between two ``<|endoftext|>`` (a chat template's turn:
    ``"<|endoftext|>user\\n" + message + "<|endoftext|>"``), a call each with ``allowed_special="all"``; the median
    of ``repeat`` attempts on new messages, a fresh Encoding each."""
    import tiktoken

    compiled = compiled_bpe_available()

    per_language = -(-count // len(labels))
    rows = []
    for seed, label in enumerate(labels):
        text = (SHARED / "corpus" / f"{label}.txt").read_text(encoding="utf-8", errors="ignore")
        text = text.replace("<|endoftext|>", "")
        for name in names:
            oracle = tiktoken.get_encoding(name)
            firsts, compiled_firsts, warms = [], [], []
            for attempt in range(repeat):
                turns = [f"<|endoftext|>user\n{m}<|endoftext|>"
                         for m in messages_of(text, per_language, seed=1000 * attempt + seed + 700)]
                ours, ours_compiled = fresh(name), fresh_with_tables(name)
                timed = {
                    "tik": lambda: lambda: [oracle.encode(t, allowed_special="all") for t in turns],
                    "first": lambda: lambda: [ours.encode(t, allowed_special="all") for t in turns],
                    "warm": lambda: lambda: [ours.encode(t, allowed_special="all") for t in turns],
                }
                if compiled:
                    timed["first compiled"] = lambda: with_compiled_bpe(
                        lambda: [ours_compiled.encode(t, allowed_special="all") for t in turns])
                best = alternated(timed, 1)
                expected = [oracle.encode(t, allowed_special="all") for t in turns]
                assert [ours.encode(t, allowed_special="all") for t in turns] == expected
                firsts.append(best["tik"] / best["first"])
                warms.append(best["tik"] / best["warm"])
                if compiled:
                    assert [ours_compiled.encode(t, allowed_special="all") for t in turns] == expected
                    compiled_firsts.append(best["tik"] / best["first compiled"])
            rows.append((label, name, per_language, middle(firsts), middle(compiled_firsts), middle(warms)))
            print(f"done turns {label} {name}", file=sys.stderr, flush=True)
    return rows


MID_SIZES = (16_000, 64_000, 256_000)


def mid_rows(names, labels, repeat):
    """(text, encoding, ratio at each of MID_SIZES, the same with compiled BPE (None without numba), ratio on a
    conversation): texts of a mid size, each new and encoded by an Encoding with an empty piece cache whose
    tables are loaded (what a process that has encoded a long text before meets; one call each, ``repeat``
    texts of each size); and a conversation of 100 short messages, all of it encoded again at each turn by a
    fresh Encoding."""
    import tiktoken

    compiled = compiled_bpe_available()
    rows = []
    for seed, label in enumerate(labels):
        text = (SHARED / "corpus" / f"{label}.txt").read_text(encoding="utf-8", errors="ignore")
        text = text.replace("<|endoftext|>", "")
        rng = random.Random(seed)
        for name in names:
            oracle = tiktoken.get_encoding(name)
            ratios, compiled_ratios = [], []
            for size in MID_SIZES:
                texts = [text[at : at + size] for at in (rng.randrange(len(text) - size) for _ in range(repeat))]
                t_tik = t_ours = t_compiled = 0.0
                for one in texts:  # alternated; for each text an Encoding whose tables are loaded, its cache empty
                    t0 = time.perf_counter()
                    expected = oracle.encode_ordinary(one)
                    t_tik += time.perf_counter() - t0
                    ours = fresh_with_tables(name)
                    t0 = time.perf_counter()
                    ids = ours.encode_ordinary(one)
                    t_ours += time.perf_counter() - t0
                    assert ids == expected
                    if compiled:
                        ours = fresh_with_tables(name)
                        t0 = time.perf_counter()
                        ids = with_compiled_bpe(partial(ours.encode_ordinary, one))()
                        t_compiled += time.perf_counter() - t0
                        assert ids == expected and ours.core.uses_compiled_bpe
                ratios.append(t_tik / t_ours)
                compiled_ratios.append(t_tik / t_compiled if compiled else None)
            messages = messages_of(text, 100, seed=seed)
            turns = ["\n".join(messages[: i + 1]) for i in range(len(messages))]
            best = alternated({
                "tik": lambda: lambda: [oracle.encode_ordinary(turn) for turn in turns],
                "ours": lambda: partial(list, map(fresh(name).encode_ordinary, turns)),
            }, repeat)
            assert list(map(fresh(name).encode_ordinary, turns)) == [oracle.encode_ordinary(t) for t in turns]
            rows.append((label, name, *ratios, *compiled_ratios, best["tik"] / best["ours"]))
            print(f"done mid {label} {name}", file=sys.stderr, flush=True)
    return rows


def decode_rows(names, labels, size, count, repeat):
    """(text, encoding, ratios of decode, decode_bytes, decode of each short message, decode_batch of them)."""
    import tiktoken

    rows = []
    for seed, label in enumerate(labels):
        text = read_prefix(f"{label}.txt", 0, size)
        for name in names:
            oracle, ours = tiktoken.get_encoding(name), get_encoding(name)
            ids = oracle.encode_ordinary(text)
            batch = oracle.encode_ordinary_batch(messages_of(text, count // len(labels) + 1, seed))
            assert ours.decode(ids) == oracle.decode(ids) and ours.decode_batch(batch) == oracle.decode_batch(batch)
            best = alternated({
                "tik decode": lambda: lambda: oracle.decode(ids),
                "ours decode": lambda: lambda: ours.decode(ids),
                "tik bytes": lambda: lambda: oracle.decode_bytes(ids),
                "ours bytes": lambda: lambda: ours.decode_bytes(ids),
                "tik each": lambda: lambda: [oracle.decode(one) for one in batch],
                "ours each": lambda: lambda: [ours.decode(one) for one in batch],
                "tik batch": lambda: lambda: oracle.decode_batch(batch),
                "ours batch": lambda: lambda: ours.decode_batch(batch),
            }, repeat)
            rows.append((label, name, *(best[f"tik {kind}"] / best[f"ours {kind}"]
                                        for kind in ("decode", "bytes", "each", "batch"))))
    return rows


def random_code_points(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    chars = []
    while len(chars) < n:
        cp = rng.randrange(0x110000)
        if not 0xD800 <= cp < 0xE000:
            chars.append(chr(cp))
    return "".join(chars)


PATHOLOGICAL = {
    "a million spaces": lambda: " " * 1_000_000,
    '"^" * 1_000_000': lambda: "^" * 1_000_000,
    '"a" * 1_000_000': lambda: "a" * 1_000_000,
    "100k random code points": lambda: random_code_points(100_000),
}


FAMILIES = "llama3,qwen3,deepseek_v3,gpt_oss"


def with_fresh_core(enc: Encoding) -> Encoding:
    """``enc`` given a new fast core (no piece cache, no checkpoint: a text encoded again is new to it), its tables
    loaded (from the disk cache), as in a process that has encoded a long text before."""
    from tokenizer.fast.core import FastCore

    core = enc.core
    enc.core = FastCore(core.pat_str, core.merge_ranks, core.token_ids, whole_piece_tokens=core.whole_piece_tokens,
                        bytes_by_id=core.bytes_by_id, text_steps=core.text_steps)
    enc.core.vocabulary_source = core.vocabulary_source
    enc.core.batch_table()
    return enc


def family_rows(families, labels, size, repeat):
    """(family, text, MB, HF MB/s, ours MB/s, ratio HF time / ours, the route ours took, whether the ids equal HF's,
    tiktoken's time / ours or None): each family's tokenizer.json against HF tokenizers, and Llama 3 against
    tiktoken made from its ranks and pattern."""
    import tiktoken
    from tokenizers import Tokenizer as HFTokenizer

    import tokenizer

    rows = []
    for family in families:
        file = SHARED / "encodings" / "hf" / family / "tokenizer.json"
        ours = tokenizer.load(file)
        hf = HFTokenizer.from_file(str(file))
        peer = None
        if family == "llama3":
            ranks = {token: idx for token, idx in ours.token_ids.items() if idx < 128_000}
            peer = tiktoken.Encoding("llama3", pat_str=ours.pat_str, mergeable_ranks=ranks,
                                     special_tokens={text: idx for text, idx in ours.special_tokens.items()})
        ours.core.batch_table()  # (the tables once into the disk cache and this core)
        for label in labels:
            text = read_prefix(f"{label}.txt", 0, size).replace("<|endoftext|>", "")
            mb = len(text.encode("utf-8")) / 1e6
            timed = {"hf": lambda: lambda: hf.encode(text, add_special_tokens=False).ids,
                     "ours": lambda: partial(with_fresh_core(ours).encode_ordinary, text)}
            if peer is not None:
                timed["tiktoken"] = lambda: partial(peer.encode_ordinary, text)
            best = alternated(timed, repeat)
            ids = ours.encode_ordinary(text)
            exact = ids == hf.encode(text, add_special_tokens=False).ids
            if peer is not None:
                assert peer.encode_ordinary(text) == ids, f"tiktoken with Llama 3's ranks differs on {label}"
            route = ours.core.last_route.value if hasattr(ours.core, "last_route") else "?"
            by_tiktoken = best["tiktoken"] / best["ours"] if peer is not None else None
            rows.append((family, label, mb, mb / best["hf"], mb / best["ours"], best["hf"] / best["ours"], route,
                         exact, by_tiktoken))
            print(f"done family {family} {label}", file=sys.stderr, flush=True)
        del ours, hf, peer
        gc.collect()
    return rows


def time_or_failure(fn, text: str) -> tuple[float | None, list[int] | None, str]:
    """(seconds, ids, "") or (None, None, what went wrong): tiktoken panics on some inputs."""
    try:
        t0 = time.perf_counter()
        ids = fn(text)
        return time.perf_counter() - t0, ids, ""
    except BaseException as e:  # noqa: BLE001 - a Rust panic is a BaseException
        if isinstance(e, KeyboardInterrupt):
            raise
        return None, None, type(e).__name__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--encodings", default="gpt2,cl100k_base,o200k_base")
    parser.add_argument("--texts", default="en_docs,de_manpages,fr_manpages,ru_manpages,ja_manpages,zh_manpages")
    parser.add_argument("--no-fresh-process", action="store_true", help="skip the fresh-process timings")
    parser.add_argument("--no-pathological", action="store_true", help="skip the pathological inputs")
    parser.add_argument("--no-hf", action="store_true", help="skip HF tokenizers and the CS336 face")
    parser.add_argument("--no-heap", action="store_true", help="skip the rescan/heap crossover table")
    parser.add_argument("--no-long", action="store_true", help="skip the long-text table and the loading table")
    parser.add_argument("--no-special", action="store_true", help="skip the special-tokens-allowed table")
    parser.add_argument("--no-short", action="store_true", help="skip the short-new-texts table")
    parser.add_argument("--no-decode", action="store_true", help="skip the decoding table")
    parser.add_argument("--no-mid", action="store_true", help="skip the mid-size texts table")
    parser.add_argument("--messages", type=int, default=7587, help="short messages, over all the texts")
    parser.add_argument("--no-families", action="store_true", help="skip the other families' tokenizer.json table")
    parser.add_argument("--families", default=FAMILIES, help="folders of ../shared/encodings/hf to time")
    parser.add_argument("--family-mb", type=float, default=1.0, help="MB of each text for the families' table")
    args = parser.parse_args()
    import tiktoken

    load = os.getloadavg()[0]
    size = int(args.mb * 1_000_000)
    names = args.encodings.split(",")
    for name in names:  # the pair tables into the disk cache first: cold calls then read them, as a user's would
        get_encoding(name).core.batch_table()
    rows = []
    for label in ([] if args.no_long else args.texts.split(",")):
        path = SHARED / "corpus" / f"{label}.txt"
        text = read_prefix(path.name, 0, size)
        mb = len(text.encode("utf-8")) / 1e6
        whole = path.read_bytes()
        parts = [whole[i : i + size].decode("utf-8", errors="ignore") for i in range(0, len(whole), size)]
        whole_mb = len(whole) / 1e6
        for name in names:
            oracle = tiktoken.get_encoding(name)
            oracle.encode_ordinary("warm up")
            # tiktoken and our cold call alternate, best of --repeat each (a fresh Encoding every time)
            t_tik = t_cold = t_split = float("inf")
            for _ in range(args.repeat):
                t_tik = min(t_tik, best_time(oracle.encode_ordinary, text, 1))
                ours = fresh(name)
                t0 = time.perf_counter()
                ids = ours.encode_ordinary(text)
                t_cold = min(t_cold, time.perf_counter() - t0)
                t_split = min(t_split, best_time(split_of(ours), text, 1))
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

            fresh_ratio = fresh_total_ratio = None
            if not args.no_fresh_process:
                runs = {True: [], False: []}  # best of --repeat new processes each, alternated
                for _ in range(args.repeat):
                    for tik in (True, False):
                        runs[tik].append(fresh_process(name, path, size, tiktoken=tik))
                assert {n for *_, n in runs[True] + runs[False]} == {runs[True][0][2]}, f"fresh process: ids differ ({name} on {label})"
                fresh_ratio = min(e for _, e, _ in runs[True]) / min(e for _, e, _ in runs[False])
                fresh_total_ratio = min(l + e for l, e, _ in runs[True]) / min(l + e for l, e, _ in runs[False])

            t_hf = t_cs336 = None
            if name == "gpt2" and not args.no_hf:
                hf = hf_gpt2()
                assert hf.encode(text[:100_000]).ids == oracle.encode_ordinary(text[:100_000])
                t_hf = best_time(lambda s: hf.encode(s).ids, text, args.repeat)
                cs336 = cs336_gpt2()
                t0 = time.perf_counter()
                ids = cs336.encode(text)
                t_cs336 = time.perf_counter() - t0
                assert ids == oracle.encode(text, allowed_special="all"), f"CS336 Tokenizer differs on {label}"
            rows.append(
                (label, name, mb, whole_mb, t_tik, t_hf, t_cold, t_split, fresh_ratio, fresh_total_ratio, t_cs336,
                 t_tik_long, t_long, t_repeat)
            )
            print(f"done {label} {name}", file=sys.stderr, flush=True)

    def rate(mb, t):
        return f"{mb / t:.1f}" if t else "–"

    def ratio(t_tik, t):
        return f"{t_tik / t:.2f}×" if t else "–"

    print(f"\n`python bench/bench_encode.py --mb {args.mb:g}` (MB/s; ratio = tiktoken's time / ours; "
          f"load average {load:.2f} at the start)\n")
    labels = args.texts.split(",")
    if not args.no_special:
        print("\nSpecial tokens allowed: documents joined by <|endoftext|>, a fresh Encoding each call (ratio = "
              "tiktoken's time / ours, best of --repeat, alternated)\n")
        print("| text | encoding | <\\|endoftext\\|> | encode_ordinary | encode, \"all\" | encode, a set "
              "| encode, \"all\", compiled BPE | peer: bpe-openai, \"all\" |")
        print("|---|---|---|---|---|---|---|---|")
        for label, name, n_special, *ratios in special_rows(names, labels, size, args.repeat):
            cells = ["–" if r is None else f"{r:.2f}×" for r in ratios]
            print(f"| {label} | {name} | {n_special:,} | " + " | ".join(cells) + " |", flush=True)
    if not args.no_families:
        print(f"\nOther families: each tokenizer.json by tokenizer.load against HF tokenizers from the same file, "
              f"the first {args.family_mb:g} MB of each text, one text per call, one thread (MB/s; ratio = HF's "
              "time / ours, best of --repeat, alternated; tiktoken: made from Llama 3's ranks and pattern, its time "
              "/ ours)\n")
        print("| family | text | MB | HF tokenizers | ours | **ratio** | route | ids equal HF's "
              "| tiktoken's time / ours |")
        print("|---|---|---|---|---|---|---|---|---|")
        family_size = int(args.family_mb * 1_000_000)
        for family, label, mb, hf_rate, our_rate, by_hf, route, exact, by_tiktoken in family_rows(
                args.families.split(","), labels, family_size, args.repeat):
            tik_cell = "–" if by_tiktoken is None else f"{by_tiktoken:.2f}×"
            exact_cell = "yes" if exact else "**no: not yet exact**"
            print(f"| {family} | {label} | {mb:.2f} | {hf_rate:.2f} | {our_rate:.2f} | **{by_hf:.2f}×** | {route} "
                  f"| {exact_cell} | {tik_cell} |", flush=True)
    if not args.no_short:
        print(f"\nShort new texts: {args.messages:,} messages of 20-2,000 characters over the texts, each language "
              "alone (ratio = tiktoken's time / ours, the median of --repeat attempts on new messages)\n")
        print("| text | encoding | messages | first pass, a call each | first pass, compiled BPE | warm pass "
              "| encode_batch | encode_batch, compiled BPE | encode_ordinary_batch "
              "| encode_ordinary_batch, compiled BPE | peer: bpe-openai, a call each | peer: quicktok, a call each |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        differs = []
        for label, name, count, *ratios, quicktok_differs in short_rows(names, labels, args.messages, args.repeat):
            cells = ["–" if r is None else f"{r:.2f}×" for r in ratios]
            print(f"| {label} | {name} | {count:,} | " + " | ".join(cells) + " |", flush=True)
            if quicktok_differs is not None:
                differs.append(f"{label} {name} {quicktok_differs:.0%}")
        print("\nThe peers' columns are tiktoken's time / the peer's, on the same messages (bpe-openai's ids are "
              "tiktoken's, asserted; it has no gpt2). quicktok splits with its own regex engine, and its ids differ "
              "from tiktoken's on this share of the messages: " + (", ".join(differs) or "not installed") + ".")
        print("\nShort messages between special tokens: each new message as a chat template's turn, "
              "\"<|endoftext|>user\\n\" + message + \"<|endoftext|>\", a call each with allowed_special=\"all\" "
              "(ratio = tiktoken's time / ours, the median of --repeat attempts on new messages)\n")
        print("| text | encoding | turns | first pass, a call each | first pass, compiled BPE | warm pass |")
        print("|---|---|---|---|---|---|")
        for label, name, count, *ratios in turn_rows(names, labels, args.messages, args.repeat):
            cells = ["–" if r is None else f"{r:.2f}×" for r in ratios]
            print(f"| {label} | {name} | {count:,} | " + " | ".join(cells) + " |", flush=True)
    if not args.no_mid:
        print("\nMid-size texts: new texts of each size, each by an Encoding with an empty piece cache and its "
              "tables loaded (one call, --repeat texts); a conversation of 100 short messages, all of it encoded "
              "again at each turn by a fresh Encoding (ratio = tiktoken's time / ours)\n")
        print("| text | encoding | " + " | ".join(f"{size // 1000}k characters" for size in MID_SIZES) + " | "
              + " | ".join(f"{size // 1000}k, compiled BPE" for size in MID_SIZES) + " | a conversation, each turn |")
        print("|---|---|" + "---|" * (2 * len(MID_SIZES) + 1))
        for label, name, *ratios in mid_rows(names, labels, args.repeat):
            cells = ["–" if r is None else f"{r:.2f}×" for r in ratios]
            print(f"| {label} | {name} | " + " | ".join(cells) + " |", flush=True)
    if not args.no_decode:
        print("\nDecoding: the text's ids in one call; the short messages' ids, a call each and in one decode_batch "
              "(ratio = tiktoken's time / ours, best of --repeat, alternated)\n")
        print("| text | encoding | decode | decode_bytes | decode, a call per message | decode_batch |")
        print("|---|---|---|---|---|---|")
        for label, name, *ratios in decode_rows(names, labels, size, args.messages, args.repeat):
            print(f"| {label} | {name} | " + " | ".join(f"{r:.2f}×" for r in ratios) + " |", flush=True)
    if not args.no_long:
        print(f"\nLong texts, the first {args.mb:g} MB of each file (MB/s; cold: a fresh Encoding, one call; long job: the whole "
              f"file in {args.mb:g} MB calls; repeat: the same {args.mb:g} MB again; fresh process: import, get_encoding and "
              "one encode_ordinary in a new Python process, the call alone and the total)\n")
        print("| text | encoding | tiktoken | HF tokenizers | ours cold | **cold ratio** | split / BPE+join (s) "
              "| fresh-process cold ratio | fresh-process total ratio | CS336 Tokenizer cold | long job ratio | ours repeat | repeat ratio |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for (label, name, mb, whole_mb, t_tik, t_hf, t_cold, t_split, fresh_ratio, fresh_total_ratio, t_cs336,
             t_tik_long, t_long, t_repeat) in rows:
            fresh_cell = f"{fresh_ratio:.2f}×" if fresh_ratio else "–"
            fresh_total_cell = f"{fresh_total_ratio:.2f}×" if fresh_total_ratio else "–"
            print(
                f"| {label} | {name} | {rate(mb, t_tik)} | {rate(mb, t_hf)} | {rate(mb, t_cold)} | "
                f"**{ratio(t_tik, t_cold)}** | {t_split:.3f} / {t_cold - t_split:.3f} | {fresh_cell} | {fresh_total_cell} "
                f"| {rate(mb, t_cs336)} | {ratio(t_tik_long, t_long)} | {rate(mb, t_repeat)} | {ratio(t_tik, t_repeat)} |"
            )

        from tokenizer.fast import batch_bpe, table_cache

        print("\nLoading, per encoding (seconds): get_encoding in a fresh process (ours / tiktoken); the pair table of "
              "batch BPE: its pairs, building it, reading it from the disk cache, found by the vocabulary file's name and "
              "checked (what a fresh Encoding from get_encoding does)\n")
        print("| encoding | get_encoding ours | get_encoding tiktoken | pairs | table build | table from disk | file MB |")
        print("|---|---|---|---|---|---|---|")
        probe = SHARED / "corpus" / "en_docs.txt"
        for name in names:
            our_load = min(fresh_process(name, probe, 10, tiktoken=False)[0] for _ in range(args.repeat))
            tik_load = min(fresh_process(name, probe, 10, tiktoken=True)[0] for _ in range(args.repeat))
            enc = get_encoding(name)
            t0 = time.perf_counter()
            table = batch_bpe.build_pair_table(enc.merge_ranks, enc.token_ids)
            t_build = time.perf_counter() - t0
            t_disk = best_time(lambda _: table_cache.load_or_build_tables(enc.merge_ranks, enc.token_ids,
                                                                         source=enc.core.vocabulary_source), "", args.repeat)
            n_pairs = int((table.slot_keys >= 0).sum())
            size = table_cache.table_path(table_cache.vocabulary_digest(enc.merge_ranks, enc.token_ids)).stat().st_size
            print(f"| {name} | {our_load:.3f} | {tik_load:.3f} | {n_pairs:,} | {t_build:.2f} | {t_disk:.3f} | {size / 1e6:.1f} |")

    if not args.no_pathological:
        print("\nPathological inputs, cold calls (seconds, best of --repeat, alternated, a fresh Encoding every "
              "time; ratio = tiktoken's time / ours)\n")
        print("| input | encoding | tiktoken | ours | ratio |")
        print("|---|---|---|---|---|")
        for label, make in PATHOLOGICAL.items():
            text = make()
            for name in names:
                oracle = tiktoken.get_encoding(name)
                tik_times, our_times = [], []
                for _ in range(args.repeat):
                    t_tik, tik_ids, failure = time_or_failure(oracle.encode_ordinary, text)
                    tik_times.append(t_tik)
                    ours = fresh(name)
                    t_ours, ids, _ = time_or_failure(ours.encode_ordinary, text)
                    our_times.append(t_ours)
                    assert ours.decode(ids) == text
                t_tik = None if failure else min(tik_times)
                t_ours = min(our_times)
                if tik_ids is not None:
                    assert ids == tik_ids, f"ids differ from tiktoken on {label} ({name})"
                tik_cell = f"{t_tik:.3f}" if t_tik is not None else f"fails ({failure})"
                ratio_cell = f"{t_tik / t_ours:.2f}×" if t_tik is not None else "–"
                print(f"| {label} | {name} | {tik_cell} | {t_ours:.3f} | {ratio_cell} |", flush=True)

    if not args.no_heap:
        from tokenizer.bpe import HEAP_THRESHOLD

        print(f"\nBPE of one long piece (gpt2 ranks), µs: rescanning the pair list vs the heap (HEAP_THRESHOLD = {HEAP_THRESHOLD})\n")
        print("| piece bytes | rescan | heap | faster |")
        print("|---|---|---|---|")
        for n, t_rescan, t_heap in heap_crossover(dict(get_encoding("gpt2").merge_ranks)):
            print(f"| {n} | {t_rescan * 1e6:.0f} | {t_heap * 1e6:.0f} | {'heap' if t_heap < t_rescan else 'rescan'} |")


if __name__ == "__main__":
    main()
