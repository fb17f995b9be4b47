"""``tokenizer.Tokenizer`` (CS336's interface): CS336's published behaviours, reading its files, and the
merges-only rule (``whole_piece_tokens=False``) against two references: ``bpe.merge_reference`` on each
pre-token, and CS336's own description (each merge in turn, applied left to right)."""

from __future__ import annotations

import doctest
import os
import pickle
import subprocess
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import tokenizer.cs336
import tokenizer.fast.core
from conftest import CORPUS, CORPUS_FILES, ENCODINGS_DIR, FUZZ_EXAMPLES, corpus_text
from tokenizer import Encoding, Tokenizer, bpe, train_bpe
from tokenizer.pretokenize import GPT2_PATTERN, compile_pattern

EOT = "<|endoftext|>"
GPT2_VOCAB = ENCODINGS_DIR / "gpt2" / "encoder.json"
GPT2_MERGES = ENCODINGS_DIR / "gpt2" / "vocab.bpe"
BYTES = {i: bytes([i]) for i in range(256)}
split_pretokens = compile_pattern(GPT2_PATTERN).split


@pytest.fixture(scope="module", autouse=True)
def cut_from_the_first_long_piece():
    # The fast core cuts long non-ASCII pieces where no merge crosses only after meeting several (a new Tokenizer
    # here meets a few): from the first one in this module, so that its tests run that path too.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tokenizer.fast.core, "UNCROSSABLE_AFTER", 1)
        yield


@pytest.fixture(scope="module")
def gpt2() -> Tokenizer:
    return Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES, special_tokens=[EOT])


@pytest.fixture(scope="module")
def oracle():
    return tiktoken.get_encoding("gpt2")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(vocab, merges, pickled vocab path, pickled merges path) from train_bpe on 300 KB of en_docs."""
    folder = tmp_path_factory.mktemp("trained")
    corpus = folder / "corpus.txt"
    corpus.write_bytes((CORPUS / "en_docs.txt").read_bytes()[:300_000])
    vocab, merges = train_bpe(corpus, 1000, [EOT], progress=False, num_workers=1)
    vocab_path, merges_path = folder / "vocab.pkl", folder / "merges.pkl"
    with open(vocab_path, "wb") as f:
        pickle.dump(vocab, f)
    with open(merges_path, "wb") as f:
        pickle.dump(merges, f)
    return vocab, merges, vocab_path, merges_path


def test_docstring_examples():
    assert doctest.testmod(tokenizer.cs336).failed == 0


# ---- the merges-only rule ----------------------------------------------------------------------------------


def test_a_token_no_merge_makes_is_never_produced():
    vocab = BYTES | {256: b"ab", 257: b"abc"}
    merges = [(b"a", b"b")]
    assert Tokenizer(vocab, merges).encode("abc") == [256, 99]
    assert Tokenizer(vocab, merges).encode("abc abc") == [256, 99, 32, 256, 99]
    assert not Tokenizer(vocab, merges).encoding.whole_piece_tokens
    # tiktoken's rule stays Encoding's default: a pre-token that is a token is that token
    assert Encoding.from_vocab_merges(vocab, merges).encode("abc") == [257]
    assert Encoding.from_vocab_merges(vocab, merges).whole_piece_tokens


def test_the_rule_holds_on_the_long_non_ascii_path():
    # A non-ASCII piece of 8+ bytes is cut where no merge can cross (uncrossable.split_uncrossable) before BPE: that
    # path must not take a whole piece that is a token either.
    piece = "éééé"  # 8 bytes, one pre-token
    vocab = BYTES | {256: "é".encode(), 257: piece.encode()}
    merges = [(b"\xc3", b"\xa9")]
    assert Tokenizer(vocab, merges).encode(piece) == [256] * 4
    assert Encoding.from_vocab_merges(vocab, merges).encode(piece) == [257]


def test_the_rule_survives_pickling_the_encoding():
    vocab = BYTES | {256: b"ab", 257: b"abc"}
    enc = pickle.loads(pickle.dumps(Encoding.from_vocab_merges(vocab, [(b"a", b"b")], whole_piece_tokens=False)))
    assert not enc.whole_piece_tokens
    assert enc.encode("abc") == [256, 99]


def apply_merge(parts: list[bytes], pair: tuple[bytes, bytes]) -> list[bytes]:
    """Join every occurrence of ``pair`` in ``parts``, left to right."""
    out, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
            out.append(parts[i] + parts[i + 1])
            i += 2
        else:
            out.append(parts[i])
            i += 1
    return out


def sweep_reference(piece: bytes, merges: list[tuple[bytes, bytes]]) -> list[bytes]:
    """CS336's description, literally: each merge in the order learned, over the whole pre-token."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    for pair in merges:
        parts = apply_merge(parts, pair)
    return parts


def rank_reference(merges: list[tuple[bytes, bytes]]):
    """bpe.merge_reference with the merges ranked by the bytes they make (a repeated result keeps its first rank)."""
    ranks: dict[bytes, int] = {}
    for rank, (left, right) in enumerate(merges):
        ranks.setdefault(left + right, rank)
    return lambda piece: bpe.merge_reference(piece, ranks)


def reference_ids(text: str, vocab: dict[int, bytes], split_piece) -> list[int]:
    token_ids = {t: i for i, t in reversed(vocab.items())}  # bytes held by two ids: the first id
    return [token_ids[part] for piece in split_pretokens(text) for part in split_piece(piece.encode("utf-8"))]


def train_merges(corpus: str, n_merges: int) -> list[tuple[bytes, bytes]]:
    """Merges learned from ``corpus`` the plain way (most frequent pair; ties go to the greater pair)."""
    words = Counter(tuple(bytes([b]) for b in piece.encode("utf-8")) for piece in split_pretokens(corpus))
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = max(pairs, key=lambda pair: (pairs[pair], pair))
        merges.append(best)
        merged = Counter()
        for word, n in words.items():
            merged[tuple(apply_merge(list(word), best))] += n
        words = merged
    return merges


ALPHABET = "ab \n中é!"  # "中" and "é" make non-ASCII pieces long enough for the split_uncrossable path


def add_unreachable(vocab: dict[int, bytes], texts: list[str]) -> dict[int, bytes]:
    for text in texts:
        if text.encode("utf-8") not in vocab.values():
            vocab[len(vocab)] = text.encode("utf-8")
    return vocab


@st.composite
def trained_vocabs(draw):
    """A vocab and merges trained on a random corpus, plus tokens the merges cannot make: random strings and
    pre-tokens of the corpus (the ones text is likeliest to hold whole)."""
    corpus = draw(st.text(alphabet=ALPHABET, min_size=1, max_size=60))
    merges = train_merges(corpus, draw(st.integers(0, 12)))
    vocab = BYTES | {256 + rank: left + right for rank, (left, right) in enumerate(merges)}
    extra = draw(st.lists(st.text(alphabet=ALPHABET, min_size=2, max_size=6), max_size=6))
    extra += draw(st.lists(st.sampled_from(split_pretokens(corpus)), max_size=4))
    return add_unreachable(vocab, extra), merges, corpus


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(trained_vocabs(), st.text(alphabet=ALPHABET, max_size=40), st.booleans())
def test_trained_vocab_with_unreachable_tokens_matches_both_references(vocab_merges_corpus, text, from_corpus):
    vocab, merges, corpus = vocab_merges_corpus
    if from_corpus:
        text = corpus + text  # text made of the corpus's own pre-tokens
    ids = Tokenizer(vocab, merges).encode(text)
    assert ids == reference_ids(text, vocab, rank_reference(merges))
    assert ids == reference_ids(text, vocab, lambda piece: sweep_reference(piece, merges))


@st.composite
def random_merge_lists(draw):
    """Any merge list over tokens that exist when it is listed (even ones a trainer would never produce)."""
    tokens = sorted({bytes([b]) for b in ALPHABET.encode("utf-8")})
    merges = []
    for _ in range(draw(st.integers(0, 10))):
        pair = (draw(st.sampled_from(tokens)), draw(st.sampled_from(tokens)))
        merges.append(pair)
        tokens.append(pair[0] + pair[1])
    vocab = dict(BYTES)
    for left, right in merges:
        if left + right not in vocab.values():
            vocab[len(vocab)] = left + right
    extra = draw(st.lists(st.text(alphabet=ALPHABET, min_size=2, max_size=6), max_size=6))
    return add_unreachable(vocab, extra), merges


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(random_merge_lists(), st.text(alphabet=ALPHABET, max_size=40))
def test_any_merge_list_is_applied_by_rank(vocab_merges, text):
    vocab, merges = vocab_merges
    assert Tokenizer(vocab, merges).encode(text) == reference_ids(text, vocab, rank_reference(merges))


def test_a_hand_written_merge_list_can_tell_rank_from_sweep():
    # What the module docstring warns about: (ab, c) listed before (a, b) ranks "abc" first.
    vocab = BYTES | {256: b"abc", 257: b"ab"}
    merges = [(b"ab", b"c"), (b"a", b"b")]
    assert Tokenizer(vocab, merges).encode("abc") == [256]
    assert sweep_reference(b"abc", merges) == [b"ab", b"c"]


# ---- CS336's published behaviours --------------------------------------------------------------------------


ROUND_TRIPS = ["", "s", "🙃", "Héllo hòw <|endoftext|> are ü? 🙃", "line one\nline two\n\n  indented\r\n\tend"]


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_round_trips_match_tiktoken(gpt2, oracle, text):
    ids = gpt2.encode(text)
    assert ids == oracle.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("text", ROUND_TRIPS)
def test_round_trips_on_a_trained_tokenizer(trained, text):
    vocab, merges, _, _ = trained
    tok = Tokenizer(vocab, merges, [EOT])
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=max(FUZZ_EXAMPLES // 10, 50), deadline=None)
@given(st.text(max_size=200))
def test_any_text_matches_tiktoken_and_round_trips(gpt2, oracle, text):
    ids = gpt2.encode(text)
    assert ids == oracle.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_gpt2_files_give_tiktoken_ids_on_the_corpora(gpt2, oracle, name):
    text = corpus_text(name, 150_000)
    text = EOT.join([text[: len(text) // 2], text[len(text) // 2 :]]) + EOT
    ids = gpt2.encode(text)
    assert ids == oracle.encode(text, allowed_special={EOT})
    assert gpt2.decode(ids) == text


def test_overlapping_special_tokens_longest_first():
    double = EOT + EOT
    for specials in ([EOT, double], [double, EOT]):
        tok = Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES, special_tokens=specials)
        text = f"Hello, how {double} are you?{EOT}{EOT}{EOT}"
        ids = tok.encode(text)
        double_id = len(tok.vocab) - 1  # appended to GPT-2's vocab
        assert tok.vocab[double_id] == double.encode() and tok.vocab[50256] == EOT.encode()
        assert ids.count(double_id) == 2 and ids.count(50256) == 1
        assert ids[-2:] == [double_id, 50256]
        assert tok.decode(ids) == text


def test_special_tokens_are_never_split_or_merged_across(gpt2):
    assert gpt2.encode(f"hello{EOT}world") == gpt2.encode("hello") + [50256] + gpt2.encode("world")
    assert gpt2.encode(f" {EOT} ") == [220, 50256, 220]
    # without special tokens the same text is ordinary text (and the vocab's <|endoftext|> is never produced)
    plain = Tokenizer.from_files(GPT2_VOCAB, GPT2_MERGES)
    assert 50256 not in plain.encode(f"hello{EOT}world")
    assert plain.decode(plain.encode(f"hello{EOT}world")) == f"hello{EOT}world"


def test_decode_replaces_invalid_utf8(gpt2):
    ids = gpt2.encode("🙃")
    assert len(ids) > 1  # its 4 bytes are several tokens in GPT-2
    assert gpt2.decode(ids[:1]) == "\ufffd"
    assert gpt2.decode(iter(ids)) == "🙃"


def test_encode_iterable_over_a_file_equals_encode_with_bounded_memory(gpt2, tmp_path):
    block = corpus_text("en_docs.txt", 50_000) + EOT
    path = tmp_path / "big.txt"
    path.write_text(block * 60, encoding="utf-8")  # 3 MB
    size = path.stat().st_size
    with open(path, encoding="utf-8") as f:
        streamed = list(gpt2.encode_iterable(f))
    assert streamed == gpt2.encode(path.read_text(encoding="utf-8"))
    # Memory: the piece cache holds the block's pieces already (it is bounded by itself); what the stream
    # holds on top of it must not grow with the file.
    tracemalloc.start()
    try:
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in gpt2.encode_iterable(f))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == len(streamed)
    assert peak < size / 30, f"encode_iterable peaked at {peak} bytes for a {size}-byte file"


def test_encode_iterable_finds_special_tokens_cut_across_chunks(gpt2):
    chunks = ["hello <|endof", "text|><|endoftext|", "> world"]
    assert list(gpt2.encode_iterable(chunks)) == gpt2.encode("".join(chunks))


def test_train_bpe_pickles_through_from_files_give_the_trained_encodings_ids(trained):
    vocab, merges, vocab_path, merges_path = trained
    tok = Tokenizer.from_files(vocab_path, merges_path, special_tokens=[EOT])
    assert tok.vocab == vocab and tok.merges == merges and tok.special_tokens == [EOT]
    enc = Encoding.from_vocab_merges(vocab, merges, [EOT])
    for name in ("en_docs.txt", "de_manpages.txt"):
        text = corpus_text(name, 400_000)[300_000:] + EOT + "tail"
        assert tok.encode(text) == enc.encode(text, allowed_special="all")


def test_cs336_speed_test_job_needs_nothing_built_first(tmp_path):
    # CS336's test_train_bpe_speed trains on its corpus.en (about 130 KB of English) with vocab_size=500 and
    # ["<|endoftext|>"], and allows 1.5 s. Here the same job runs as a brand-new machine would: a fresh process
    # whose cache folders are empty. It must not need anything built first: it imports no numba and leaves the
    # folders empty. (Its time is bench/bench_train.py --first-run's to measure: no test depends on the
    # machine's speed.)
    corpus = tmp_path / "corpus.en"
    text = (CORPUS / "en_docs.txt").read_bytes()[:130_000]
    corpus.write_bytes(text[: text.rfind(b"\n") + 1])
    env = dict(os.environ, TOKENIZER_CACHE_DIR=str(tmp_path / "cache"), NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    child = ("import pickle, sys; from tokenizer import train_bpe\n"
             f"vocab, merges = train_bpe({str(corpus)!r}, 500, ['<|endoftext|>'])\n"
             "sys.stdout.buffer.write(pickle.dumps((vocab, merges, 'numba' in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, env=env, timeout=600,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr.decode()
    vocab, merges, imported_numba = pickle.loads(out.stdout)
    assert (vocab, merges) == train_bpe(corpus, 500, [EOT], progress=False)
    assert len(vocab) == 500 and not imported_numba
    assert not (tmp_path / "cache").exists() and not (tmp_path / "numba").exists()


# ---- the object and its files ------------------------------------------------------------------------------


def test_attributes_are_as_given_with_missing_special_tokens_appended():
    vocab = BYTES | {256: b"ab"}
    merges = [(b"a", b"b")]
    tok = Tokenizer(vocab, merges, ["<|a|>", "<|b|>"])
    assert tok.merges == merges and tok.special_tokens == ["<|a|>", "<|b|>"]
    assert tok.vocab == vocab | {257: b"<|a|>", 258: b"<|b|>"}
    assert len(vocab) == 257  # the caller's dict is left alone
    assert tok.encode("<|b|>ab<|a|>") == [258, 256, 257]
    assert Tokenizer(vocab, merges).special_tokens == []
    # a special token already in the vocab keeps its id
    assert Tokenizer(vocab | {300: b"<|a|>"}, merges, ["<|a|>"]).encode("<|a|>") == [300]


def test_special_tokens_must_be_a_list_of_strings():
    with pytest.raises(TypeError, match=r"a list of strings, e.g. \['<\|endoftext\|>'\]"):
        Tokenizer(BYTES, [], EOT)
    with pytest.raises(TypeError, match="non-empty strings"):
        Tokenizer(BYTES, [], [""])


def test_from_vocab_merges_takes_special_tokens_as_tokenizer_does():
    """Encoding.from_vocab_merges, which README and walkthroughs 01 and 05 call on a trainer's vocab and merges,
    took one string ("<|endoftext|>") a character at a time, each a special token ("vocab lacks 4 single-byte
    tokens (e.g. b'<')"), failed on None ('NoneType' object is not iterable) and took an empty one, which failed
    at the first encode ("empty separator"). Each as Tokenizer: None is none, the others a TypeError at once."""
    from tokenizer import Encoding

    with pytest.raises(TypeError, match=r"a list of strings, e\.g\. \['<\|endoftext\|>'\], not one string"):
        Encoding.from_vocab_merges(BYTES, [], EOT)
    for bad in ([""], [b"<|x|>"]):
        with pytest.raises(TypeError, match="non-empty strings"):
            Encoding.from_vocab_merges(BYTES, [], bad)
    assert Encoding.from_vocab_merges(BYTES, [], None).special_tokens == {}
    assert Encoding.from_vocab_merges(BYTES, [], [EOT]).encode(EOT, allowed_special="all") == [256]


@pytest.mark.parametrize("fmt", ["gpt2", "hf", "tiktoken"])
def test_from_files_reads_this_packages_saved_formats(trained, tmp_path, fmt):
    vocab, merges, _, _ = trained
    expected = Tokenizer(vocab, merges, [EOT])
    expected.encoding.save(tmp_path, format=fmt)
    paths = {"gpt2": (tmp_path / "encoder.json", tmp_path / "vocab.bpe"), "hf": (tmp_path / "tokenizer.json",) * 2}
    paths["tiktoken"] = (tmp_path / "encoding.tiktoken",) * 2
    text = corpus_text("fr_manpages.txt", 50_000) + EOT
    for vocab_path, merges_path in (paths[fmt], (tmp_path, tmp_path)):
        tok = Tokenizer.from_files(vocab_path, merges_path, [EOT])
        assert tok.merges == merges
        assert tok.encode(text) == expected.encode(text)


def test_gpt2_merges_without_a_version_line_and_pickled_gpt2_tables(gpt2, tmp_path):
    merges_txt = tmp_path / "merges.txt"
    merges_txt.write_text(GPT2_MERGES.read_text(encoding="utf-8").split("\n", 1)[1], encoding="utf-8")
    (tmp_path / "vocab.pkl").write_bytes(pickle.dumps(gpt2.vocab))
    (tmp_path / "merges.pkl").write_bytes(pickle.dumps(gpt2.merges))
    text = corpus_text("ru_manpages.txt", 20_000) + EOT
    for vocab_path, merges_path in [(GPT2_VOCAB, merges_txt), (tmp_path / "vocab.pkl", tmp_path / "merges.pkl")]:
        assert Tokenizer.from_files(vocab_path, merges_path, [EOT]).encode(text) == gpt2.encode(text)


def write(path, data) -> str:
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return str(path)


def test_wrong_or_malformed_files_are_named(tmp_path, trained):
    _, _, vocab_pkl, merges_pkl = trained
    cases = [
        ((GPT2_MERGES, GPT2_VOCAB), r"vocab\.bpe: not a vocab file .* is it the merges file\?"),
        ((GPT2_VOCAB, GPT2_VOCAB), r"encoder\.json: a JSON vocab .*pass it as vocab_filepath"),
        ((merges_pkl, merges_pkl), r"merges\.pkl: expected a pickled dict\[int, bytes\] .*got a list"),
        ((vocab_pkl, vocab_pkl), r"vocab\.pkl: expected a pickled list\[tuple\[bytes, bytes\]\] .*got a dict"),
        ((write(tmp_path / "str.pkl", pickle.dumps({0: "a"})), merges_pkl), r"str\.pkl: .*got the entry \(0, 'a'\)"),
        ((vocab_pkl, write(tmp_path / "m.pkl", pickle.dumps([(b"a", "b")]))), r"m\.pkl: .*got the item \(b'a', 'b'\)"),
        ((write(tmp_path / "cut.pkl", pickle.dumps(BYTES)[:50]), merges_pkl), r"cut\.pkl: not a readable pickle"),
        ((GPT2_VOCAB, write(tmp_path / "bad.bpe", "#version: 0.2\nĠ t\nĠt h e\n")), r"bad\.bpe, line 3: expected two"),
        ((write(tmp_path / "bad.json", '{"a": 1,'), GPT2_MERGES), r"bad\.json: not valid JSON"),
        ((write(tmp_path / "ids.json", '{"a": "one"}'), GPT2_MERGES), r"ids\.json: token 'a' has id 'one'"),
        # the files are fine alone but not together
        ((vocab_pkl, write(tmp_path / "xy.pkl", pickle.dumps([(b"x", b"yz")]))), r"vocab\.pkl \+ .*xy\.pkl: merge #0"),
        ((write(tmp_path / "few.pkl", pickle.dumps({0: b"a"})), merges_pkl), r"few\.pkl \+ .*lacks 255 single-byte"),
    ]
    for (vocab_path, merges_path), message in cases:
        with pytest.raises(ValueError, match=message):
            Tokenizer.from_files(vocab_path, merges_path)
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_files(tmp_path / "missing.json", GPT2_MERGES)
