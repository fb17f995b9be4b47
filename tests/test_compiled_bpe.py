"""The compiled BPE kernel (tokenizer/fast/bpe_kernel.py) against its oracles, bpe.merge with the whole-piece
rule and tiktoken, and how it comes into a process (tokenizer/fast/compiled_bpe.py)."""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.compiled_bpe as compiled_bpe
from conftest import CORPUS, CORPUS_FILES, FUZZ_EXAMPLES, REPO
from test_batch_bpe import fresh_encoding, letters, mixed_texts, oracle, small_tables, small_vocab
from tokenizer import bpe, get_encoding
from tokenizer.fast.batch_bpe import build_pair_table
from tokenizer.fast.piece_arrays import PieceTable
from tokenizer.pretokenize import compile_pattern

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]


@functools.cache
def kernel():
    """The kernel, loaded once per worker (the first load in a session compiles it: a few seconds)."""
    loaded = compiled_bpe.wait_until_loaded()
    assert loaded is not None, compiled_bpe.status()
    return loaded


@functools.cache
def openai_compiled(name: str, whole_piece_tokens: bool = True):
    enc = get_encoding(name)
    tables = enc.core.batch_table(), PieceTable(enc.token_ids)
    return kernel().CompiledBPE(*tables, whole_piece_tokens=whole_piece_tokens)


def whole_piece_oracle(pieces: list[bytes], enc) -> list[tuple[int, ...]]:
    """tiktoken's rule: a piece that is a token is that token, else bpe.merge's tokens."""
    return [(enc.token_ids[p],) if p in enc.token_ids else ids
            for p, ids in zip(pieces, oracle(pieces, enc.merge_ranks, enc.token_ids))]


@pytest.fixture
def compiled_on(monkeypatch):
    """Cores made in the test take the kernel at their first new piece."""
    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "1")
    return kernel()


# ---- the kernel against bpe.merge ---------------------------------------------------------------------------

@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)  # (a table built per example)
@given(st.lists(letters, max_size=40), small_tables, st.booleans())
def test_equals_merge_on_random_tie_heavy_tables(pieces, merge_ranks, whole_piece_tokens):
    token_ids = small_vocab(merge_ranks)
    table = build_pair_table(merge_ranks, token_ids)
    compiled = kernel().CompiledBPE(table, PieceTable(token_ids), whole_piece_tokens=whole_piece_tokens)
    expected = oracle(pieces, merge_ranks, token_ids)
    if whole_piece_tokens:
        expected = [(token_ids[p],) if p in token_ids else ids for p, ids in zip(pieces, expected)]
    assert compiled.encode(pieces) == expected


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_distinct_piece_of_the_corpora(name):
    enc = get_encoding(name)
    split = compile_pattern(enc.pat_str).split_reference
    pieces = set()
    for path in [CORPUS / file for file in CORPUS_FILES]:
        pieces.update(split(path.read_text(encoding="utf-8", errors="replace")[:200_000]))
    data = sorted(p.encode("utf-8") for p in pieces)
    assert openai_compiled(name).encode(data) == whole_piece_oracle(data, enc)
    assert openai_compiled(name, False).encode(data) == oracle(data, enc.merge_ranks, enc.token_ids)


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_token_is_found_whole_and_nothing_longer(name):
    # every token by the token table's key (pieces of every length: short keys, words, long ones hashed whole)
    enc = get_encoding(name)
    tokens = list(enc.token_ids)
    assert openai_compiled(name).encode(tokens) == [(enc.token_ids[t],) for t in tokens]
    # a token with a byte more is not found whole unless it is a token itself: BPE then
    longer = [t + b"\x00" for t in tokens[::50]] + [b"\x00" + t for t in tokens[::50]]
    assert openai_compiled(name).encode(longer) == whole_piece_oracle(longer, enc)


def test_a_token_found_by_its_key_must_have_the_same_bytes():
    # the table's entry for "abcdefghijk" holds other bytes of the same length: as after a 64-bit key collision
    vocabulary = {bytes([b]): b for b in range(256)} | {b"abcdefghijk": 256, b"ab": 257}
    arrays = dict(PieceTable(vocabulary).arrays)
    arrays["blob"] = arrays["blob"].copy()
    at = bytes(arrays["blob"]).rindex(b"abcdefghijk")  # (the single bytes a, b, ... spell it too)
    arrays["blob"][at + 10] = ord("z")
    tables = build_pair_table({b"ab": 0}, vocabulary), PieceTable.from_arrays(arrays)
    compiled = kernel().CompiledBPE(*tables, whole_piece_tokens=True)
    assert compiled.encode([b"abcdefghijk", b"ab"]) == [(257, *b"cdefghijk"), (257,)]


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(st.lists(st.text(max_size=40), max_size=30), st.sampled_from(ENCODINGS))
def test_equals_merge_on_openai_ranks(texts, name):
    enc = get_encoding(name)
    pieces = [t.encode("utf-8", "surrogatepass") for t in texts]
    assert openai_compiled(name).encode(pieces) == whole_piece_oracle(pieces, enc)


def test_long_runs_and_empty_pieces():
    enc = get_encoding("cl100k_base")
    pieces = [b"", b"a" * 3000, b" " * 999, b"", "中".encode() * 500, b"x" + b"\xff" * 300]
    assert openai_compiled("cl100k_base").encode(pieces) == whole_piece_oracle(pieces, enc)


long_runs = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"ab", b"aab", b"abc"]), st.integers(1, 200)),
                     min_size=1, max_size=4).map(lambda chunks: b"".join(unit * n for unit, n in chunks))


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)  # (a table built per example)
@given(st.lists(long_runs, min_size=1, max_size=4), small_tables)
def test_segments_merged_with_the_heap_equal_merge_on_tie_heavy_tables(pieces, merge_ranks):
    # pieces padded to HEAP_MIN_PARTS bytes or more: a segment that long is merged with the heap, not the scan
    pieces = [piece * (-(-kernel().HEAP_MIN_PARTS // len(piece))) for piece in pieces]
    token_ids = small_vocab(merge_ranks)
    compiled = kernel().CompiledBPE(build_pair_table(merge_ranks, token_ids), PieceTable(token_ids),
                                    whole_piece_tokens=False)
    assert compiled.encode(pieces) == oracle(pieces, merge_ranks, token_ids)


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)  # (a table built per example)
@given(st.lists(st.one_of(letters, long_runs), min_size=1, max_size=4), small_tables, st.integers(0, 13))
def test_merge_from_carries_on_from_parts_part_way_merged_as_bpe_merge_from(pieces, merge_ranks, stop_at):
    # batch BPE hands the kernel a segment part way merged (by its rounds, or one merge at a time in Python): the
    # kernel carries on from those parts to the ids bpe.merge gives the whole piece, as bpe.merge_from does
    token_ids = small_vocab(merge_ranks)
    compiled = kernel().CompiledBPE(build_pair_table(merge_ranks, token_ids), PieceTable(token_ids),
                                    whole_piece_tokens=False)
    for piece, expected in zip(pieces, oracle(pieces, merge_ranks, token_ids)):
        part_way = bpe.merge_reference(piece, merge_ranks, max_rank=stop_at)  # (the merges below stop_at done)
        carried_on = compiled.merge_from(np.array([token_ids[part] for part in part_way], dtype=np.int32))
        assert tuple(carried_on.tolist()) == expected
        assert carried_on.tolist() == [token_ids[part] for part in bpe.merge_from(part_way, merge_ranks)]


def test_a_long_segment_is_merged_in_near_linear_time():
    # 100,000 "a" (one segment for GPT-2: "aa" is a token) took 8 s when each merge scanned the segment for its
    # lowest pair, 200,000 took 38 s, 100,000 letters without spaces under a vocabulary trained on such text 6 s;
    # with the heap each takes hundredths of a second. Numba's machine code counts no work, so this thread's CPU
    # time is bounded instead (not wall-clock time: other processes sharing the cores do not add to it), at 5 s:
    # some 50 times what the heap takes, and the scan's square takes several times that at these lengths.
    import time

    from test_batch_bpe import random_letters, trained_on_letters

    enc = get_encoding("gpt2")
    trained = trained_on_letters()
    trained_compiled = kernel().CompiledBPE(build_pair_table(trained.merge_ranks, trained.token_ids),
                                            PieceTable(trained.token_ids), whole_piece_tokens=False)
    for compiled, pieces, vocabulary in [
        (openai_compiled("gpt2", False), [b"a" * 200_000, b"ab" * 100_000], enc),
        # text without spaces under a vocabulary trained on such text (bpe.merge takes a heap there too)
        (trained_compiled, [random_letters(200_000, seed=2).encode()], trained),
    ]:
        began = time.thread_time()
        ids = compiled.encode(pieces)
        cpu_seconds = time.thread_time() - began
        assert ids == oracle(pieces, vocabulary.merge_ranks, vocabulary.token_ids)
        assert cpu_seconds < 5.0


# ---- the fast core with the kernel, against tiktoken -----------------------------------------------------------

@pytest.mark.parametrize("name", ENCODINGS)
def test_messages_first_pass_and_warm_equal_tiktoken(name, compiled_on):
    import tiktoken

    oracle_encoding = tiktoken.get_encoding(name)
    for path in [CORPUS / file for file in CORPUS_FILES]:
        text = path.read_text(encoding="utf-8", errors="ignore")[:60_000]
        messages = [text[at : at + length] for at, length in zip(range(0, 60_000, 600), [20, 300, 1999, 7] * 25)]
        ours = fresh_encoding(name)
        expected = [oracle_encoding.encode_ordinary(m) for m in messages]
        assert [ours.encode_ordinary(m) for m in messages] == expected, path.name
        assert ours.core.uses_compiled_bpe, "the kernel ran"
        assert [ours.encode_ordinary(m) for m in messages] == expected, path.name
        assert fresh_encoding(name).encode_ordinary_batch(messages) == expected, path.name
        whole = text[:50_000]
        assert fresh_encoding(name).encode(whole, allowed_special="all") == \
            oracle_encoding.encode(whole, allowed_special="all"), path.name


@functools.cache
def _one_compiled_encoding(name: str):
    return fresh_encoding(name)


def emptied_compiled_encoding(name: str):
    """One Encoding per name for this file's fuzz test (not test_batch_bpe's: once it takes the kernel it keeps
    it), its piece cache emptied before each example."""
    enc = _one_compiled_encoding(name)
    enc.core._cache.clear()
    return enc


@pytest.mark.parametrize("name", ENCODINGS)
def test_long_texts_through_the_array_path_equal_tiktoken(name, compiled_on, monkeypatch):
    import tiktoken

    oracle_encoding = tiktoken.get_encoding(name)
    calls = []
    merge_blob = kernel().CompiledBPE.encode_blob
    monkeypatch.setattr(kernel().CompiledBPE, "encode_blob", lambda self, *a: calls.append(1) or merge_blob(self, *a))
    ours = fresh_encoding(name)
    for path in [CORPUS / file for file in CORPUS_FILES]:
        text = path.read_text(encoding="utf-8", errors="ignore")[:100_000]
        assert ours.encode(text, allowed_special="all") == oracle_encoding.encode(text, allowed_special="all"), path.name
        assert ours.encode_ordinary(text[1:]) == oracle_encoding.encode_ordinary(text[1:]), path.name
    assert ours.core.uses_compiled_bpe and len(calls) >= len(CORPUS_FILES), "the kernel merged the array path's segments"


def test_merges_only_rule_through_a_core_with_the_kernel(compiled_on):
    # CS336's rule (no whole-piece tokens): "abc" is a token but BPE gives "ab" "c"; the reference core agrees
    from tokenizer import Encoding

    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b" ab"}
    merges = [(b"a", b"b"), (b" ", b"ab")]
    text = " ".join(["abc"] + [f"ab{i}" for i in range(3000)])
    fast = Encoding.from_vocab_merges(vocab, merges, whole_piece_tokens=False)
    reference = Encoding.from_vocab_merges(vocab, merges, whole_piece_tokens=False, core="reference")
    fast.core.batch_table()
    fast.encode("ab1 ab2")  # (the first new piece takes the kernel; "abc" is new to it after that)
    assert fast.core.uses_compiled_bpe
    texts = ["abc ab1", text[:5000], "abc", text]
    assert [fast.encode(t) for t in texts] == [reference.encode(t) for t in texts]
    assert fast.encode("abc") == [256, 99]


def test_an_unknown_mode_is_auto_with_a_warning(monkeypatch):
    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "maybe")
    with pytest.warns(RuntimeWarning, match="TOKENIZER_COMPILED_BPE='maybe'"):
        assert compiled_bpe.mode_asked() == "auto"
    for value, mode in (("TRUE", "on"), (" no ", "off"), ("", "auto")):
        monkeypatch.setenv("TOKENIZER_COMPILED_BPE", value)
        assert compiled_bpe.mode_asked() == mode


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.lists(mixed_texts, min_size=1, max_size=6), st.sampled_from(ENCODINGS))
def test_fuzz_texts_equal_tiktoken(texts, name):
    import tiktoken

    oracle_encoding = tiktoken.get_encoding(name)
    saved = os.environ.get("TOKENIZER_COMPILED_BPE")
    os.environ["TOKENIZER_COMPILED_BPE"] = "1"  # hypothesis: no fixtures per example
    try:
        kernel()
        ours = emptied_compiled_encoding(name)
        assert [ours.encode(t, allowed_special="all") for t in texts] == \
            [oracle_encoding.encode(t, allowed_special="all") for t in texts]
        assert ours.encode_ordinary_batch(texts) == oracle_encoding.encode_ordinary_batch(texts)
    finally:
        os.environ["TOKENIZER_COMPILED_BPE"] = saved or "0"


def test_the_kernel_is_compiled_once_whatever_table_it_is_given():
    # a table built in memory (writable arrays) and one read from disk (read-only) run the same machine code
    get_encoding("gpt2").encode_ordinary("warm")
    enc = get_encoding("o200k_base")
    built = kernel().CompiledBPE(build_pair_table(enc.merge_ranks, enc.token_ids), PieceTable(enc.token_ids),
                                 whole_piece_tokens=True)
    assert built.encode([b" hello", b" wonderful"]) == openai_compiled("o200k_base").encode([b" hello", b" wonderful"])
    assert len(kernel().merge_pieces.signatures) == 1
    built.merge_from([int(i) for i in enc.encode_ordinary(" wonderful")])  # (a list: as batch BPE's Python gives it)
    assert len(kernel().merge_from_parts.signatures) == 1


# ---- how the kernel comes into a process -------------------------------------------------------------------------

def run_python(program: str, **env: str) -> str:
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


PROGRAM = """
import sys
import types
from tokenizer import get_encoding
from tokenizer.fast import compiled_bpe

def new_words(first, count):  # distinct made-up words (i in base 26), one call each
    for i in range(first, first + count):
        n, word = i * 7919 + 1, " "
        while n:
            n, letter = divmod(n, 26)
            word += chr(97 + letter)
        enc.encode_ordinary(word)

enc = get_encoding("gpt2")
new_words(0, {count})
if {wait}:
    compiled_bpe.wait_until_loaded()
    new_words(10**7, 4000)  # enough new bytes for the core to report again, and take the kernel
print("numba" in sys.modules, enc.core.uses_compiled_bpe, compiled_bpe.status())
"""


def test_a_small_job_never_loads_the_kernel():
    assert run_python(PROGRAM.format(count=200, wait=False), TOKENIZER_COMPILED_BPE="auto") == \
        "False False not asked for"


def test_many_encodings_with_few_new_pieces_never_load_it():
    # what counts is the bytes merged in Python, not how many cores report
    program = ("import sys\nfrom tokenizer import Encoding, get_encoding\nbase = get_encoding('gpt2')\n"
               "for i in range(40):\n"
               "    enc = Encoding('gpt2', pat_str=base.pat_str, mergeable_ranks=base.token_ids, special_tokens={})\n"
               "    enc.encode_ordinary(' zqxv' + chr(97 + i % 26))\n"
               "    enc.encode_ordinary_batch(['qqzx' * 200])\n"
               "from tokenizer.fast import compiled_bpe\n"
               "print('numba' in sys.modules, compiled_bpe.status())")
    assert run_python(program, TOKENIZER_COMPILED_BPE="auto") == "False not asked for"


def test_a_large_job_loads_it_and_the_cores_take_it():
    # LOAD_AFTER_BYTES of new words in Python, then the kernel (waited for here, to see it taken)
    count = compiled_bpe.LOAD_AFTER_BYTES // 4
    assert run_python(PROGRAM.format(count=count, wait=True), TOKENIZER_COMPILED_BPE="auto") == "True True loaded"


ARRAY_PROGRAM = """
import sys
import types
from tokenizer import get_encoding
from tokenizer.fast import compiled_bpe
compiled_bpe.ARRAY_CHARACTERS_PER_BYTE = {per_byte}
text = open({path!r}, encoding="utf-8").read()[:2 * {size}]
enc = get_encoding("o200k_base")
enc.encode_ordinary(text[:{size}])
before = compiled_bpe.status()
if {wait}:
    import tiktoken
    compiled_bpe.wait_until_loaded()
    assert enc.encode_ordinary(text[{size}:]) == tiktoken.get_encoding("o200k_base").encode_ordinary(text[{size}:])
print("numba" in sys.modules, before, enc.core.uses_compiled_bpe, compiled_bpe.status())
"""


def test_a_one_off_long_text_does_not_load_it_but_a_long_job_of_them_does():
    # the array path (no Python BPE at all) counts its characters too, at ARRAY_CHARACTERS_PER_BYTE a byte: a
    # script's 2 MB stays far below the load; a job of long texts (here each character made worth a byte, so
    # that 300,000 of them are one) loads it, and the core's array path merges with the kernel from then on
    path = str(CORPUS / "en_docs.txt")
    one_off = ARRAY_PROGRAM.format(per_byte=compiled_bpe.ARRAY_CHARACTERS_PER_BYTE, path=path, size=2_000_000,
                                   wait=False)
    assert run_python(one_off, TOKENIZER_COMPILED_BPE="auto") == "False not asked for False not asked for"
    assert compiled_bpe.LOAD_AFTER_BYTES < 300_000
    long_job = ARRAY_PROGRAM.format(per_byte=1, path=path, size=300_000, wait=True)
    out = run_python(long_job, TOKENIZER_COMPILED_BPE="auto")
    assert out in ("True loading True loaded", "True compiling True loaded"), out


@pytest.mark.parametrize("route", ["array path", "piece cache"])
def test_batch_bpes_merges_one_at_a_time_count_as_bytes_merged_in_python(route, monkeypatch):
    # text without spaces under a vocabulary trained on such text: batch BPE finishes its long segments one merge
    # at a time, in Python (microseconds a part); counted as array characters (a 64th of a byte each), a job of
    # it ran some 16 MB, tens of seconds, before the kernel was asked for. Each part now counts as a byte.
    from test_batch_bpe import random_letters, trained_on_letters
    from tokenizer import Encoding
    from tokenizer.fast import batch_bpe

    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "auto")
    monkeypatch.setattr(compiled_bpe, "_merged_bytes", 0)  # (forgets what earlier tests in this process merged)
    monkeypatch.setattr(compiled_bpe, "LOAD_AFTER_BYTES", 20_000)
    asked = []
    monkeypatch.setattr(compiled_bpe, "start_loading", lambda: asked.append(batch_bpe.parts_merged_one_at_a_time()))
    monkeypatch.setattr(compiled_bpe.LOADER, "kernel", lambda: None)  # batch BPE merges, though a test loaded it
    trained = trained_on_letters()
    # a fresh core; CS336's rule (no whole-piece rule) has no array path: its batches' new pieces go to batch BPE
    enc = Encoding.from_vocab_merges({i: t for t, i in trained.token_ids.items()}, trained.merges,
                                     whole_piece_tokens=route == "array path")
    parts_before = batch_bpe.parts_merged_one_at_a_time()
    seeds = itertools.count()
    while not asked and batch_bpe.parts_merged_one_at_a_time() - parts_before < 30_000:
        if route == "array path":  # one long text (no safe cut: the checkpoint's route takes the array path)
            enc.encode_ordinary(random_letters(40_000, seed=next(seeds)))
        else:
            enc.encode_ordinary_batch([random_letters(10_000, seed=next(seeds)) for _ in range(2)])
    assert enc.core.last_route.name == ("CHECKPOINT" if route == "array path" else "PIECE_CACHE")
    # asked for once those parts added up to LOAD_AFTER_BYTES (with a few array characters): under 30,000 of them
    # (as characters, it took 64 times as many)
    assert asked, "the kernel was asked for"
    assert 15_000 < asked[0] - parts_before < 30_000


def test_off_keeps_python_and_on_loads_at_the_first_new_piece():
    assert run_python(PROGRAM.format(count=5, wait=False), TOKENIZER_COMPILED_BPE="0") == "False False not asked for"
    # "on": loading begins at the first new piece; waited for, the core takes it at its next report
    out = run_python(PROGRAM.format(count=5, wait=True), TOKENIZER_COMPILED_BPE="1")
    assert out == "True True loaded"


def test_without_numba_the_cores_stay_in_python():
    program = ("import importlib.util; find_spec = importlib.util.find_spec\n"
               "importlib.util.find_spec = lambda name, *a: None if name == 'numba' else find_spec(name, *a)\n"
               + PROGRAM.format(count=20, wait=True))
    out = run_python(program, TOKENIZER_COMPILED_BPE="1")
    assert out.startswith("False False numba is not installed"), out


def test_a_fork_waits_for_the_loading_thread():
    # the child encodes with the kernel the parent loaded, and neither hangs
    program = PROGRAM.format(count=5, wait=False) + """
import os
compiled_bpe.start_loading()
pid = os.fork()
if pid == 0:
    enc2 = get_encoding("gpt2")
    os._exit(0 if compiled_bpe.merged_in_python(0) is not None else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""
    assert run_python(program, TOKENIZER_COMPILED_BPE="1").splitlines()[-1] == "0"


@pytest.mark.parametrize("after", [0.0, 0.3])
def test_a_process_may_end_while_the_kernel_loads(after):
    # a one-off script with the kernel asked for at once ends before (or while) the thread has loaded it: the
    # interpreter's exit leaves the daemon thread, cleanly (exit status 0, nothing on stderr)
    program = PROGRAM.format(count=5, wait=False) + f"import time\ntime.sleep({after})\n"
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO), "TOKENIZER_COMPILED_BPE": "1"})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.split()[-1] in ("loading", "compiling")


def test_an_unwritable_cache_folder_compiles_in_memory_and_writes_nothing_beside_the_source(tmp_path):
    """numba's own fallback for a cache folder it cannot write is the source file's __pycache__, which for an
    installed package is inside site-packages: the kernel is compiled in memory instead, and said to be uncached."""
    source_folder = tmp_path / "package"
    source_folder.mkdir()
    (source_folder / "tiny_kernel.py").write_text("def add_one(x):\n    return x + 1\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a folder inside a file cannot be made, even by root
    program = (f"import sys; sys.path.insert(0, {str(source_folder)!r})\n"
               "from pathlib import Path\n"
               "import tiny_kernel\n"
               "from tokenizer import numba_cache\n"
               "uncached = []\n"
               f"add_one = numba_cache.compiled(tiny_kernel.add_one, Path({str(blocker / 'cache')!r}), uncached)\n"
               "print(add_one(41), uncached)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "['add_one']"]
    assert not (source_folder / "__pycache__").exists()


class _KernelArrivingMidCall:
    """A stand-in for the compiled kernel (any machine, numba or not), which arrives once batch BPE has merged
    ``after_parts`` parts one at a time in this thread; its merges are bpe.merge's and bpe.merge_from's, and it
    notes the bytes it is given to merge from the start, and the parts it is given to carry on from."""

    def __init__(self, trained, after_parts: int):
        from tokenizer.fast import batch_bpe

        self.merged_bytes: list[int] = []
        self.parts_carried_on: list[int] = []
        self.arrives_at = batch_bpe.parts_merged_one_at_a_time() + after_parts
        stand_in = self

        class CompiledBPE:
            def __init__(self, pairs, tokens, *, whole_piece_tokens):
                pass

            def encode_blob(self, blob, lengths):
                import numpy as np

                stand_in.merged_bytes.append(int(lengths.sum()))
                ends = np.cumsum(lengths).tolist()
                ids = self.encode([bytes(blob[end - size : end]) for end, size in zip(ends, lengths.tolist())])
                return np.array(sum(ids, ()), dtype=np.int32), np.array(list(map(len, ids)), dtype=np.int64)

            def encode(self, pieces):  # (plain BPE: what these tests give it needs no whole-piece rule)
                from tokenizer import bpe

                return [tuple(trained.token_ids[part] for part in bpe.merge(piece, trained.merge_ranks))
                        for piece in pieces]

            def merge_from(self, parts):
                import numpy as np

                from tokenizer import bpe

                stand_in.parts_carried_on.append(len(parts))
                token_bytes = {i: token for token, i in trained.token_ids.items()}
                merged = bpe.merge_from([token_bytes[i] for i in parts.tolist()], trained.merge_ranks)
                return np.array([trained.token_ids[part] for part in merged], dtype=np.int32)

        self.kernel = types.SimpleNamespace(CompiledBPE=CompiledBPE)

    def loaded(self):
        from tokenizer.fast import batch_bpe

        return self.kernel if batch_bpe.parts_merged_one_at_a_time() >= self.arrives_at else None


@pytest.mark.parametrize("route", ["array path", "piece cache"])
def test_a_kernel_that_arrives_during_a_long_call_merges_its_later_stalled_segments(route, monkeypatch):
    # 4 MB of letters without a newline under a vocabulary trained on such text is one call, one piece, one
    # segment: the core asked for the kernel only at the call's start, so the whole of it was merged one at a
    # time in Python (15-18 s) though the kernel arrived within a second. Batch BPE now asks before each stalled
    # segment, and while merging one.
    import tiktoken

    from test_batch_bpe import random_letters, trained_on_letters
    from tokenizer import Encoding, bpe
    from tokenizer.fast import batch_bpe

    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "auto")
    trained = trained_on_letters()
    enc = Encoding.from_vocab_merges({i: t for t, i in trained.token_ids.items()}, trained.merges,
                                     whole_piece_tokens=route == "array path")
    stand_in = _KernelArrivingMidCall(trained, after_parts=1)
    monkeypatch.setattr(compiled_bpe.LOADER, "kernel", stand_in.loaded)
    in_python_before = batch_bpe.parts_merged_one_at_a_time()
    texts = [random_letters(6_000, seed=seed) for seed in range(4)]  # segments of 6,000 parts, most of them stalled
    if route == "array path":  # one text, four pieces (each one segment)
        text = " ".join(texts)
        ids = enc.encode_ordinary(text)
        expected = tiktoken.Encoding("letters", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids),
                                     special_tokens={}).encode_ordinary(text)
        assert enc.core.last_route.name == "CHECKPOINT"
    else:  # one batch of four texts (each one piece, one segment); the reference rule is CS336's
        ids = enc.encode_ordinary_batch(texts)
        expected = [[trained.token_ids[part] for part in bpe.merge(text.encode(), trained.merge_ranks)]
                    for text in texts]
        assert enc.core.last_route.name == "PIECE_CACHE"
    assert ids == expected
    # the first stalled segment went to Python; once it was merged, the kernel was there, and the later ones
    # went to it, as the rounds had left them (from their 6,000 bytes before: the rounds' merges done again)
    assert 0 < batch_bpe.parts_merged_one_at_a_time() - in_python_before < 6_000
    assert stand_in.merged_bytes == []
    assert len(stand_in.parts_carried_on) >= 2 and all(0 < parts < 6_000 for parts in stand_in.parts_carried_on)


def test_a_kernel_that_arrives_while_a_segment_is_merged_in_python_takes_it_over(monkeypatch):
    # one stalled segment of megabytes is some seconds of Python: batch BPE asks again as it goes
    # (TELL_EVERY_MERGES), and hands the segment to a kernel that has come meanwhile, as far as it has merged it
    # (it handed over the segment's bytes, and the kernel did the rounds' merges and Python's again)
    import tiktoken

    from test_batch_bpe import random_letters, trained_on_letters
    from tokenizer import Encoding
    from tokenizer.fast import batch_bpe

    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "auto")
    monkeypatch.setattr(batch_bpe, "TELL_EVERY_MERGES", 500, raising=False)  # (absent before: then never told)
    trained = trained_on_letters()
    enc = Encoding.from_vocab_merges({i: t for t, i in trained.token_ids.items()}, trained.merges)
    stand_in = _KernelArrivingMidCall(trained, after_parts=1)  # (at the first tell)
    monkeypatch.setattr(compiled_bpe.LOADER, "kernel", stand_in.loaded)
    text = random_letters(20_000, seed=7)
    before = batch_bpe.parts_merged_one_at_a_time()
    ids = enc.encode_ordinary(text)
    oracle = tiktoken.Encoding("letters", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens={})
    assert ids == oracle.encode_ordinary(text)
    assert batch_bpe.parts_merged_one_at_a_time() - before == 500  # (Python stopped at the first tell)
    assert stand_in.merged_bytes == [] and len(stand_in.parts_carried_on) == 1
    assert stand_in.parts_carried_on[0] < 20_000 - 500  # (the rounds' merges, and Python's 500, not done again)
