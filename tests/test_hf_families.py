"""Real ``tokenizer.json`` files of other model families (../shared/encodings/hf/) give exactly HF ``tokenizers``'
ids, on both cores, through tiktoken's API: ``encode(t, allowed_special="all")`` is HF's
``encode(t, add_special_tokens=False)``, ``encode_ordinary(t)`` is the same with ``encode_special_tokens=True``
(special tokens become text; added tokens that are not special stay tokens, as in HF), ``decode`` is HF's
``decode(ids, skip_special_tokens=False)``. Also: each step of tokenizer.hf_steps against HF's own on small
strings, the one-line refusals, and ``Encoding.save(format="hf")`` round trips.

Loading a family costs seconds (a 128k-200k vocabulary), so each is loaded once per module, its reference-core
twin made from the loaded one's tables (as pickle rebuilds an encoding)."""

from __future__ import annotations

import bisect
import doctest
import json
import pickle
import unicodedata
from pathlib import Path

import pytest
import regex
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tokenizer.hf_steps
from conftest import CORPUS_FILES, ENCODINGS_DIR, FUZZ_EXAMPLES, corpus_text
from tokenizer import Encoding
from tokenizer.fast.core import Route
from tokenizer.hf_steps import TextSteps, normalizer_from_json, split_by
from tokenizer.jobs.parity import hf_counterpart
from tokenizer.loading import load_encoding
from tokenizer.saving import hf_regex
from tokenizer.patterns import LLAMA3_PATTERN, NEWER_SYMBOLS_THAN_TIKTOKEN, NEWER_THAN_TIKTOKEN, O200K_PATTERN
from tokenizer.teach import explain_lines, pre_tokens
from tokenizer.unicode9 import ASSIGNED

tokenizers = pytest.importorskip("tokenizers")

HF_DIR = ENCODINGS_DIR / "hf"
FAMILIES = ["llama3", "qwen3", "deepseek_v3", "gpt_oss"]
CORES = ["fast", "reference"]


class Family:
    """One family's file loaded three ways: HF's tokenizer, and ours on each core."""

    def __init__(self, name: str):
        self.name = name
        self.path = HF_DIR / name / "tokenizer.json"
        self.hf = tokenizers.Tokenizer.from_file(str(self.path))
        self.fast = load_encoding(self.path)
        # the same tables on the reference core: what pickle sends, rebuilt with the core changed
        rebuild, (*tables, whole_piece_tokens, _core, text_steps, after_bpe) = self.fast.__reduce__()
        self.reference = rebuild(*tables, whole_piece_tokens, "reference", text_steps, after_bpe)
        assert self.reference.core_name == "reference"
        self.added = [entry for entry in json.loads(self.path.read_text(encoding="utf-8"))["added_tokens"]]

    def encoding(self, core: str) -> Encoding:
        return self.fast if core == "fast" else self.reference

    def hf_ids(self, text: str, *, specials_as_text: bool = False) -> list[int]:
        self.hf.encode_special_tokens = specials_as_text
        try:
            return self.hf.encode(text, add_special_tokens=False).ids
        finally:
            self.hf.encode_special_tokens = False


_loaded: dict[str, Family] = {}


@pytest.fixture(scope="module", params=FAMILIES)
def family(request) -> Family:
    if request.param not in _loaded:
        _loaded[request.param] = Family(request.param)
    return _loaded[request.param]


def corpus_samples(per_file: int, max_chars: int) -> list[str]:
    """``per_file`` texts from each corpus (documents of en_docs, paragraphs of the others), each cut to
    ``max_chars``; the texts of the second half of the files also in NFD, so normalizers have work."""
    texts = []
    for name in CORPUS_FILES:
        raw = corpus_text(name, 400_000 if per_file < 50 else 3_000_000)
        parts = raw.split("\n<|endoftext|>\n") if name == "en_docs.txt" else raw.split("\n\n")
        texts += [part[:max_chars] for part in parts if part.strip()][:per_file]
    return texts + [unicodedata.normalize("NFD", t) for t in texts[len(texts) // 2 :]]


EVERYDAY_TEXTS = corpus_samples(per_file=4, max_chars=600)


def test_hf_steps_doctests():
    result = doctest.testmod(tokenizer.hf_steps)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize("core", CORES)
def test_ids_equal_hfs_on_42_corpus_texts(family, core):
    enc = family.encoding(core)
    assert len(EVERYDAY_TEXTS) == 42  # 4 from each of the 7 corpora, and 14 of them in NFD
    for text in EVERYDAY_TEXTS:
        assert enc.encode_ordinary(text) == family.hf_ids(text, specials_as_text=True), (family.name, text[:80])
    batch = enc.encode_batch(EVERYDAY_TEXTS[:8], allowed_special="all")
    assert batch == [family.hf_ids(text) for text in EVERYDAY_TEXTS[:8]]


# Text where the families' steps differ from one pattern: digits, CJK and kana, marks that NFC composes,
# punctuation runs, mixed scripts, whitespace of every kind; a CJK ideograph and a punctuation mark new in Unicode
# 17.0 (unassigned to HF's Unicode 16.0 tables).
fuzz_chars = st.sampled_from(list("aAzZ09 '\n\r\t.,!?-_/<>|") + ["e\u0301", "\u0301", "\u00e9", "\u212b", "\u00a0",
                             "你", "好", "ア", "か", "я", "Ж", "١", "²", "\U0001f642", "\u3000", "ﬁ", "İ",
                             "\U000323b0", "\u2e60", "Σ"])
fuzz_texts = st.lists(fuzz_chars, max_size=40).map("".join)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=fuzz_texts, at=st.integers(0, 40), pick=st.integers(0, 10_000))
def test_fuzz_ids_equal_hfs_with_added_tokens_in_the_middle(family, text, at, pick):
    token = family.added[pick % len(family.added)]["content"]
    text = text[:at] + token + text[at:]
    want, want_ordinary = family.hf_ids(text), family.hf_ids(text, specials_as_text=True)
    for core in CORES:
        enc = family.encoding(core)
        assert enc.encode(text, allowed_special="all") == want, core
        assert enc.encode_ordinary(text) == want_ordinary, core
    assert family.fast.decode(want) == family.hf.decode(want, skip_special_tokens=False)


# Characters Unicode 17.0 added are unassigned to HF's Oniguruma (Unicode 16.0) and letters, digits, marks,
# punctuation or symbols to `regex` (17.0): the first and last of each run, in texts where that decides a cut.
NEWER_CHARS = [chr(cp) for run in NEWER_THAN_TIKTOKEN + NEWER_SYMBOLS_THAN_TIKTOKEN for cp in run]


def test_characters_new_in_unicode_17_split_as_hfs(family):
    texts = [" \U0003e2f1", "\U000332c5'S", "a\u2e60b \u2e60\u2e60 x"]  # found by fuzzing DeepSeek V3 and Qwen3
    texts += [f"a{c}b 1{c}2 {c}'s {c}! {c}{c}" for c in NEWER_CHARS]
    for text in texts:
        want = family.hf_ids(text)
        for core in CORES:
            assert family.encoding(core).encode_ordinary(text) == want, (core, text)


CLASSES = [r"\p{L}", r"\p{N}", r"\p{M}", r"\p{P}", r"\p{S}", r"\p{Lu}", r"\p{Ll}", r"\s"]


def split_steps(spec: dict) -> TextSteps:
    return TextSteps.from_json(None, {"type": "Sequence", "pretokenizers": [
        spec, {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]})


@pytest.mark.parametrize("behavior", ["Isolated", "Removed"])
def test_unicode_17_characters_are_unassigned_to_splits_and_replace_as_to_hfs(behavior):
    text = "".join(f"a{c}1 " for c in NEWER_CHARS)
    for cls in CLASSES:
        theirs = tokenizers.pre_tokenizers.Split(tokenizers.Regex(cls), BEHAVIORS[behavior])
        ours = split_steps({"type": "Split", "pattern": {"Regex": cls}, "behavior": behavior, "invert": False})
        assert ours.split(text) == [piece for piece, _ in theirs.pre_tokenize_str(text)], cls
        replace = tokenizers.normalizers.Replace(tokenizers.Regex(cls), "#")
        ours_replace = normalizer_from_json({"type": "Replace", "pattern": {"Regex": cls}, "content": "#"})
        assert ours_replace(text) == replace.normalize_str(text), cls


@pytest.mark.exhaustive
def test_every_code_point_is_classed_as_hfs_split_classes_it():
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    for cls in CLASSES[:5]:
        theirs = tokenizers.pre_tokenizers.Split(tokenizers.Regex(cls), "isolated")
        ours = split_steps({"type": "Split", "pattern": {"Regex": cls}, "behavior": "Isolated", "invert": False})
        assert ours.split(every) == [piece for piece, _ in theirs.pre_tokenize_str(every)], cls


def test_added_tokens_special_or_not(family):
    special = [e["content"] for e in family.added if e["special"]]
    not_special = [e["content"] for e in family.added if not e["special"]]
    text = f"Hi{special[0]}there {special[-1]}x" + "".join(f" a{t}b " for t in not_special[:3])
    for core in CORES:
        enc = family.encoding(core)
        assert enc.encode(text, allowed_special="all") == family.hf_ids(text)
        assert enc.encode_ordinary(text) == family.hf_ids(text, specials_as_text=True)
        with pytest.raises(ValueError, match="disallowed"):
            enc.encode(text)  # tiktoken's guard: a special token in text is refused unless allowed
    assert set(family.fast.special_tokens) == set(special)
    # a non-special added token is a token even in ordinary text, as HF keeps it with encode_special_tokens
    for t in not_special:
        assert family.fast.encode_ordinary(f"x{t}y")[1] == next(e["id"] for e in family.added if e["content"] == t)


def test_encode_only_native_bpe_runs_the_files_steps(family):
    text = "Cafe\u0301 12345 " + "".join(f"a{e['content']}b" for e in family.added[:3] + family.added[-3:])
    assert family.fast._encode_only_native_bpe(text) == family.hf_ids(text, specials_as_text=True)


def test_text_cut_inside_a_character_or_unstable_keeps_its_added_tokens():
    family = _loaded.get("qwen3") or Family("qwen3")  # "<think>": an added token that is not special
    think = family.fast.encode_single_token("<think>")
    assert family.fast._encode_bytes(b"x<think>") == family.fast.encode_ordinary("x<think>") == [87, think]
    assert family.fast._encode_bytes(b"x<think>\xe4")[:2] == [87, think]  # the cut byte alone after it
    stable, completions = family.fast.encode_with_unstable("hello <think>")
    assert stable == family.fast.encode("hello <think>") and completions == []
    stable, completions = family.fast.encode_with_unstable("hello <think>wor")
    assert stable == family.fast.encode("hello <think>")
    assert all(family.fast.decode(stable + c).startswith("hello <think>wor") for c in completions)


def test_decode_equals_hfs_and_qwen3_decodes_to_nfc(family):
    for text in EVERYDAY_TEXTS[:: len(EVERYDAY_TEXTS) // 6]:
        ids = family.fast.encode_ordinary(text)
        assert family.fast.decode(ids) == family.hf.decode(ids, skip_special_tokens=False)
        want = unicodedata.normalize("NFC", text) if family.name == "qwen3" else text
        assert family.fast.decode(ids) == want


def test_explain_cuts_text_as_encode_does_with_the_files_steps(family):
    # explain and the playground show these pieces: Qwen3's NFC and added tokens, DeepSeek V3's three Splits
    not_special = [entry["content"] for entry in family.added if not entry["special"]]
    text = "cafe\u0301 12345 x" + "y ".join(not_special[:3] + [family.added[-1]["content"]]) + EVERYDAY_TEXTS[30][:300]
    pieces = pre_tokens(text, family.fast, allowed_special="all", disallowed_special=())
    assert [i for piece in pieces for i in piece.ids] == family.fast.encode(text, allowed_special="all")
    for added in not_special[:3]:
        assert [p.special for p in pieces if p.text == added] == [True]
        assert f"added token {added!r} = id {family.fast.encode_single_token(added)}" in "\n".join(
            explain_lines(text, family.fast, allowed_special="all", disallowed_special=()))


def test_what_each_file_becomes(family):
    """Files that are one known pattern keep its spelling (and the fast core's routes); the others run steps."""
    steps = family.fast.text_steps
    if family.name == "gpt_oss":
        assert steps is None and family.fast.pat_str == O200K_PATTERN and family.fast.whole_piece_tokens
    elif family.name == "llama3":  # its own pattern, declared in tokenizer.patterns.KNOWN_PATTERNS
        assert steps is None and family.fast.pat_str == LLAMA3_PATTERN and family.fast.whole_piece_tokens
    else:
        assert steps is not None
        assert steps.has_normalizer == (family.name == "qwen3")
        assert not family.fast.whole_piece_tokens  # the file's ignore_merges
    # the route the fast core takes for a long text: a known pattern's checkpoint, else the file's steps
    long_text = "\n\n".join(EVERYDAY_TEXTS) * 3  # over 8k characters
    family.fast.encode_ordinary(long_text)
    expected = Route.STEPS if steps is not None else Route.CHECKPOINT
    assert family.fast.core.route([long_text]) is expected and family.fast.core.last_route is expected


def test_a_loaded_family_pickles_and_keeps_its_ids():
    family = _loaded.get("qwen3") or Family("qwen3")  # steps, a normalizer, added tokens special and not
    text = "Caf\u0065\u0301 123 你好 " + "".join(e["content"] for e in family.added[:3])
    ids = family.fast.encode(text, allowed_special="all")
    assert pickle.loads(pickle.dumps(family.fast)).encode(text, allowed_special="all") == ids
    again = Encoding.__new__(Encoding)
    again.__setstate__(family.fast.__getstate__())  # tiktoken's hooks: the special tokens keep their ids
    assert again.encode(text, allowed_special="all") == ids and again.special_tokens == family.fast.special_tokens


def test_llama2_is_refused_in_one_line_naming_file_and_feature():
    path = HF_DIR / "llama2" / "tokenizer.json"
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and "byte_fallback" in message
    assert "SentencePiece" in message and "only byte-level BPE files load" in message


def test_a_models_other_json_file_is_refused_naming_the_tokenizer_json_beside_it():
    # tokenizer_config.json is a .json too, and was refused only as "expected an HF tokenizer.json with a BPE model"
    config = HF_DIR / "qwen3" / "tokenizer_config.json"
    with pytest.raises(ValueError) as refused:
        load_encoding(config)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{config}: expected an HF tokenizer.json")
    assert message.endswith(f"pass {HF_DIR / 'qwen3' / 'tokenizer.json'} (or its folder)"), message


def small_file(tmp_path, **changes) -> str:
    """A tiny byte-level tokenizer.json (256 bytes, one merge) with ``changes`` made to its sections."""
    from tokenizer.vocab_files import token_to_gpt2_str

    vocab = {token_to_gpt2_str(bytes([b])): b for b in range(256)} | {"ab": 256}
    data = {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"], "ignore_merges": False}}
    for key, value in changes.items():
        if key in data["model"] or key in ("dropout", "byte_fallback", "continuing_subword_prefix"):
            data["model"][key] = value
        else:
            data[key] = value
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("changes, feature", [
    ({"type": "Unigram"}, "model 'Unigram'"),
    ({"type": "WordPiece"}, "model 'WordPiece'"),
    ({"byte_fallback": True}, "byte_fallback"),
    ({"dropout": 0.1}, "dropout"),
    ({"continuing_subword_prefix": "##"}, "continuing_subword_prefix"),
    ({"normalizer": {"type": "BertNormalizer"}}, "normalizer 'BertNormalizer'"),
    ({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}}, "pre-tokenizer 'Metaspace'"),
    ({"pre_tokenizer": {"type": "Whitespace"}}, "'Whitespace' without ByteLevel"),
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "Digits"}]}},
     "after ByteLevel"),
    ({"decoder": {"type": "WordPiece"}}, "decoder 'WordPiece'"),
    ({"added_tokens": [{"id": 257, "content": "<x>", "special": False, "lstrip": True}]}, "lstrip"),
    # a special token too (RoBERTa's "<mask>"): HF drops the space before it, tiktoken's matching would not
    ({"added_tokens": [{"id": 257, "content": "<mask>", "special": True, "lstrip": True}]}, "'<mask>' with lstrip"),
    ({"added_tokens": [{"id": 257, "content": "<s>", "special": True, "rstrip": True}]}, "'<s>' with rstrip"),
    ({"added_tokens": [{"id": 257, "content": "<w>", "special": True, "single_word": True}]}, "single_word"),
    # malformed steps: one line naming the section, not a KeyError or regex.error from inside the loader
    ({"normalizer": {"type": "Replace", "pattern": {"String": " "}}}, "malformed (KeyError: 'content')"),
    ({"normalizer": {"type": "Prepend"}}, "malformed (KeyError: 'prepend')"),
    ({"normalizer": ["NFC"]}, "normalizer or pre_tokenizer is malformed"),
    ({"pre_tokenizer": "ByteLevel"}, "normalizer or pre_tokenizer is malformed"),
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?<x"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}},
     "does not compile in the regex package (missing >"),
    ({"decoder": "WordPiece"}, "decoder 'WordPiece'"),
])
def test_unsupported_features_are_refused_in_one_line(tmp_path, changes, feature):
    path = small_file(tmp_path, **changes)
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and feature in message, message


@pytest.mark.parametrize("pre_tokenizer", [
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True},
    {"type": "Sequence", "pretokenizers": [  # a known pattern (Llama 3's): such encodings take the fast routes
        {"type": "Split", "pattern": {"Regex": hf_regex(LLAMA3_PATTERN)}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False, "trim_offsets": True}]}])
def test_a_file_without_a_decoder_decodes_as_hfs_to_the_tokens_strings_joined(tmp_path, pre_tokenizer):
    # "decoder": null: HF joins the tokens' strings with spaces ("ab Ġw Ã¶r <x>"), where the text came back
    added = [{"id": 257 + k, "content": text, "special": special, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False}
             for k, (text, special) in enumerate([("<x>", False), ("<s>", True)])]
    path = small_file(tmp_path, added_tokens=added, decoder=None, pre_tokenizer=pre_tokenizer)
    hf, ours = tokenizers.Tokenizer.from_file(path), load_encoding(path)
    text = "ab wör<x> 你\n\n end<s>"
    ids = ours.encode(text, allowed_special="all")
    assert ids == hf.encode(text, add_special_tokens=False).ids and 257 in ids and 258 in ids
    assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False) != text
    assert ours.decode([i for i in ids if not ours.is_special_token(i)]) == hf.decode(ids)  # HF's default skips them
    assert pickle.loads(pickle.dumps(ours)).decode(ids) == ours.decode(ids)
    # decode_with_offsets: decode's text, as in tiktoken, and where each token's own decoded string starts in it
    joined, offsets = ours.decode_with_offsets(ids)
    assert joined == ours.decode(ids) and len(offsets) == len(ids)
    for token, offset in zip(ids, offsets):
        alone = hf.decode([token], skip_special_tokens=False)
        assert joined[offset : offset + len(alone)] == alone, (token, offset)
    assert ours.decode_with_offsets([]) == ("", [])
    ours.save(tmp_path / "saved", format="hf")  # saved without a decoder too
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json")).decode(
        ids, skip_special_tokens=False) == ours.decode(ids) == load_encoding(tmp_path / "saved").decode(ids)


@pytest.mark.parametrize("normalizer, content, texts", [
    ({"type": "Lowercase"}, "<Think>", ["a<Think>b", "a<think>b", "<THINK>"]),
    ({"type": "NFC"}, "e\u0301x", ["e\u0301x", "\u00e9x"]),
    ({"type": "NFD"}, "\u00e9x", ["e\u0301x", "\u00e9x"]),
])
def test_added_tokens_matched_after_the_normalizer_are_normalized_too(tmp_path, normalizer, content, texts):
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    entry = {"id": 257, "content": content, "special": False, "normalized": True, "lstrip": False, "rstrip": False,
             "single_word": False}
    path = small_file(tmp_path, added_tokens=[entry], normalizer=normalizer, pre_tokenizer=level, decoder=level)
    hf, ours = tokenizers.Tokenizer.from_file(path), load_encoding(path)
    for text in texts:
        assert 257 in ours.encode_ordinary(text)
        assert ours.encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids, text


def split_file(tmp_path, regex_source: str) -> str:
    return small_file(tmp_path, pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": regex_source}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False, "trim_offsets": True}]},
        decoder={"type": "ByteLevel", "add_prefix_space": False, "use_regex": False, "trim_offsets": True})


@pytest.mark.parametrize("construct", [r"\w+", r"\W", r"\b", r"\h+", r"\X", r"[[:digit:]]+", r"[[:^alnum:]]",
                                       r"[[:punct:]]", r"\p{Word}", r"\P{xdigit}", r"\p{L&}", r"\N",
                                       r"\Z", r"(?m)a.b", r"(?i-m:a.b)", r"[a-z&&[^aeiou]]+"])
def test_regexes_hfs_oniguruma_reads_otherwise_are_refused(tmp_path, construct):
    path = split_file(tmp_path, f" ?{construct}|\\s+")
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and f"{construct[:4]}" in message, message
    assert "Oniguruma" in message


@pytest.mark.parametrize("special, other, text, specials_as_text, hf_ids", [
    ("<x>", "a<", "a<x>", False, [258, 120, 62]),  # cutting special tokens out first gave 97, 257
    ("<x>", "<x>y", "<x>y", False, [258]),  # 257, 121
    ("<x>y", "<x>", "<x>y", True, [60, 120, 62, 121]),  # encode_ordinary gave 258, 121
    ("c<d", "<d", "c<d", True, [99, 60, 100]),  # 99, 258
])
def test_a_special_and_another_added_token_that_can_overlap_are_refused(tmp_path, special, other, text,
                                                                       specials_as_text, hf_ids):
    # HF looks for every added token at once (the longest at the first place), the Encoding for special ones first
    entries = [{"id": 257 + k, "content": content, "special": k == 0, "normalized": False, "lstrip": False,
                "rstrip": False, "single_word": False} for k, content in enumerate([special, other])]
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    path = small_file(tmp_path, added_tokens=entries, pre_tokenizer=level, decoder=level)
    hf = tokenizers.Tokenizer.from_file(path)
    hf.encode_special_tokens = specials_as_text
    assert hf.encode(text, add_special_tokens=False).ids == hf_ids
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: added token {other!r} (not special) and special "
                                                     f"token {special!r} can overlap"), message


def test_a_special_token_found_before_an_added_token_in_hfs_order_too_may_overlap_it(tmp_path):
    # HF looks for a special token with normalized=false before an added token with normalized=true, as the
    # Encoding does: such tokens may overlap
    entries = [{"id": 257 + k, "content": content, "special": k == 0, "normalized": k == 1, "lstrip": False,
                "rstrip": False, "single_word": False} for k, content in enumerate(["<x>", "a<"])]
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    for normalizer in (None, {"type": "Lowercase"}):
        path = small_file(tmp_path, added_tokens=entries, pre_tokenizer=level, decoder=level, normalizer=normalizer)
        hf, ours = tokenizers.Tokenizer.from_file(path), load_encoding(path)
        for text in ["a<x>", "A<x>a<", "ba<x>"]:
            assert ours.encode(text, allowed_special="all") == hf.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("added_id, in_vocab, hf_id", [(300, False, 257), (300, True, 257)])
def test_added_tokens_whose_ids_hf_does_not_give_them_are_refused(tmp_path, added_id, in_vocab, hf_id):
    # HF gives an added token missing from model.vocab the next free id, and one in it the model.vocab entry's id,
    # whatever added_tokens says: loading the file's id would encode "<s>" otherwise than HF
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    entry = {"id": added_id, "content": "<s>", "special": True, "normalized": False, "lstrip": False,
             "rstrip": False, "single_word": False}
    path = small_file(tmp_path, pre_tokenizer=byte_level, decoder=byte_level, added_tokens=[entry])
    if in_vocab:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        data["model"]["vocab"]["<s>"] = hf_id
        Path(path).write_text(json.dumps(data), encoding="utf-8")
    assert tokenizers.Tokenizer.from_file(path).encode("a<s>", add_special_tokens=False).ids == [97, hf_id]
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{path}: added token '<s>' has id {added_id}"), message
    assert f"HF tokenizers gives it id {hf_id}" in message


def test_parity_against_hf_compares_ids_without_the_files_truncation_and_padding(tmp_path):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    path = small_file(tmp_path, pre_tokenizer=byte_level, decoder=byte_level,
                      truncation={"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0},
                      padding={"strategy": {"Fixed": 9}, "direction": "Right", "pad_to_multiple_of": None,
                               "pad_id": 0, "pad_type_id": 0, "pad_token": "a"})
    theirs, _ = hf_counterpart(path)
    text = "ab cd ab"
    assert theirs.encode(text) == load_encoding(path).encode(text) == [256, 32, 99, 100, 32, 256]


@pytest.mark.parametrize("regex_source", [r"b$", r"(?<=^a)", r"\s*b$|(?i)(?<=^A)"])
def test_line_anchors_cut_at_every_line_as_in_hfs_oniguruma(tmp_path, regex_source):
    # Oniguruma's Ruby syntax reads ^ and $ at each line's start and end, not only the text's: a cut between a and b
    # keeps the file's one merge (a + b) from making its token
    hf = tokenizers.Tokenizer.from_file(split_file(tmp_path, regex_source))
    ours = load_encoding(tmp_path / "tokenizer.json")
    for text in ["ab\nab", "x\nab", "ab \nab\r\nab", "\nab\n\nab ", "ab"]:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, text


@pytest.mark.parametrize("regex_source", [r"\x{41}", r"(?<n>a)\k<n>"])
def test_oniguruma_syntax_the_regex_package_lacks_is_refused_as_such(tmp_path, regex_source):
    path = split_file(tmp_path, regex_source)
    tokenizers.Tokenizer.from_file(path)  # HF reads it: the file is not malformed
    with pytest.raises(ValueError) as refused:
        load_encoding(path)
    message = str(refused.value)
    assert "\n" not in message and "does not compile in the regex package" in message and "malformed" not in message


def test_an_escaped_backslash_before_a_letter_is_no_escape(tmp_path):
    path = split_file(tmp_path, r"\\w+|[a-z]+|\s+")  # a backslash, then w's: the same to both engines
    text = "ab \\ww x\\w"
    hf = tokenizers.Tokenizer.from_file(path)
    assert load_encoding(path).encode_ordinary(text) == hf.encode(text, add_special_tokens=False).ids


# ---- each step against HF's own, on small strings ------------------------------------------------------------

BEHAVIORS = {"Isolated": "isolated", "Removed": "removed", "MergedWithPrevious": "merged_with_previous",
             "MergedWithNext": "merged_with_next", "Contiguous": "contiguous"}
small_texts = st.lists(st.sampled_from(list("ab1 2-\u00e9\n")), max_size=12).map("".join)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=small_texts, behavior=st.sampled_from(sorted(BEHAVIORS)), invert=st.booleans(),
       pattern=st.sampled_from([r"\d", r"\d+", r"[a-]", r"\s+(?!\S)|\s+", "-"]), literal=st.booleans())
def test_split_cuts_as_hfs_split(text, behavior, invert, pattern, literal):
    import regex

    literal = literal and pattern == "-"
    theirs = tokenizers.pre_tokenizers.Split(pattern if literal else tokenizers.Regex(pattern), BEHAVIORS[behavior],
                                             invert=invert)
    ours = split_by(regex.compile(regex.escape(pattern) if literal else pattern), behavior, invert, text)
    assert ours == [piece for piece, _ in theirs.pre_tokenize_str(text)]


LINE_ANCHORED = [r"^", r"$", r"\n^", r"^$", r"$^", r"(?<=^a)", r"^\s*", r"\s*$", r"(?<!^)\n", r"a|^", r"[^^a]^|\^",
                 r"(?#^)b|^(?#a)a"]
line_break_texts = st.tuples(st.sampled_from(["", "\n", "\r\n", "\r"]), st.lists(st.sampled_from(["a", "b", "^", "\n",
                             "\r\n", "\r", " "]), max_size=6).map("".join), st.sampled_from(["", "\n", "\r\n", "\r"]))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(parts=line_break_texts, pattern=st.sampled_from(LINE_ANCHORED), behavior=st.sampled_from(sorted(BEHAVIORS)))
def test_line_anchors_at_a_texts_last_line_break_match_as_hfs_oniguruma(parts, pattern, behavior):
    # Oniguruma's ^ matches at the text's start and after a line break, but not after one that ends the text:
    # read as the regex package's MULTILINE ^, "a\n" got a third X from Replace("^", "X") where HF's has two
    text = "".join(parts)
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": False}
    replace = {"type": "Replace", "pattern": {"Regex": pattern}, "content": "X"}
    ours = TextSteps.from_json(replace, {"type": "Sequence", "pretokenizers": [split, {"type": "ByteLevel",
                                                                                      "use_regex": False}]})
    hf_split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), BEHAVIORS[behavior])
    hf_replace = tokenizers.normalizers.Replace(tokenizers.Regex(pattern), "X")
    assert ours.normalize(text) == hf_replace.normalize_str(text)
    assert ours.split(text) == [piece for piece, _ in hf_split.pre_tokenize_str(text)]


# pieces of regexes that can match empty text (and some that cannot), for HF's way of going on after a match
REGEX_ATOMS = ["^", "$", "a", "\\n", "[^a]", "\\^", "(?:a|^)", "(?=^)", "(?<!^)", "\\s", "b", "(?=b)", "(?<=a)", "ab",
               ""]
fuzz_regexes = st.tuples(st.lists(st.tuples(st.sampled_from(REGEX_ATOMS), st.sampled_from(["", "*", "?", "+"])),
                                  min_size=1, max_size=3).map(lambda atoms: "".join(a + q for a, q in atoms)),
                         st.sampled_from(REGEX_ATOMS)).map(lambda two: "|".join(two))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(pattern=st.one_of(st.sampled_from([r"(?=^)|b", r"(?<!^)|b", r"(?:a|^)|[^a]", r"(?=b)|ab|b"]), fuzz_regexes),
       text=st.lists(st.sampled_from(["a", "b", "\n", "\r\n", "^", " "]), max_size=5).map("".join),
       behavior=st.sampled_from(sorted(BEHAVIORS)), invert=st.booleans())
def test_matches_after_an_empty_match_are_found_as_hfs_oniguruma_finds_them(pattern, text, behavior, invert):
    # after an empty match Oniguruma searches on from the next character, where `regex` looks at the same place
    # again for a longer match: Replace("(?=^)|b", "X") made "b" "XX", HF's "Xb"
    try:
        hf_split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), BEHAVIORS[behavior], invert=invert)
        hf_replace = tokenizers.normalizers.Replace(tokenizers.Regex(pattern), "X")
        ours = TextSteps.from_json({"type": "Replace", "pattern": {"Regex": pattern}, "content": "X"}, {
            "type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": behavior, "invert": invert},
                {"type": "ByteLevel", "use_regex": False}]})
    except Exception:  # (a quantifier on an anchor, and what one of the two engines does not read)
        assume(False)
    assert ours.normalize(text) == hf_replace.normalize_str(text)
    assert ours.split(text) == [piece for piece, _ in hf_split.pre_tokenize_str(text)]


# more pieces for may_match_empty's reading: lookarounds with groups, comments and classes inside, a class holding
# ^ and ], scoped flags, anchors as escapes
JUDGED_ATOMS = [*REGEX_ATOMS, "(?=(?:a|b))", "(?!a(?#)b)", "[]^a]", "(?i:a)", "\\b", "\\B", "\\A", "\\Z",
                "(?:(?=a)|b)", "(?<=[^b])", "(?#^)"]
judged_regexes = st.tuples(st.lists(st.tuples(st.sampled_from(JUDGED_ATOMS), st.sampled_from(["", "*", "?", "+"])),
                                    min_size=1, max_size=4).map(lambda atoms: "".join(a + q for a, q in atoms)),
                           st.sampled_from(JUDGED_ATOMS)).map(lambda two: "|".join(two))


@settings(max_examples=FUZZ_EXAMPLES * 4, deadline=None)
@given(pattern=judged_regexes, texts=st.lists(st.lists(st.sampled_from(["a", "b", "\n", "^", " ", "]"]), max_size=5)
                                                 .map("".join), min_size=1, max_size=8))
def test_a_pattern_judged_unable_to_match_empty_text_matches_none(pattern, texts):
    # Isolated splits skip the check for empty matches where may_match_empty says there can be none (the families'
    # patterns: the check cost DeepSeek V3's three splits 10%): a wrong "none" would cut as `regex` does, not HF
    try:
        find = regex.compile(pattern, regex.MULTILINE)
    except regex.error:
        assume(False)
    if not tokenizer.hf_steps.may_match_empty(find):
        assert all(m.end() > m.start() for text in texts for m in find.finditer(text))


def test_the_families_splits_are_judged_unable_to_match_empty_text():
    for name in ("llama3", "qwen3", "deepseek_v3", "gpt_oss"):
        steps = json.loads((ENCODINGS_DIR / "hf" / name / "tokenizer.json").read_text(encoding="utf-8"))
        splits = [step for step in steps["pre_tokenizer"]["pretokenizers"] if step["type"] == "Split"]
        patterns = [regex.compile(step["pattern"]["Regex"], regex.MULTILINE) for step in splits]
        assert patterns and not any(map(tokenizer.hf_steps.may_match_empty, patterns)), name
    assert tokenizer.hf_steps.may_match_empty(regex.compile("(?=b)|b"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=small_texts, individual=st.booleans(), prefix=st.booleans(), use_regex=st.booleans())
def test_digits_and_byte_level_cut_as_hfs(text, individual, prefix, use_regex):
    from tokenizer.vocab_files import token_to_gpt2_str

    pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": individual},
        {"type": "ByteLevel", "add_prefix_space": prefix, "use_regex": use_regex}]}
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Sequence([
        tokenizers.pre_tokenizers.Digits(individual_digits=individual),
        tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=use_regex)])
    theirs = [piece for piece, _ in hf.pre_tokenizer.pre_tokenize_str(text)]
    ours = [token_to_gpt2_str(p.encode("utf-8")) for p in TextSteps.from_json(None, pre).split(text)]
    assert ours == theirs


@pytest.mark.parametrize("individual", [False, True])
def test_digits_take_every_number_as_hfs_do(individual):
    every = "".join(chr(cp) for cp in range(0x3400) if cp != 0x20)  # Nd, Nl and No among letters and punctuation
    # Rust's tables are Unicode 17.0's, not Oniguruma's 16.0: Tolong Siki's digits (U+11DE0..U+11DE9) are numbers
    # to it, and so to HF's Digits, as they are to `regex` (found by splitting every code point)
    all_of_unicode = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != 0x20)
    texts = ["a²b", "x½y", "Ⅻ1", "١٢3", "2³⁴x", every, "a\U00011de0\U00011de9b \U00016ff4x", all_of_unicode]
    theirs = tokenizers.pre_tokenizers.Digits(individual_digits=individual)
    ours = split_steps({"type": "Digits", "individual_digits": individual})
    for text in texts:
        assert ours.split(text) == [piece for piece, _ in theirs.pre_tokenize_str(text)], text


NORMALIZERS = [
    ({"type": "NFC"}, tokenizers.normalizers.NFC()),
    ({"type": "NFKC"}, tokenizers.normalizers.NFKC()),
    ({"type": "NFD"}, tokenizers.normalizers.NFD()),
    ({"type": "NFKD"}, tokenizers.normalizers.NFKD()),
    ({"type": "Lowercase"}, tokenizers.normalizers.Lowercase()),
    ({"type": "Strip", "strip_left": True, "strip_right": False}, tokenizers.normalizers.Strip(left=True, right=False)),
    ({"type": "Prepend", "prepend": "▁"}, tokenizers.normalizers.Prepend("▁")),
    ({"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": " "}, "content": "_"},
                                          {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "#"}]},
     tokenizers.normalizers.Sequence([tokenizers.normalizers.Replace(" ", "_"),
                                      tokenizers.normalizers.Replace(tokenizers.Regex(r"\d+"), "#")])),
]


def test_lowercase_makes_every_capital_sigma_small_sigma_as_hfs():
    theirs = tokenizers.normalizers.Lowercase()
    for text in ["ΟΔΟΣ", "ΑΣ Β", "Σ", "aΣ.", "ΣΑΣ"]:  # str.lower gives final sigma "ς" in the first, second, fourth
        assert normalizer_from_json({"type": "Lowercase"})(text) == theirs.normalize_str(text), text


def test_lowercase_equals_hfs_on_all_of_unicode_at_once():
    # HF lowers each character on its own, with Rust's tables (Unicode 17.0): capitals new since Python 3.11's 14.0,
    # such as U+A7CB or Garay's U+10D50, must be lowered too
    every_character = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    ours, theirs = normalizer_from_json({"type": "Lowercase"}), tokenizers.normalizers.Lowercase()
    for text in ["\ua7cb\ua7dc \U00010d50\U00016ea0", every_character]:
        assert ours(text) == theirs.normalize_str(text)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=fuzz_texts, which=st.integers(0, len(NORMALIZERS) - 1))
def test_normalizers_equal_hfs(text, which):
    spec, theirs = NORMALIZERS[which]
    assert normalizer_from_json(spec)(text) == theirs.normalize_str(text), spec


@pytest.mark.parametrize("pattern", [r"\n?", r"\s*", r"b|", r"a?"])
@pytest.mark.parametrize("behavior", ["MergedWithPrevious", "MergedWithNext", "Contiguous"])
def test_split_finds_empty_matches_as_hfs_oniguruma_does(pattern, behavior):
    # no empty match where the last match ended: the regex package's gave "\na" two pieces where HF's gives one
    snake_case = {"MergedWithPrevious": "merged_with_previous", "MergedWithNext": "merged_with_next"}
    for invert in (False, True):
        theirs = tokenizers.pre_tokenizers.Split(tokenizers.Regex(pattern), snake_case.get(behavior, "contiguous"),
                                                 invert=invert)
        for text in ["\na", " a", "ab", "ba", "a\n\nb ", "bab  a"]:
            ours = split_by(regex.compile(pattern), behavior, invert, text)
            assert ours == [piece for piece, _ in theirs.pre_tokenize_str(text)], (text, invert)


@pytest.mark.parametrize("pattern", [r"\n?", r"x*", r"\s*", r"b|", r"$"])
def test_replace_finds_empty_matches_as_hfs_oniguruma_does(pattern):
    # no match in empty text, and no empty match where the last match ended (the regex package finds both)
    spec = {"type": "Replace", "pattern": {"Regex": pattern}, "content": "X"}
    theirs = tokenizers.normalizers.Replace(tokenizers.Regex(pattern), "X")
    for text in ["", "a\n", "b", "ab \n", "\n\nb", "a  b"]:
        assert normalizer_from_json(spec)(text) == theirs.normalize_str(text), text


# HF normalizes with Unicode 9.0's tables: a mark assigned since is a character of class 0 to it, which no mark is
# moved across and nothing composes with. Found by fuzzing Qwen3 (NFC) with marks of every script: Python moved
# U+1133B (class 7 since 11.0) before U+0320, and U+032A before U+1AC7 (class 230 since 13.0); it composed Dives
# Akuru's U+11935 U+11930 (13.0) into U+11938.
UNICODE9_TEXTS = ["\u0320\U0001133b", "\u1ac7\u032a", "\U00011935\U00011930", "e\u1ac7\u0301", "\u0898\U0001d16d",
                  "\U00011938", "e\u0301\U0001133b\u0301\u0316", "\u1e9b\u0323\u1ac7"]
MARKS = sorted({c for c in map(chr, range(0x110000)) if not 0xD800 <= ord(c) <= 0xDFFF
                and (unicodedata.combining(c) or unicodedata.decomposition(c))})
# the marks Unicode assigned after 9.0 (the ones HF's tables do not know) as often as all the others together
UNICODE9_RUNS = [[int(end, 16) for end in run.split("-")] for run in ASSIGNED.split()]
NEWER_MARKS = [c for c in MARKS if UNICODE9_RUNS[bisect.bisect(UNICODE9_RUNS, [ord(c), 0x110000]) - 1][-1] < ord(c)]
marks_and_letters = st.lists(st.one_of(st.sampled_from(MARKS), st.sampled_from(NEWER_MARKS),
                                       st.sampled_from(list("aeAKo\u0391\u0915\U00011935 "))), max_size=12).map("".join)


@pytest.mark.parametrize("spec, theirs", NORMALIZERS[:4], ids=["NFC", "NFKC", "NFD", "NFKD"])
def test_unicode_normal_forms_are_hfs_for_marks_newer_than_unicode_9(spec, theirs):
    for text in UNICODE9_TEXTS:
        assert normalizer_from_json(spec)(text) == theirs.normalize_str(text), (spec, ascii(text))


def test_qwen3_encodes_marks_newer_than_unicode_9_as_hf_does():
    if "qwen3" not in _loaded:  # the only family with a Unicode normal form (NFC)
        _loaded["qwen3"] = Family("qwen3")
    family = _loaded["qwen3"]
    for text in UNICODE9_TEXTS:
        for core in CORES:
            assert family.encoding(core).encode_ordinary(text) == family.hf_ids(text), (core, ascii(text))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(text=marks_and_letters, which=st.integers(0, 3))
def test_fuzz_unicode_normal_forms_of_marks_of_every_age_equal_hfs(text, which):
    spec, theirs = NORMALIZERS[which]
    assert normalizer_from_json(spec)(text) == theirs.normalize_str(text), (spec, ascii(text))


@pytest.mark.exhaustive
@pytest.mark.parametrize("spec, theirs", NORMALIZERS[:4], ids=["NFC", "NFKC", "NFD", "NFKD"])
def test_every_code_point_normalizes_as_hfs(spec, theirs):
    # Each code point alone; after a mark of class 240 (U+0345), which a mark of a lower class moves before; and
    # before an acute (U+0301), which composes with a letter that has a composition with it. All in one text, each
    # case on a line of its own: a line break is a character of class 0 that composes with nothing, so the cases
    # cannot touch (and comparing line by line names the first that differs).
    cases = [text for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF and cp != 0x0A
             for text in (chr(cp), "a\u0345" + chr(cp), chr(cp) + "\u0301")]
    ours, want = normalizer_from_json(spec)("\n".join(cases)), theirs.normalize_str("\n".join(cases))
    if ours != want:
        ours_lines, want_lines = ours.split("\n"), want.split("\n")
        at = next(i for i, (a, b) in enumerate(zip(ours_lines, want_lines)) if a != b)
        raise AssertionError(f"{spec}: {ascii(cases[at])} became {ascii(ours_lines[at])}, HF's {ascii(want_lines[at])}")


# ---- saving ---------------------------------------------------------------------------------------------------


def check_saved_round_trip(family: Family, folder) -> None:
    family.fast.save(folder, format="hf")
    again = load_encoding(folder)
    hf_again = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    # every added token in one text: DeepSeek V3's that are not special lie between special ones
    every_added_token = "a" + " b".join(entry["content"] for entry in family.added) + "c"
    # one text of each corpus (every language: [::5] left Japanese out), some in NFD
    texts = EVERYDAY_TEXTS[::4] + [f"a{e['content']}b" for e in family.added[:4]] + [every_added_token]
    for text in texts:
        ids = family.fast.encode(text, allowed_special="all")
        assert again.encode(text, allowed_special="all") == ids
        assert hf_again.encode(text, add_special_tokens=False).ids == ids == family.hf_ids(text)
        assert hf_again.decode(ids, skip_special_tokens=False) == again.decode(ids) == family.fast.decode(ids)
        assert hf_again.encode(text).ids == family.hf.encode(text).ids  # HF's default: with its post-processor
    assert again.special_tokens == family.fast.special_tokens and again.n_vocab == family.fast.n_vocab
    # the added tokens stay out of model.vocab where the file had them out: HF's size without them (transformers'
    # vocab_size) was 128,815 for DeepSeek V3's copy, not its 128,000
    assert hf_again.get_vocab_size(with_added_tokens=False) == family.hf.get_vocab_size(with_added_tokens=False)
    assert hf_again.get_vocab() == family.hf.get_vocab()


def test_saved_as_hf_loads_back_to_the_same_ids_in_both_libraries(tmp_path):
    check_saved_round_trip(_loaded.get("deepseek_v3") or Family("deepseek_v3"), tmp_path / "saved")


@pytest.mark.parametrize("special_ids, in_model_vocab", [
    ({"<|a|>": 257, "<|b|>": 258}, set()),  # right after the other tokens: HF gives them those ids
    ({"<|a|>": 258, "<|b|>": 257}, set()),  # (in either order)
    ({"<|a|>": 0, "<|b|>": 258}, {"<|a|>"}),  # one among them (DeepSeek V3's <｜begin▁of▁sentence｜> is id 0)
    ({"<|a|>": 257, "<|b|>": 300}, {"<|a|>", "<|b|>"}),  # a gap: HF would give <|b|> 258 unless model.vocab says
])
def test_added_tokens_are_in_model_vocab_only_where_hf_needs_them(tmp_path, special_ids, in_model_vocab):
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
    if 0 in special_ids.values():
        vocab[257] = b"\x00"  # the byte 0 at another id
    vocab |= {idx: text.encode("utf-8") for text, idx in special_ids.items()}
    mine = Encoding.from_vocab_merges(vocab, [(b"a", b"b")], list(special_ids))
    assert mine.special_tokens == special_ids
    mine.save(tmp_path / "saved", format="hf")
    data = json.loads((tmp_path / "saved" / "tokenizer.json").read_text(encoding="utf-8"))
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json"))
    text = "ab<|b|>x\x00<|a|>"
    assert hf.encode(text, add_special_tokens=False).ids == mine.encode(text, allowed_special="all")
    assert set(special_ids) & set(data["model"]["vocab"]) == in_model_vocab
    assert hf.get_vocab_size(with_added_tokens=False) == len(data["model"]["vocab"])
    assert load_encoding(tmp_path / "saved").encode(text, allowed_special="all") == mine.encode(text,
                                                                                               allowed_special="all")


# "Ġx" is how a tokenizer.json spells the ordinary token " x" (GPT-2's characters for its bytes)
@pytest.mark.parametrize("special, ordinary", [("ab", b"ab"), ("\u0120x", b" x")])
def test_a_special_token_spelled_as_an_ordinary_one_is_not_saved_as_hf(tmp_path, special, ordinary):
    # the saved file gave the special token the ordinary one's id in HF, and load refused it
    ranks = {bytes([i]): i for i in range(256)} | {ordinary: 256}
    mine = Encoding("clash", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={special: 257})
    with pytest.raises(ValueError) as refused:
        mine.save(tmp_path / "saved", format="hf")
    message = str(refused.value)
    assert "\n" not in message and f"special token {special!r} is spelled as ordinary token 256" in message
    assert "save as 'tiktoken'" in message and not (tmp_path / "saved").exists()
    mine.save(tmp_path / "saved", format="tiktoken")  # which names special tokens apart
    assert load_encoding(tmp_path / "saved").encode(special, allowed_special="all") == [257]


@pytest.mark.parametrize("normalized", [True, False, None])
def test_hand_made_added_tokens_saved_as_hf_are_looked_for_where_the_steps_looked(tmp_path, normalized):
    # entries given to TextSteps.from_json by hand need only content and id; they were written as given, and HF
    # tokenizers refused the saved file ("missing field single_word"). "normalized" missing is read as false.
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    entry = {"id": 256, "content": "<Think>"} | ({} if normalized is None else {"normalized": normalized})
    steps = TextSteps.from_json({"type": "Lowercase"}, level, [entry])
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"<Think>"}
    mine = Encoding.from_vocab_merges(vocab, [], name="mine", text_steps=steps)
    mine.save(tmp_path / "saved", format="hf")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "saved" / "tokenizer.json"))
    again = load_encoding(tmp_path / "saved")
    for text in ["a<Think>b", "a<think>b", "<THINK>"]:
        ids = mine.encode(text)
        assert (256 in ids) == (text == "a<Think>b" or bool(normalized))  # the normalizer lowers text, not raw tokens
        assert hf.encode(text, add_special_tokens=False).ids == again.encode(text) == ids, text


def template(first: str, second: str | None = None) -> dict:
    """A TemplateProcessing post-processor that puts ``first`` before each sequence (and ``second`` between a
    pair's two, of type id 1), as Llama 3's file on the Hub puts <|begin_of_text|> first."""
    def token(text, type_id):
        return {"SpecialToken": {"id": text, "type_id": type_id}}

    def sequence(name, type_id):
        return {"Sequence": {"id": name, "type_id": type_id}}

    between = second or first
    return {"type": "TemplateProcessing", "single": [token(first, 0), sequence("A", 0)],
            "pair": [token(first, 0), sequence("A", 0), token(between, 1), sequence("B", 1)],
            "special_tokens": {}}


def with_template_ids(processor: dict, ids_of: dict[str, int]) -> dict:
    """``processor`` with its TemplateProcessing's special_tokens filled in with their ids (HF refuses a file
    whose templates name a token that special_tokens lacks)."""
    if processor.get("type") == "Sequence":
        return dict(processor, processors=[with_template_ids(p, ids_of) for p in processor["processors"]])
    if processor.get("type") != "TemplateProcessing":
        return processor
    named = {piece["SpecialToken"]["id"] for part in ("single", "pair") for piece in processor[part]
             if "SpecialToken" in piece}
    return dict(processor, special_tokens={text: {"id": text, "ids": [ids_of[text]], "tokens": [text]}
                                           for text in sorted(named)})


def check_hf_post_processing_is_saved(original: str, folder: Path, texts: list[str]) -> None:
    """``original`` loaded and saved as hf into ``folder``, and both files read by HF: its default encode (single
    texts and pairs) gives the same ids and type ids; ours adds no token, before and after saving, pickling or
    tiktoken's pickling hooks."""
    ours = load_encoding(original)
    hf, hf_plain = tokenizers.Tokenizer.from_file(original), tokenizers.Tokenizer.from_file(original)
    hf_plain.no_truncation()  # (they apply with add_special_tokens=False too)
    hf_plain.no_padding()
    copies = [ours, pickle.loads(pickle.dumps(ours)), Encoding.__new__(Encoding)]
    copies[2].__setstate__(ours.__getstate__())
    for k, copy in enumerate(copies):
        copy.save(folder / str(k), format="hf")
        hf_copy = tokenizers.Tokenizer.from_file(str(folder / str(k) / "tokenizer.json"))
        again = load_encoding(folder / str(k))
        for text in texts:
            ids = copy.encode(text, allowed_special="all")
            want_plain = hf_plain.encode(text, add_special_tokens=False).ids
            assert again.encode(text, allowed_special="all") == ids == want_plain, text
            want = hf.encode(text)
            assert hf_copy.encode(text).ids == want.ids and hf_copy.encode(text).type_ids == want.type_ids, (k, text)
            want_pair = hf.encode(text, texts[0])
            got_pair = hf_copy.encode(text, texts[0])
            assert (got_pair.ids, got_pair.type_ids) == (want_pair.ids, want_pair.type_ids), (k, text)
        assert again.hf_post_processing == ours.hf_post_processing


BYTE_LEVEL_PROCESSOR = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}


@pytest.mark.parametrize("changes", [
    {"post_processor": template("<s>")},
    {"post_processor": template("<s>", "</s>")},  # a pair's own separator, of type id 1
    {"post_processor": {"type": "Sequence", "processors": [BYTE_LEVEL_PROCESSOR, template("<s>")]}},
    {"post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 258], "cls": ["<s>", 257],
                        "trim_offsets": True, "add_prefix_space": False}},
    {"post_processor": {"type": "BertProcessing", "sep": ["</s>", 258], "cls": ["<s>", 257]}},
    {"post_processor": None},  # none: HF's ids as they are (it was saved with a ByteLevel post-processor)
    {"post_processor": template("<s>"),  # cut to 3 ids, then padded to 5 with "</s>"
     "truncation": {"direction": "Right", "max_length": 3, "strategy": "LongestFirst", "stride": 0},
     "padding": {"strategy": {"Fixed": 5}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 258,
                 "pad_type_id": 0, "pad_token": "</s>"}},
])
def test_a_files_post_processor_truncation_and_padding_are_saved_as_hf_as_they_were_read(tmp_path, changes):
    # saving wrote a ByteLevel post-processor and no truncation or padding, whatever the file said: HF's default
    # encode of the saved file lost the file's "<s>" (its TemplateProcessing, Roberta- or BertProcessing)
    added = [{"id": 257 + k, "content": text, "special": True, "normalized": False, "lstrip": False, "rstrip": False,
              "single_word": False} for k, text in enumerate(["<s>", "</s>"])]
    processor = changes.get("post_processor")
    changes = dict(changes, post_processor=processor and with_template_ids(processor, {"<s>": 257, "</s>": 258}))
    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    path = small_file(tmp_path, added_tokens=added, pre_tokenizer=level, decoder=level, **changes)
    check_hf_post_processing_is_saved(path, tmp_path / "saved", ["ab ab", "x", "", "ab<s>ab"])
    assert (load_encoding(path).hf_post_processing["post_processor"] or {}).get("type") == (processor or {}).get("type")


def test_hf_post_processing_that_is_no_dict_is_refused_when_the_encoding_is_made():
    # (saving it would have failed inside, with an AttributeError)
    vocab = {i: bytes([i]) for i in range(256)}
    with pytest.raises(TypeError, match="hf_post_processing must be a tokenizer.json's sections as a dict"):
        Encoding.from_vocab_merges(vocab, [], hf_post_processing=[BYTE_LEVEL_PROCESSOR])


def check_family_with_a_bos_is_saved(name: str, tmp_path: Path) -> None:
    """A family's file given a BOS as the Hub's Llama 3 file has it (ByteLevel, then a TemplateProcessing)."""
    data = json.loads((HF_DIR / name / "tokenizer.json").read_text(encoding="utf-8"))
    bos = data["added_tokens"][0]["content"]  # the first special token: Llama 3's <|begin_of_text|>
    processor = {"type": "Sequence", "processors": [data["post_processor"], template(bos)]}
    data["post_processor"] = with_template_ids(processor, {bos: data["added_tokens"][0]["id"]})
    (tmp_path / "original").mkdir()
    original = tmp_path / "original" / "tokenizer.json"
    original.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    texts = ["hello world"] + EVERYDAY_TEXTS[::10]
    assert tokenizers.Tokenizer.from_file(str(original)).encode("hello world").ids[0] == data["added_tokens"][0]["id"]
    check_hf_post_processing_is_saved(str(original), tmp_path / "saved", texts)


def test_llama3_with_a_bos_saved_as_hf_keeps_its_bos_in_hfs_encode(tmp_path):
    # the Hub's Llama 3 file: HF's encode("hello world") gave [128000, 15339, 1917], its saved copy [15339, 1917]
    check_family_with_a_bos_is_saved("llama3", tmp_path)


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_with_a_bos_saved_as_hf_keeps_its_bos_in_hfs_encode(name, tmp_path):
    check_family_with_a_bos_is_saved(name, tmp_path)


@pytest.mark.parametrize("fmt", ["gpt2", "tiktoken"])
def test_steps_are_not_saved_where_a_format_cannot_hold_them(fmt, tmp_path):
    if "qwen3" not in _loaded:  # the only family with a Unicode normal form (NFC)
        _loaded["qwen3"] = Family("qwen3")
    family = _loaded["qwen3"]
    with pytest.raises(ValueError, match=f"the {fmt} format cannot hold: save it as 'hf'"):
        family.fast.save(tmp_path / "saved", format=fmt)
    assert not (tmp_path / "saved").exists()


@pytest.mark.exhaustive
def test_every_family_saved_as_hf_loads_back_to_the_same_ids(family, tmp_path):
    check_saved_round_trip(family, tmp_path / "saved")


# ---- exhaustive: thousands of texts per family ---------------------------------------------------------------


@pytest.mark.exhaustive
@pytest.mark.parametrize("core", CORES)
def test_ids_equal_hfs_on_4515_corpus_texts(family, core):
    texts = corpus_samples(per_file=430, max_chars=4000)
    assert len(texts) == 4515  # 430 from each of the 7 corpora, and half of them in NFD
    family.hf.encode_special_tokens = True
    want = [e.ids for e in family.hf.encode_batch(texts, add_special_tokens=False)]
    family.hf.encode_special_tokens = False
    got = family.encoding(core).encode_ordinary_batch(texts)
    differ = [text[:80] for text, a, b in zip(texts, got, want) if a != b]
    assert not differ, f"{len(differ)} of {len(texts)} texts differ, e.g. {differ[:3]}"


def test_the_readmes_equalities_with_hf_hold_with_the_files_truncation_and_padding_turned_off(tmp_path):
    # HF truncates and pads even with add_special_tokens=False, so the README's "encode(t, allowed_special="all")
    # is HF's encode(t, add_special_tokens=False)" holds only once they are off, which its sentence must say
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    added = [{"id": 257 + k, "content": text, "special": special, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False}
             for k, (text, special) in enumerate([("<s>", True), ("<x>", False)])]
    path = small_file(tmp_path, pre_tokenizer=byte_level, decoder=byte_level, added_tokens=added,
                      truncation={"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0},
                      padding={"strategy": {"Fixed": 9}, "direction": "Right", "pad_to_multiple_of": None,
                               "pad_id": 0, "pad_type_id": 0, "pad_token": "a"})
    hf, ours = tokenizers.Tokenizer.from_file(path), load_encoding(path)
    text = "ab cd<s> ab<x>"
    assert hf.encode(text, add_special_tokens=False).ids != ours.encode(text, allowed_special="all")
    hf.no_truncation()
    hf.no_padding()
    assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text, allowed_special="all")
    ids = ours.encode(text, allowed_special="all")
    assert hf.decode(ids, skip_special_tokens=False) == ours.decode(ids) == text
    hf.encode_special_tokens = True
    assert hf.encode(text, add_special_tokens=False).ids == ours.encode_ordinary(text)
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    claim = readme[readme.index("Added tokens map onto tiktoken's API") :]
    claim = claim[: claim.index('`encode(t, allowed_special="all")`')]
    assert "no_truncation()" in claim and "no_padding()" in claim, claim


def test_decode_is_hfs_but_for_added_tokens_of_non_ascii_byte_level_stand_ins_as_the_readme_says(tmp_path):
    # HF's ByteLevel decoder reads an added token through the byte-level alphabet when every character of it is
    # one of the 256 stand-ins ("é" for byte e9, "Ġ" for 20), else as its own UTF-8; this package decodes an added
    # token to its text: the two differ just where a stand-in is not its own byte, and the README says where
    from tokenizer.vocab_files import token_to_gpt2_str

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    contents = ["<é>", "Ġyo", "<|eot|>", "<x y>", "<é 你>"]
    added = [{"id": 257 + k, "content": text, "special": k % 2 == 0, "normalized": False, "lstrip": False,
              "rstrip": False, "single_word": False} for k, text in enumerate(contents)]
    path = small_file(tmp_path, pre_tokenizer=byte_level, decoder=byte_level, added_tokens=added)
    hf, ours = tokenizers.Tokenizer.from_file(path), load_encoding(path)
    stand_ins = {token_to_gpt2_str(bytes([b])): b for b in range(256)}
    for k, text in enumerate(contents):
        hfs = hf.decode([257 + k], skip_special_tokens=False)
        assert ours.decode([257 + k]) == text
        if all(char in stand_ins for char in text) and not text.isascii():
            assert hfs == bytes(stand_ins[char] for char in text).decode("utf-8", "replace") != text, text
        else:
            assert hfs == text
    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert "an added token made only of the byte-level alphabet's 256 stand-ins, one of them not ASCII" in readme
