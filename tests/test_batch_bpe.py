"""Batch BPE (NumPy rounds over many pieces) against the per-piece oracle, bpe.merge."""

from __future__ import annotations

import doctest
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.fast.batch_bpe as batch_bpe
import tokenizer.fast.core as fast_core
from conftest import CORPUS, CORPUS_FILES, FUZZ_EXAMPLES
from tokenizer import Encoding, bpe, get_encoding
from tokenizer.patterns import NEWER_THAN_TIKTOKEN
from tokenizer.pretokenize import compile_pattern



def oracle(pieces: list[bytes], merge_ranks, token_ids) -> list[tuple[int, ...]]:
    return [tuple(token_ids[p] for p in bpe.merge(piece, merge_ranks)) for piece in pieces]


def python_pair_table(merge_ranks, token_ids) -> dict[tuple[int, int], tuple[int, int]]:
    """(left id, right id) -> (rank, merged id), the slow obvious way."""
    pairs = {}
    for token, rank in merge_ranks.items():
        for k in range(1, len(token)):
            left, right = token_ids.get(token[:k]), token_ids.get(token[k:])
            if left is not None and right is not None:
                pairs[left, right] = (rank, token_ids[token])
    return pairs


def test_docstring_examples():
    assert doctest.testmod(batch_bpe).failed == 0


# Three letters and few ranks: ties (one rank for several tokens) and long merge chains are common.
letters = st.binary(min_size=0, max_size=30).map(lambda b: bytes(x % 3 + 97 for x in b))
small_tables = st.dictionaries(
    st.binary(min_size=2, max_size=6).map(lambda b: bytes(x % 3 + 97 for x in b)), st.integers(0, 12), max_size=30
)


def small_vocab(merge_ranks: dict[bytes, int]) -> dict[bytes, int]:
    token_ids = {bytes([b]): b for b in range(256)}
    for i, token in enumerate(sorted(merge_ranks)):
        token_ids[token] = 256 + i
    return token_ids


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.lists(letters, max_size=40), small_tables)
def test_equals_merge_on_random_tie_heavy_tables(pieces, merge_ranks):
    token_ids = small_vocab(merge_ranks)
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, merge_ranks, token_ids)


def test_huge_ranks_are_renumbered_keeping_order_and_ties():
    merge_ranks = {b"ab": 10**15, b"bc": 10**15, b"abc": 10**15 + 1, b"ca": -5}
    token_ids = small_vocab(merge_ranks)
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    assert table.no_merge == 3
    pieces = [b"abcab", b"cabc", b"bcab", b"abca"]
    assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, merge_ranks, token_ids)


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(small_tables.map(lambda t: {k: v * 10**12 for k, v in t.items()}))
def test_pair_table_lists_exactly_the_joinable_pairs(merge_ranks):
    token_ids = small_vocab(merge_ranks)
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    expected = python_pair_table(merge_ranks, token_ids)
    got = batch_bpe.pairs_of(table)
    assert got.keys() == expected.keys()
    # ranks are renumbered densely: the order (and ties) must be kept
    pairs = sorted(expected)
    assert np.array_equal(
        np.argsort([got[p][0] for p in pairs], kind="stable"), np.argsort([expected[p][0] for p in pairs], kind="stable")
    )
    assert all(got[p][1] == expected[p][1] for p in pairs)


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_pair_table_of_openai_ranks_equals_the_obvious_one(name):
    enc = get_encoding(name)
    table = batch_bpe.build_pair_table(enc.merge_ranks, enc.token_ids)
    expected = python_pair_table(enc.merge_ranks, enc.token_ids)
    assert batch_bpe.pairs_of(table) == expected  # small ranks are kept as they are


@functools.cache
def openai_pair_table(name: str):
    """Built once per session: hypothesis runs the test below thousands of times."""
    enc = get_encoding(name)
    return batch_bpe.build_pair_table(enc.merge_ranks, enc.token_ids)


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(st.lists(st.text(max_size=40), max_size=30), st.sampled_from(["gpt2", "cl100k_base", "o200k_base"]))
def test_equals_merge_on_openai_ranks(texts, name):
    enc = get_encoding(name)
    pieces = [t.encode("utf-8", "surrogatepass") for t in texts]
    table = openai_pair_table(name)
    assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, enc.merge_ranks, enc.token_ids)


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_every_distinct_piece_of_the_corpora(name):
    enc = get_encoding(name)
    table = batch_bpe.build_pair_table(enc.merge_ranks, enc.token_ids)
    split = compile_pattern(enc.pat_str).split_reference
    pieces = set()
    for path in [CORPUS / name for name in CORPUS_FILES]:
        pieces.update(split(path.read_text(encoding="utf-8", errors="replace")[:400_000]))
    data = sorted(p.encode("utf-8") for p in pieces)
    assert batch_bpe.encode_pieces(data, table) == oracle(data, enc.merge_ranks, enc.token_ids)


def test_vocabularies_without_distinct_part_ids_have_no_table():
    token_ids = {bytes([b]): b for b in range(256)}
    assert batch_bpe.build_pair_table({b"ab": 0}, {**token_ids, b"ab": 97}) is None  # id 97 twice
    del token_ids[b"z"]
    assert batch_bpe.build_pair_table({b"ab": 0}, {**token_ids, b"ab": 256}) is None  # no single-byte "z"


def many_pieces_text(n: int = 200) -> str:
    return " ".join(f"w{i}x{i * 7919 % 1000}qz" for i in range(n)) + " 你好世界，这是一个测试句子。"


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_encoding_uses_the_batch_and_stays_exact(name, monkeypatch):
    import tiktoken

    monkeypatch.setattr(fast_core, "BATCH_MIN_BYTES", 1)  # (many new pieces, short ones: a batch however few bytes)
    monkeypatch.setattr(fast_core, "BATCH_MIN_CHARS", 1)  # (however short the text)
    enc = get_encoding(name)
    fresh = Encoding(name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)
    text = many_pieces_text()
    assert fresh.encode_ordinary(text) == tiktoken.get_encoding(name).encode_ordinary(text)
    assert fresh.core._pair_table  # the batch ran (a cold call with many new pieces)
    # and the per-piece path agrees
    monkeypatch.setattr(fast_core, "BATCH_MIN_CHARS", 10**9)
    monkeypatch.setattr(fast_core, "BATCH_MIN_BYTES", 10**9)
    slow = Encoding(name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)
    assert slow.encode_ordinary(text) == fresh.encode_ordinary(text)
    assert not slow.core._pair_table


@pytest.mark.parametrize("whole_piece_tokens", [True, False])
def test_batch_respects_whole_piece_tokens(whole_piece_tokens, monkeypatch):
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc", 258: b" ab"}
    merges = [(b"a", b"b"), (b" ", b"ab")]
    text = " ".join(["abc"] + [f"ab{i}" for i in range(fast_core.BATCH_MIN_CHARS // 4 + fast_core.BATCH_MIN_BYTES)])
    fast = Encoding.from_vocab_merges(vocab, merges, whole_piece_tokens=whole_piece_tokens)
    ids = fast.encode(text)
    assert fast.core._pair_table
    assert ids[:1] == ([257] if whole_piece_tokens else [256])
    monkeypatch.setattr(fast_core, "BATCH_MIN_CHARS", 10**9)
    monkeypatch.setattr(fast_core, "BATCH_MIN_BYTES", 10**9)
    slow = Encoding.from_vocab_merges(vocab, merges, whole_piece_tokens=whole_piece_tokens)
    assert slow.encode(text) == ids


def test_vocabulary_without_a_table_falls_back_to_merge():
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"ba": 256}  # two tokens, one id
    enc = Encoding("dup", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
    text = " ".join(["ab", "ba"] + [f"aba{i}" for i in range(fast_core.BATCH_MIN_CHARS // 4 + fast_core.BATCH_MIN_BYTES)])
    assert enc.encode_ordinary(text)[:5] == [256, 32, 256, 32, 256]
    assert enc.core._pair_table is False


runs = st.lists(st.tuples(st.sampled_from([b"a", b"b", b"ab", b"aab", b" ", b"^", b"\xe4\xbd\xa0"]), st.integers(1, 300)),
                min_size=1, max_size=4).map(lambda chunks: b"".join(unit * n for unit, n in chunks))


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(st.lists(runs, min_size=1, max_size=5), small_tables)
def test_long_runs_equal_merge_on_random_tie_heavy_tables(pieces, merge_ranks):
    # runs are where a round joins a chain of tied pairs (batch_bpe._chain_after_lowest)
    pieces = [bytes(x % 3 + 97 if x > 32 else x for x in p) for p in pieces]
    token_ids = small_vocab(merge_ranks)
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, merge_ranks, token_ids)


RUN_NAMES = ["gpt2", "cl100k_base", "o200k_base"]
RUN_UNITS = [b"a", b"^", b" ", b"\n", b"ab", b"aab", b"0", b"\xe4\xbd\xa0", b"=-"]


# Every unit under every encoding; the everyday tier takes each unit under one of them, in turn (three units each)
@pytest.mark.parametrize("unit, name", [
    pytest.param(unit, name, marks=() if i % len(RUN_NAMES) == k else pytest.mark.exhaustive)
    for i, unit in enumerate(RUN_UNITS) for k, name in enumerate(RUN_NAMES)])
def test_runs_equal_merge_on_openai_ranks(name, unit):
    enc = get_encoding(name)
    table = batch_bpe.build_pair_table(enc.merge_ranks, enc.token_ids)
    pieces = [unit * n for n in (1, 2, 3, 5, 8, 13, 64, 65, 999, 1000, 4097)] + [b"x" + unit * 777 + b"y"]
    assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, enc.merge_ranks, enc.token_ids)


# ---- the Encoding's batch path (every new piece of a call through encode_pieces) against tiktoken ----------

ENCODINGS = ["gpt2", "cl100k_base", "o200k_base"]


def fresh_encoding(name: str) -> Encoding:
    enc = get_encoding(name)
    return Encoding(name, pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)


@functools.cache
def _one_fresh_encoding(name: str) -> Encoding:
    return fresh_encoding(name)


def emptied_encoding(name: str) -> Encoding:
    """One fresh Encoding per name for the whole session, its piece caches emptied before each use: as cold
    as a new one, without rebuilding it for each of hypothesis's thousands of examples."""
    enc = _one_fresh_encoding(name)
    enc.core._cache.clear()
    enc.core._part_cache.clear()
    return enc


@pytest.fixture
def always_batch(monkeypatch):
    """Every call takes the batch, however few or short its new pieces."""
    monkeypatch.setattr(fast_core, "BATCH_MIN_CHARS", 1)
    monkeypatch.setattr(fast_core, "BATCH_MIN_BYTES", 1)


@pytest.mark.parametrize("name", ENCODINGS)
def test_cold_calls_equal_tiktoken_on_every_corpus(name):
    import tiktoken

    oracle = tiktoken.get_encoding(name)
    for path in [CORPUS / name for name in CORPUS_FILES]:
        text = path.read_bytes()[:300_000].decode("utf-8", errors="ignore")
        ours = fresh_encoding(name)
        assert ours.encode(text, allowed_special="all") == oracle.encode(text, allowed_special="all"), path.name
        assert ours.core._pair_table, "the batch ran"
        assert fresh_encoding(name).encode_ordinary(text) == oracle.encode_ordinary(text), path.name


newer_letters = st.sampled_from([chr(a) for a, _ in NEWER_THAN_TIKTOKEN] + [chr(b) for _, b in NEWER_THAN_TIKTOKEN])
mixed_texts = st.lists(
    st.one_of(
        st.sampled_from(["hello", " world", "中文", "日本語", "Привет", "١٢٣", "'s", "\r\n", "  ", "\ud800", "😀",
                         "<|endoftext|>", "<|endofprompt|>", "e\u0301", "ſ"]),
        newer_letters,
        st.tuples(st.sampled_from(["a", " ", "^", "ab", "中", "\n", "0"]), st.integers(1, 200)).map(lambda t: t[0] * t[1]),
        st.text(max_size=10),
        st.characters(codec=None),
    ),
    max_size=30,
).map("".join)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.lists(mixed_texts, min_size=1, max_size=6), st.sampled_from(ENCODINGS))
def test_fuzz_batches_equal_tiktoken(texts, name):
    import tiktoken

    oracle = tiktoken.get_encoding(name)
    saved = fast_core.BATCH_MIN_CHARS, fast_core.BATCH_MIN_BYTES
    fast_core.BATCH_MIN_CHARS = fast_core.BATCH_MIN_BYTES = 1  # hypothesis: no fixtures per example
    try:
        ours = emptied_encoding(name)
        assert ours.encode_ordinary_batch(texts) == oracle.encode_ordinary_batch(texts)
        ours = emptied_encoding(name)
        assert ours.encode_batch(texts, allowed_special="all") == oracle.encode_batch(texts, allowed_special="all")
        ours = emptied_encoding(name)
        assert ours.encode(texts[0], disallowed_special=()) == oracle.encode(texts[0], disallowed_special=())
    finally:
        fast_core.BATCH_MIN_CHARS, fast_core.BATCH_MIN_BYTES = saved


SPECIAL_TEXT = "a<|endoftext|>b <|endofprompt|> c<|fim_prefix|>中文<|endoftext|>"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize(
    "allowed, disallowed",
    [(set(), ()), ("all", ()), ({"<|endoftext|>"}, ()), ("all", "all"), (set(), "all"), ({"<|endoftext|>"}, "all"),
     ({"<|endoftext|>"}, {"<|endofprompt|>"}), (set(), {"<|fim_prefix|>"})],
)
def test_special_token_matrix_through_the_batch(name, allowed, disallowed, always_batch):
    import tiktoken

    oracle = tiktoken.get_encoding(name)
    texts = [SPECIAL_TEXT, "plain text", SPECIAL_TEXT * 3, ""]
    kwargs = {"allowed_special": allowed, "disallowed_special": disallowed}
    try:
        expected = oracle.encode_batch(texts, **kwargs)
    except ValueError as e:
        with pytest.raises(ValueError, match="disallowed"):
            fresh_encoding(name).encode_batch(texts, **kwargs)
        assert "disallowed" in str(e) or "special" in str(e)
        return
    assert fresh_encoding(name).encode_batch(texts, **kwargs) == expected
    assert [fresh_encoding(name).encode(t, **kwargs) for t in texts] == expected


def test_a_batch_of_texts_runs_one_batch(monkeypatch):
    texts = [many_pieces_text(40) + f" text{i}qq" for i in range(5)]  # each text alone is too small for a batch
    expected = [get_encoding("gpt2").encode_ordinary(t) for t in texts]
    monkeypatch.setattr(fast_core, "BATCH_MIN_BYTES", 1)  # (this test is about how many batches, not their size)
    monkeypatch.setattr(fast_core, "BATCH_MIN_CHARS", 1)  # (nor about how short a call may be for one pass)
    enc = fresh_encoding("gpt2")
    calls = []
    real = batch_bpe.encode_pieces
    monkeypatch.setattr(batch_bpe, "encode_pieces", lambda pieces, *rest: calls.append(len(pieces)) or real(pieces, *rest))
    assert enc.encode_ordinary_batch(texts) == expected
    assert len(calls) == 1


def test_the_piece_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(fast_core, "PIECE_CACHE_LIMIT", 256)
    enc = fresh_encoding("gpt2")
    text = many_pieces_text(1000)  # about 1000 distinct pieces: more than the cache may hold
    assert enc.encode_ordinary(text) == get_encoding("gpt2").encode_ordinary(text)
    assert len(enc.core._cache) <= 256
    for i in range(5):
        enc.encode_ordinary(many_pieces_text(300) + f" more{i}zz")
        assert len(enc.core._cache) <= 256


def test_a_call_with_new_pieces_does_not_walk_the_piece_cache(monkeypatch):
    """Finding the new pieces of a call costs the call's pieces, not the cache's size (set.difference with a
    dict subclass iterates the whole dict: a big warm cache made every such call slow)."""
    enc = fresh_encoding("gpt2")
    enc.encode("warm the cache up", allowed_special="all")

    def walk(cache):
        raise AssertionError("the piece cache was walked")

    monkeypatch.setattr(type(enc.core._cache), "__iter__", walk)
    assert enc.encode("new words <|endoftext|> more", allowed_special="all") == get_encoding("gpt2").encode(
        "new words <|endoftext|> more", allowed_special="all")
    assert enc.encode_ordinary_batch(["other new words", "and more"]) == get_encoding("gpt2").encode_ordinary_batch(
        ["other new words", "and more"])


# ---- the character-window rule (batch_bpe.char_windows_cross) --------------------------------------------


def reference_windows(merge_ranks) -> set[tuple[bytes, bytes]]:
    """Every window of every mergeable token, the readable way: the bytes on either side of each character start
    inside it, up to the next character start or the token's end."""
    windows = set()
    for token in merge_ranks:
        starts = [i for i, b in enumerate(token) if i == 0 or not 0x80 <= b < 0xC0] + [len(token)]
        for k in range(1, len(starts) - 1):
            windows.add((token[starts[k - 1] : starts[k]], token[starts[k] : starts[k + 1]]))
    return windows


def reference_crosses(text: bytes, windows) -> tuple[list[int], list[bool]]:
    """(the last byte before each boundary between two characters of ``text`` (past its first three bytes) that
    is not between two ASCII bytes, whether some window is (a suffix of the one before, a prefix of the one after))."""
    starts = [i for i, b in enumerate(text) if not 0x80 <= b < 0xC0] + [len(text)]
    last_bytes, crosses = [], []
    for k in range(1, len(starts) - 1):
        before, after = text[starts[k - 1] : starts[k]], text[starts[k] : starts[k + 1]]
        if starts[k] - 1 < 3 or (len(before) == len(after) == 1 and before < b"\x80" and after < b"\x80"):
            continue
        last_bytes.append(starts[k] - 1)
        crosses.append(any((before[i:], after[:j]) in windows for i in range(len(before)) for j in range(1, len(after) + 1)))
    return last_bytes, crosses


def check_windows(text: bytes, merge_ranks, token_ids) -> tuple[int, int, int]:
    """(boundaries, cut by the reference, kept although the reference cuts): asserts none is cut that a window
    crosses."""
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    last_bytes, expected = reference_crosses(text, reference_windows({t: r for t, r in merge_ranks.items() if len(t) > 1}))
    got = batch_bpe.char_windows_cross(table, np.frombuffer(text + bytes(8), dtype=np.uint8),
                                       np.array(last_bytes, dtype=np.int64)).tolist()
    missed = [i for i, (e, g) in enumerate(zip(expected, got)) if e and not g]
    assert not missed, [(text[max(0, last_bytes[i] - 3) : last_bytes[i] + 5]) for i in missed[:5]]
    return len(expected), expected.count(False), sum(g and not e for e, g in zip(expected, got))


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_char_windows_never_cut_what_a_token_spans_on_the_corpora(name):
    enc = get_encoding(name)
    boundaries = cut = kept = 0
    for path in [CORPUS / name for name in CORPUS_FILES]:
        text = path.read_bytes()[:60_000].decode("utf-8", errors="ignore").encode()
        b, c, k = check_windows(text, enc.merge_ranks, enc.token_ids)
        boundaries, cut, kept = boundaries + b, cut + c, kept + k
    assert cut > boundaries // 10  # the rule cuts (most CJK boundaries, for o200k)
    assert kept <= cut // 50  # and its bit set seldom keeps a boundary the exact rule would cut


# Characters of 1 to 4 bytes, some sharing first bytes: tokens cut from them hold whole characters and parts.
multibyte_alphabet = "aé€𝐀ぁあ中ёж"
multibyte_text = st.text(alphabet=multibyte_alphabet, min_size=1, max_size=60)


@st.composite
def fragment_vocabularies(draw):
    """Tiktoken-style ranks (rank = id) whose tokens are byte slices of random text: many begin or end inside a
    character, so every kind of window is there."""
    source = draw(multibyte_text).encode()
    cuts = draw(st.lists(st.tuples(st.integers(0, len(source)), st.integers(2, 9)), max_size=40))
    tokens = {source[i : i + n] for i, n in cuts if len(source[i : i + n]) >= 2}
    ranks = {bytes([b]): b for b in range(256)}
    for token in draw(st.permutations(sorted(tokens))):
        ranks.setdefault(token, len(ranks))
    return ranks


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(fragment_vocabularies(), multibyte_text)
def test_char_windows_never_cut_what_a_token_spans_on_fragment_vocabularies(ranks, text):
    check_windows(("ab" + text).encode(), ranks, ranks)


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(fragment_vocabularies(), st.lists(multibyte_text, min_size=1, max_size=8))
def test_pieces_cut_by_char_windows_equal_merge(ranks, texts):
    from tokenizer.fast.array_encode import TokenTables, encode_split_text
    from tokenizer.fast.piece_arrays import PieceTable, code_points

    table = batch_bpe.build_pair_table(ranks, ranks)
    tables = TokenTables(PieceTable(ranks), table)
    text = "".join(texts)
    lengths = [len(t) for t in texts]
    starts = np.cumsum([0] + lengths[:-1])
    expected = []
    for piece in texts:
        data = piece.encode()
        expected += [ranks[data]] if data in ranks else [ranks[p] for p in bpe.merge(data, ranks)]
    assert encode_split_text(text, code_points(text), starts, tables).tolist() == expected


def test_japanese_goes_to_the_rounds_in_short_segments(monkeypatch):
    # o200k's pieces of Japanese are whole runs of kana and kanji, which the byte-pair rule seldom cuts; the
    # character windows cut most of them, so batch BPE sees few distinct bytes.
    enc = fresh_encoding("o200k_base")
    text = (CORPUS / "ja_manpages.txt").read_text(encoding="utf-8")[:200_000]
    seen = []
    encode_blob = batch_bpe.encode_blob
    monkeypatch.setattr("tokenizer.fast.array_encode.encode_blob",
                        lambda blob, lengths, *rest: seen.append(lengths) or encode_blob(blob, lengths, *rest))
    assert enc.encode_ordinary(text) == get_encoding("o200k_base").encode_ordinary(text)
    in_rounds = sum(int(lengths.sum()) for lengths in seen)
    assert 0 < in_rounds < len(text.encode()) // 8  # (the byte-pair rule alone sends about 45%)


# ---- segments the rounds hardly shorten: finished one merge at a time -------------------------------------


def random_letters(size: int, seed: int) -> str:
    """Text without spaces over ten letters: one pre-token, which a vocabulary trained on such text keeps in one
    segment (every byte pair is inside some token)."""
    rng = np.random.default_rng(seed)
    return bytes(rng.integers(97, 107, size=size, dtype=np.uint8)).decode("ascii")


@functools.cache
def trained_on_letters() -> Encoding:
    """A vocabulary as a user trains it on text without spaces (train_bpe, 50 KB of random letters)."""
    import tempfile

    from tokenizer import train_bpe

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/letters.txt"
        with open(path, "w", encoding="ascii") as file:
            file.write(random_letters(50_000, seed=0))
        vocab, merges = train_bpe(path, 1000, num_workers=1, progress=False)
    return Encoding.from_vocab_merges(vocab, merges, name="letters")


def test_a_long_piece_of_a_vocabulary_trained_without_spaces_takes_few_rounds(monkeypatch):
    # 100 KB of one piece took 15-20 s here (thousands of rounds joining a pair or two each), 0.2 s with the
    # segment finished one merge at a time once the rounds stall; tiktoken gives the ids. The work is counted,
    # not timed: the rounds (each a pass over every part, three look-ups of pairs) and the heap's operations
    # (one push per pair at the start and at most two per merge, one pop each: linear in the piece's length).
    import heapq

    import tiktoken

    monkeypatch.setenv("TOKENIZER_COMPILED_BPE", "0")  # batch BPE's NumPy rounds, not the compiled kernel
    lookups, heap_operations = [], []
    counted = batch_bpe.lookup_pairs
    monkeypatch.setattr(batch_bpe, "lookup_pairs", lambda *args: lookups.append(1) or counted(*args))
    def counting(operation, cost):
        def counted_operation(heap, *entry):
            heap_operations.append(cost(heap))
            return operation(heap, *entry)
        return counted_operation

    monkeypatch.setattr(heapq, "heapify", counting(heapq.heapify, len))  # (linear in the entries)
    monkeypatch.setattr(heapq, "heappush", counting(heapq.heappush, lambda heap: 1))
    monkeypatch.setattr(heapq, "heappop", counting(heapq.heappop, lambda heap: 1))
    trained = trained_on_letters()
    enc = Encoding.from_vocab_merges({i: t for t, i in trained.token_ids.items()}, trained.merges)  # a fresh core
    text = random_letters(100_000, seed=1)
    ids = enc.encode_ordinary(text)
    monkeypatch.undo()  # (tiktoken's own work below is not counted)
    oracle = tiktoken.Encoding("letters", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens={})
    assert ids == oracle.encode_ordinary(text)
    assert len(lookups) < 500  # (three per round: thousands before)
    assert 0 < sum(heap_operations) < 6 * len(text)  # (the stalled piece went to the heap: some 70,000)


def test_a_stalled_segment_finished_one_merge_at_a_time_equals_the_reference(monkeypatch):
    # the hand-over on short pieces, where merge_reference (the readable oracle) is quick enough
    monkeypatch.setattr(batch_bpe, "LONG_SEGMENT_PARTS", 16)
    handed_over = []
    one_at_a_time = batch_bpe._merge_one_at_a_time
    monkeypatch.setattr(batch_bpe, "_merge_one_at_a_time",
                        lambda parts, *rest: handed_over.append(len(parts)) or one_at_a_time(parts, *rest))
    trained = trained_on_letters()
    pieces = [random_letters(size, seed).encode() for seed, size in enumerate([17, 100, 600, 1500])]
    table = batch_bpe.build_pair_table(trained.merge_ranks, trained.token_ids)
    ids = trained.token_ids
    expected = [tuple(ids[part] for part in bpe.merge_reference(piece, trained.merge_ranks)) for piece in pieces]
    assert batch_bpe.encode_pieces(pieces, table) == expected
    assert len(handed_over) == 2  # the two longest stalled (a round joined a pair or two of either)


@settings(max_examples=max(FUZZ_EXAMPLES // 3, 100), deadline=None)
@given(st.lists(st.one_of(letters, runs), min_size=1, max_size=5), small_tables)
def test_segments_handed_over_after_one_round_equal_merge_on_tie_heavy_tables(pieces, merge_ranks):
    # every segment of two parts or more leaves the rounds after its first: the heap goes on from the rounds' parts
    pieces = [bytes(x % 3 + 97 if x > 32 else x for x in p) for p in pieces]
    token_ids = small_vocab(merge_ranks)
    table = batch_bpe.build_pair_table(merge_ranks, token_ids)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(batch_bpe, "LONG_SEGMENT_PARTS", 2)
        patch.setattr(batch_bpe, "STALLED_PARTS_PER_JOIN", 0)  # (a segment stalls whatever its round joined)
        assert batch_bpe.encode_pieces(pieces, table) == oracle(pieces, merge_ranks, token_ids)
