"""The records a dataset job keeps of the tokenizer (tokenizer/jobs/manifest.py): the encoding's fingerprint.

A fingerprint must tell apart two tokenizers that give different ids, whatever part of them differs (a
tokenizer.json's normalizer or one of its splits as much as its tables), and must not move for what changes no
id: the folders of shards that manifests already describe are then still reused.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from tokenizer import get_encoding, load
from tokenizer.cli import main
from tokenizer.jobs.manifest import MANIFEST_NAME, encoding_fingerprint
from tokenizer.jobs.sharded import encode_dataset
from tokenizer.vocab_files import token_to_gpt2_str

# What manifests written before the fingerprint covered a tokenizer.json's steps record for gpt2 (and for a
# tokenizer saved by train, which one pattern splits too): such a folder of shards must still be reused.
GPT2_FINGERPRINT = "3f5123e4ac7d9c735b240102cce461457b7b2a6a71fafe120e6abf03fafa429e"


def tokenizer_json(normalizer=None, first_split=r"\d", behavior="Isolated", ignore_merges=False) -> dict:
    """A byte-level tokenizer.json of two merges ("a b" and "1 2") and a token no merge builds ("xyz"), whose text
    steps are a normalizer, a Split of digits, a Split of words and ByteLevel without its own regex: steps no
    single pattern spells."""
    vocab = {token_to_gpt2_str(bytes([b])): b for b in range(256)} | {"ab": 256, "12": 257, "xyz": 258}
    splits = [{"type": "Split", "pattern": {"Regex": first_split}, "behavior": behavior, "invert": False},
              {"type": "Split", "pattern": {"Regex": r" ?\p{L}+| ?[^\s\p{L}]+|\s+"}, "behavior": "Isolated",
               "invert": False},
              {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False, "trim_offsets": True}]
    eot = {"id": 259, "content": "<|endoftext|>", "special": True, "normalized": False, "lstrip": False,
           "rstrip": False, "single_word": False}
    return {"version": "1.0", "added_tokens": [eot], "normalizer": normalizer,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": splits}, "post_processor": None,
            "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "1 2"], "ignore_merges": ignore_merges}}


def write_tokenizer(folder: Path, data: dict) -> Path:
    folder.mkdir()
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


TEXT = "AB ab 1234 12<|endoftext|>xyz ab 12"


@pytest.mark.parametrize("other", [
    pytest.param({"normalizer": {"type": "Lowercase"}}, id="only the normalizer differs"),
    pytest.param({"first_split": r"\d\d"}, id="only a split's regex differs"),
    pytest.param({"behavior": "Removed"}, id="only a split's behavior differs"),
    # a piece that is a token no merge builds ("xyz") is that token only under tiktoken's rule
    pytest.param({"ignore_merges": True}, id="only ignore_merges differs"),
])
def test_tokenizers_that_differ_only_in_a_text_step_have_different_fingerprints(tmp_path, other):
    one = load(write_tokenizer(tmp_path / "one", tokenizer_json()))
    two = load(write_tokenizer(tmp_path / "two", tokenizer_json(**other)))
    assert one.text_steps is not None and two.text_steps is not None  # no single pattern: the steps cut the text
    assert one.encode(TEXT, allowed_special="all") != two.encode(TEXT, allowed_special="all")
    assert encoding_fingerprint(one) != encoding_fingerprint(two)


@pytest.mark.parametrize("change", ["trim_offsets", "post_processor", "nested sequence", "name"])
def test_what_changes_no_id_leaves_the_fingerprint(tmp_path, change):
    data = tokenizer_json()
    other = copy.deepcopy(data)
    if change == "trim_offsets":  # it moves offsets only
        other["pre_tokenizer"]["pretokenizers"][-1]["trim_offsets"] = False
    elif change == "post_processor":  # a BOS HF's encode adds; this encoding adds none (tiktoken's API)
        other["post_processor"] = {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                                   "pair": [{"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {}}
    elif change == "nested sequence":  # the same steps in a Sequence inside the Sequence
        splits = other["pre_tokenizer"]["pretokenizers"]
        other["pre_tokenizer"]["pretokenizers"] = [{"type": "Sequence", "pretokenizers": splits[:2]}, splits[2]]
    one = load(write_tokenizer(tmp_path / "one", data))
    two = load(write_tokenizer(tmp_path / ("one-renamed" if change == "name" else "two"), other))
    assert one.encode(TEXT, allowed_special="all") == two.encode(TEXT, allowed_special="all")
    assert encoding_fingerprint(one) == encoding_fingerprint(two)


def test_ignore_merges_leaves_the_fingerprint_where_the_merges_build_every_token(tmp_path):
    # gpt2's merges build every one of its tokens: the rule changes no id, and no fingerprint
    get_encoding("gpt2").save(tmp_path / "gpt2-hf", format="hf")
    whole = load(tmp_path / "gpt2-hf")
    data = json.loads((tmp_path / "gpt2-hf" / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["ignore_merges"] = not data["model"]["ignore_merges"]
    merged = load(write_tokenizer(tmp_path / "merged", data))
    assert whole.whole_piece_tokens != merged.whole_piece_tokens
    assert encoding_fingerprint(whole) == encoding_fingerprint(merged)


def test_a_tokenizer_json_saved_and_loaded_again_keeps_its_fingerprint(tmp_path):
    enc = load(write_tokenizer(tmp_path / "one", tokenizer_json({"type": "NFC"})))
    enc.save(tmp_path / "again", format="hf")
    assert encoding_fingerprint(load(tmp_path / "again")) == encoding_fingerprint(enc)


def test_the_fingerprint_of_gpt2_is_the_one_older_manifests_record(tmp_path):
    assert encoding_fingerprint(get_encoding("gpt2")) == GPT2_FINGERPRINT
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("hello world<|endoftext|>more", encoding="utf-8")
    encode_dataset([tmp_path / "in"], tmp_path / "out", progress=False, workers=1)
    # a manifest as an earlier version wrote it (the fingerprint then, no errors setting yet) is still reused
    path = tmp_path / "out" / MANIFEST_NAME
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["settings"]["errors"]
    manifest["settings"]["encoding_sha256"] = GPT2_FINGERPRINT
    path.write_text(json.dumps(manifest), encoding="utf-8")
    again = encode_dataset([tmp_path / "in"], tmp_path / "out", progress=False, workers=1)
    assert (again["encoded"], again["skipped"]) == (0, 1)


def test_shards_of_a_tokenizer_that_differs_in_its_normalizer_are_redone_and_refused_by_parity(
        tmp_path, capsys, monkeypatch):
    one = write_tokenizer(tmp_path / "tok", tokenizer_json())
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text(TEXT, encoding="utf-8")
    encode_dataset([tmp_path / "in"], tmp_path / "out", encoding=load(one), progress=False, workers=1)
    # the same folder (so the same name) now holds a tokenizer that lowercases first
    (one / "tokenizer.json").write_text(json.dumps(tokenizer_json({"type": "Lowercase"})), encoding="utf-8")
    lowered = load(one)
    monkeypatch.chdir(tmp_path)
    # (by the same name: the message says it is another tokenizer, not "pass --encoding tok", which was passed)
    assert main(["parity", "in/a.txt", "--ids", "out/a.bin", "--encoding", "tok"], prog="tok") == 2
    said = capsys.readouterr().err
    assert "out/a.bin was written with another tokenizer named 'tok'" in said and "pass --encoding" not in said
    assert main(["decode", "--ids", "out/a.bin", "--encoding", "tok"], prog="tok") == 2
    said = capsys.readouterr().err
    assert "written with another tokenizer named 'tok'" in said and len(said.strip().splitlines()) == 1
    again = encode_dataset([tmp_path / "in"], tmp_path / "out", encoding=lowered, progress=False, workers=1)
    assert (again["encoded"], again["skipped"]) == (1, 0)
    ids = np.fromfile(tmp_path / "out" / "a.bin", dtype="<u2").tolist()
    assert ids == lowered.encode(TEXT, allowed_special="all")
