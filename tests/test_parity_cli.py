"""``python -m tokenizer parity``: run as a user runs it (in ``tmp_path``; the ``cli`` fixture runs it in this
process, and again in its own in the exhaustive tier), checked against oracles computed here: tiktoken's ids,
ids changed by hand in a ``.bin``, and a saved tokenizer with one merge taken out, whose differences on a text
are known in advance."""

from __future__ import annotations

import doctest
import io
import json
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CORPUS, ENCODINGS_DIR, FUZZ_EXAMPLES, PROG, REPO
from tokenizer import Encoding, get_encoding, load
from tokenizer.jobs import dataset, parity, sharded
from tokenizer.pretokenize import compile_pattern

@pytest.fixture
def cli(cli):
    """conftest.py's ``cli``, for ``parity``: ``cli(*args)`` runs ``python -m tokenizer parity *args``."""

    def run(*args, **options):
        return cli("parity", *args, **options)

    run.own_process = cli.own_process
    return run


def corpus_prefix(name: str, limit: int) -> bytes:
    data = (CORPUS / name).read_bytes()[:limit]
    return data[: len(data.decode("utf-8", errors="ignore").encode("utf-8"))]  # whole characters only


def summary(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith(" ")]


# ---- identical data ---------------------------------------------------------------------------------------


def test_identical_files_exit_0_with_tiktokens_counts(cli, tmp_path):
    (tmp_path / "data").mkdir()
    en = corpus_prefix("en_docs.txt", 400_000)  # holds <|endoftext|> separators
    zh = corpus_prefix("zh_manpages.txt", 150_000)
    (tmp_path / "data" / "en.txt").write_bytes(en)
    (tmp_path / "data" / "zh.txt").write_bytes(zh)
    records = [{"text": t, "id": i} for i, t in enumerate(["héllo wörld", "", "  indented\n\tcode()", "中文 😀"])]
    (tmp_path / "data" / "docs.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n\n", encoding="utf-8")
    out = cli("data", "--encoding", "gpt2,cl100k_base", "--allowed_special", "all", "--json").stdout
    report = json.loads(out)
    assert report["identical"] is True
    expected = []
    for name in ("gpt2", "cl100k_base"):
        oracle = tiktoken.get_encoding(name)
        n_records = sum(len(oracle.encode(r["text"], allowed_special="all")) for r in records)
        n_records_bytes = sum(len(r["text"].encode()) for r in records)
        expected += [
            ("data/docs.jsonl", name, n_records_bytes, n_records),  # a folder: its files in sorted order
            ("data/en.txt", name, len(en), len(oracle.encode(en.decode(), allowed_special="all"))),
            ("data/zh.txt", name, len(zh), len(oracle.encode(zh.decode(), allowed_special="all"))),
        ]
    got = [(c["input"], c["encoding"], c["bytes"], c["tokens"]) for c in report["checks"]]
    assert got == expected
    for check in report["checks"]:
        assert check["identical"] and check["tokens"] == check["other_tokens"] and check["mismatches"] == 0
        assert check["against"] == f"tiktoken {check['encoding']}" and check["shown"] == []
        assert check["mb_per_s"] > 0 and check["other_mb_per_s"] > 0
    # the text report says the same, one line per check
    text = cli("data/*.txt", "--encoding", "gpt2", "--allowed_special", "all").stdout.splitlines()
    oracle = tiktoken.get_encoding("gpt2")
    assert text[0].startswith(f"data/en.txt: gpt2 vs tiktoken gpt2: identical; {len(en):,} bytes, "
                              f"{len(oracle.encode(en.decode(), allowed_special='all')):,} tokens; ours ")
    assert text[1].startswith("data/zh.txt: gpt2 vs tiktoken gpt2: identical;") and text[2] == "identical: 2 checks"


def test_default_encodings_are_gpt2_cl100k_o200k(cli, tmp_path):
    (tmp_path / "a.txt").write_text("Hello, world! 'tis 2024.\n", encoding="utf-8")
    checks = json.loads(cli("a.txt", "--json").stdout)["checks"]
    assert [c["encoding"] for c in checks] == ["gpt2", "cl100k_base", "o200k_base"]


# ---- a .bin checked against the text ----------------------------------------------------------------------


@pytest.fixture
def dataset_files(tmp_path):
    """en.txt and en.bin, its ids as encode-file writes them (made here by tiktoken, the oracle)."""
    data = corpus_prefix("en_docs.txt", 300_000)
    (tmp_path / "en.txt").write_bytes(data)
    ids = np.array(tiktoken.get_encoding("gpt2").encode(data.decode(), allowed_special="all"), dtype="<u2")
    ids.tofile(tmp_path / "en.bin")
    return data, ids


def test_ids_identical(cli, dataset_files):
    data, ids = dataset_files
    out = cli("en.txt", "--ids", "en.bin", "--allowed_special", "all").stdout
    assert out == (f"en.txt: gpt2 vs en.bin: identical; {len(data):,} bytes, {len(ids):,} tokens; ours "
                   + out.split("; ours ")[1].split("\n")[0] + "\nidentical: 1 check\n")


def test_ids_with_one_id_changed_names_the_offset_and_the_pre_token(cli, tmp_path, dataset_files):
    data, ids = dataset_files
    enc = get_encoding("gpt2")
    pieces = enc.decode_tokens_bytes(ids.tolist())
    # a " the" that is a whole pre-token (the next id starts a new word) past the first 1,000 ids
    k = next(k for k in range(1000, len(ids)) if pieces[k] == b" the" and pieces[k + 1][:1] == b" ")
    offset = sum(map(len, pieces[:k]))
    line = data[:offset].count(b"\n") + 1
    bad = ids.copy()
    bad[k] = enc.encode_single_token(" a")
    bad.tofile(tmp_path / "bad.bin")
    out = cli("en.txt", "--ids", "bad.bin", "--allowed_special", "all", status=1).stdout.splitlines()
    assert out[0].startswith(f"en.txt: gpt2 vs bad.bin: DIFFERENT at 1 place (1 pre-token); {len(data):,} bytes")
    # where in the text, and where in the .bin (np.memmap(...)[k]): the index was not said
    assert out[1] == f"  1. byte {offset:,}, line {line:,}, .bin index {k:,}: ' the'  utf-8: 20 74 68 65"
    assert out[2].split() == ["ours", str(ids[k]), "'", "the'"]
    assert out[3].split() == ["theirs", str(bad[k]), "'", "a'"]
    assert out[4:] == ["different: 1 of 1 check"]


def test_ids_of_the_other_type_say_which_dtype_to_pass(cli, tmp_path, dataset_files):
    # uint32 ids read as uint16 are twice as many, every other one 0: a flood of differences that said nothing of
    # --dtype; read as uint32 they are exactly the text's count
    data, ids = dataset_files
    ids.astype("<u4").tofile(tmp_path / "wide.bin")
    out = cli("en.txt", "--ids", "wide.bin", "--allowed_special", "all", status=1).stdout.splitlines()
    assert out[-2:] == [f"  note: read as uint32, wide.bin holds exactly as many ids as the text's {len(ids):,}: "
                        "was it written as uint32? pass --dtype uint32", "different: 1 of 1 check"]
    report = json.loads(cli("en.txt", "--ids", "wide.bin", "--allowed_special", "all", "--json", status=1).stdout)
    assert report["checks"][0]["note"].startswith("read as uint32, wide.bin holds exactly as many ids")
    cli("en.txt", "--ids", "wide.bin", "--dtype", "uint32", "--allowed_special", "all")
    # and uint16 ids read as uint32: half as many
    ids[: len(ids) // 2 * 2].tofile(tmp_path / "narrow.bin")
    (tmp_path / "even.txt").write_bytes(b"".join(get_encoding("gpt2").decode_tokens_bytes(ids[: len(ids) // 2 * 2])))
    out = cli("even.txt", "--ids", "narrow.bin", "--dtype", "uint32", "--allowed_special", "all", status=1).stdout
    assert "  note: read as uint16, narrow.bin holds exactly as many ids as the text's" in out


@pytest.mark.parametrize("chunk_bytes, at_chunk_ends", [(2_000, False), (2_000, True), (1 << 20, False)])
@pytest.mark.parametrize("edit", ["replace", "insert", "drop", "replace3", "unknown id"])
def test_check_ids_finds_each_damaged_place_once(tmp_path, dataset_files, chunk_bytes, at_chunk_ends, edit):
    """Damage at three places, far apart: each is found once, at its pre-token, and the sides are back in step
    after it (however many chunks the text is read in, and where a chunk ends at the place)."""
    data, ids = dataset_files
    enc = get_encoding("gpt2")
    pieces = enc.decode_tokens_bytes(ids.tolist())
    ends = np.cumsum([len(p) for p in pieces])  # id k: bytes ends[k] - len(pieces[k]) to ends[k]
    with open(tmp_path / "en.txt", "rb") as f:
        chunks = dataset.iter_chunks(f, enc.special_tokens_set, chunk_bytes, pattern=enc.pat_str)
        chunk_ends = set(np.cumsum([len(c) for c in chunks]))
    # the last id of a chunk dropped was counted twice, as a changed id and, in the next chunk, a dropped one; so
    # was one inserted before it. (Three replaced ids end there: ids replaced across a cut are a difference in
    # each chunk's pre-tokens.)
    last = 2 if edit == "replace3" else 0
    places = [next(k for k in range(start, len(ids)) if (ends[k + last] in chunk_ends) == at_chunk_ends)
              for start in (3_000, 30_000, 60_000)]
    damaged = ids.astype("<u4").tolist()
    for k in reversed(places):
        other = 11 if damaged[k] != 11 else 13
        if edit == "replace":
            damaged[k] = other
        elif edit == "replace3":
            damaged[k:k + 3] = [other] * 3
        elif edit == "insert":
            damaged.insert(k, other)
        elif edit == "drop":
            del damaged[k]
        else:
            damaged[k] = 60_000
    np.array(damaged, dtype="<u2").tofile(tmp_path / "damaged.bin")
    (report,) = parity.check_ids([tmp_path / "en.txt"], tmp_path / "damaged.bin", enc, allowed_special="all",
                                 chunk_bytes=chunk_bytes)
    assert (report.tokens, report.other_tokens, report.bytes) == (len(ids), len(damaged), len(data))
    assert report.mismatches == len(places), report.shown
    shift = {"insert": 1, "drop": -1}.get(edit, 0)  # ids the .bin gained per place damaged
    for n, (k, m) in enumerate(zip(places, report.shown)):
        assert m.offset <= ends[k] - len(pieces[k]) < m.offset + len(m.text.encode())  # the pre-token holds it
        first = int(np.searchsorted(ends, m.offset, "right"))
        assert m.ours == ids[first:first + len(m.ours)].tolist()
        assert m.index == first + n * shift and damaged[m.index:m.index + len(m.theirs)] == m.theirs
        assert data[m.offset:].startswith(m.text.encode())
        assert m.line == data[: m.offset].count(b"\n") + 1
    if edit == "unknown id":
        assert all(None in m.their_pieces for m in report.shown)


def test_ids_shorter_or_longer_than_the_text(tmp_path, dataset_files):
    data, ids = dataset_files
    enc = get_encoding("gpt2")
    ids[:-3].tofile(tmp_path / "short.bin")
    (report,) = parity.check_ids([tmp_path / "en.txt"], tmp_path / "short.bin", enc, allowed_special="all")
    assert not report.identical and report.other_tokens == len(ids) - 3
    assert [i for m in report.shown for i in m.ours][-3:] == ids[-3:].tolist()
    assert all(m.theirs == [] for m in report.shown)
    np.append(ids, np.array([31373, 995], dtype="<u2")).tofile(tmp_path / "long.bin")
    (report,) = parity.check_ids([tmp_path / "en.txt"], tmp_path / "long.bin", enc, allowed_special="all")
    assert (report.mismatches, report.other_tokens) == (1, len(ids) + 2)
    m = report.shown[0]
    assert (m.offset, m.line, m.pretokens, m.ours, m.theirs) == (
        len(data), data.count(b"\n") + 1, [], [], [31373, 995])


def test_ids_of_documents_as_encode_file_and_nanogpt_write_them(cli, tmp_path):
    # a .jsonl or .parquet was refused with --ids, though encode-file (and nanoGPT's prepare.py) lay its documents
    # out one way: encode_ordinary(text) + <|endoftext|> each
    texts = ["first <|endoftext|> doc", "", "second\nline two", "中文 😀"]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in texts), encoding="utf-8")
    oracle = tiktoken.get_encoding("gpt2")
    ids = [i for t in texts for i in oracle.encode_ordinary(t) + [oracle.eot_token]]
    np.array(ids, dtype="<u2").tofile(tmp_path / "docs.bin")
    out = cli("docs.jsonl", "--ids", "docs.bin", "--text_field", "body").stdout
    assert out.startswith(f"docs.jsonl: gpt2 vs docs.bin: identical; {sum(len(t.encode()) for t in texts)} bytes, "
                          f"{len(ids)} tokens; ")
    # one id changed in the third document, and one id more at the end: each said by record and .bin index
    k = len(oracle.encode_ordinary(texts[0])) + 2 + 3  # "second", "\n", "line", then " two"
    bad = list(ids)
    bad[k] = oracle.encode_single_token(" three")
    np.array(bad + [995], dtype="<u2").tofile(tmp_path / "bad.bin")
    out = cli("docs.jsonl", "--ids", "bad.bin", "--text_field", "body", status=1).stdout.splitlines()
    assert out[1:7] == [
        f"  1. record 3: byte 11, line 2 of its text, .bin index {k}: ' two'  utf-8: 20 74 77 6f",
        f"       ours   {ids[k]:<24} ' two'",
        f"       theirs {bad[k]:<24} ' three'",
        f"  2. record 4: byte 11, line 1 of its text, .bin index {len(ids)}: (the end of the text)  utf-8: -",
        "       ours   (none)                   ",
        "       theirs 995                      ' world'",
    ]
    # an encoding with no <|endoftext|> to end each document with: one line
    Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)}, []).save(tmp_path / "bare", format="hf")
    assert "has no <|endoftext|> token" in cli("docs.jsonl", "--ids", "docs.bin", "--encoding", "bare",
                                                "--text_field", "body", status=2).stderr


def test_ids_from_encode_dataset_are_read_as_its_manifest_says_they_were_written(cli, tmp_path):
    # a .bin of encode-dataset checked with another encoding, id type or text field was a flood of differences
    # (or a "cut short" note) that never named the cause, which the manifest beside it records
    texts = ["first <|endoftext|> doc", "second\nline two", "中文 😀"]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"body": t}) + "\n" for t in texts), encoding="utf-8")
    sharded.encode_dataset([tmp_path / "docs.jsonl"], tmp_path / "out", encoding="cl100k_base", text_field="body",
                           workers=1, progress=False)
    ids, manifest = os.path.join("out", "docs.bin"), os.path.join("out", "manifest.json")
    for args, message in (
        ([], f"{ids} was written with the encoding 'cl100k_base', not 'gpt2' (says {manifest}): pass --encoding "
             "cl100k_base (or the saved tokenizer of that name)"),
        (["--encoding", "cl100k_base", "--dtype", "uint16"], f"{ids} was written as uint32 ids, not uint16 (says "
         f"{manifest}): pass --dtype uint32"),
        (["--encoding", "cl100k_base"], f"{ids} was written from each document's 'body', not 'text' (says "
         f"{manifest}): pass --text_field body"),
    ):
        assert message in cli("docs.jsonl", "--ids", ids, *args, status=2).stderr
    cli("docs.jsonl", "--ids", ids, "--encoding", "cl100k_base", "--text_field", "body")


def test_a_text_shard_of_encode_dataset_is_read_with_the_special_token_rule_its_manifest_records(cli, tmp_path):
    # encode-dataset encodes a text shard with every special token's text its id, but its manifest did not say so:
    # parity --ids read the text with the flags' default rule and refused the <|endoftext|> the shard was made of
    (tmp_path / "t.txt").write_text("one doc<|endoftext|>two doc\n", encoding="utf-8")
    sharded.encode_dataset([tmp_path / "t.txt"], tmp_path / "out", workers=1, progress=False)
    manifest_path = tmp_path / "out" / "manifest.json"
    settings = json.loads(manifest_path.read_text(encoding="utf-8"))["settings"]
    assert (settings["allowed_special"], settings["disallowed_special"]) == ("all", "none")
    ids = os.path.join("out", "t.bin")
    assert cli("t.txt", "--ids", ids).stdout.endswith("identical: 1 check\n")
    # a rule typed that differs from the one recorded is told, with the flags that match
    stderr = cli("t.txt", "--ids", ids, "--allowed_special", "none", status=2).stderr
    assert stderr.endswith(f"{ids} was written with the special-token rule --allowed_special all --disallowed_special "
                           f"none (says {manifest_path.relative_to(tmp_path)}), which its text inputs are not about "
                           "to be encoded with: pass those flags\n")
    # a manifest written before the rule was recorded was made with it: read so, and its shards still trusted
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    del manifest["settings"]["allowed_special"], manifest["settings"]["disallowed_special"]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    assert cli("t.txt", "--ids", ids).stdout.endswith("identical: 1 check\n")
    again = sharded.encode_dataset([tmp_path / "t.txt"], tmp_path / "out", workers=1, progress=False)
    assert (again["encoded"], again["skipped"]) == (0, 1)
    # a .bin that no manifest lists keeps the flags' defaults
    (tmp_path / "out" / "t.bin").rename(tmp_path / "loose.bin")
    assert "The text contains the special token '<|endoftext|>'" in cli("t.txt", "--ids", "loose.bin",
                                                                           status=2).stderr


@pytest.mark.parametrize("shard", ["bad.txt", "bad.jsonl"])
def test_a_shard_made_with_errors_replace_is_read_with_the_errors_its_manifest_records(cli, tmp_path, shard):
    # encode-dataset --errors replace records errors: "replace", but parity --ids read the input strictly and
    # stopped at the first byte not UTF-8 until --errors replace was typed again
    data = b"caf\xe9 ok \xff\xfe end"
    if shard.endswith(".jsonl"):
        data = b'{"text": "' + data + b'"}\n'
    (tmp_path / shard).write_bytes(data)
    sharded.encode_dataset([tmp_path / shard], tmp_path / "out", errors="replace", workers=1, progress=False)
    ids, manifest = os.path.join("out", "bad.bin"), os.path.join("out", "manifest.json")
    assert cli(shard, "--ids", ids).stdout.endswith("identical: 1 check\n")
    assert cli(shard, "--ids", ids, "--errors", "replace").stdout.endswith("identical: 1 check\n")
    # with --against, the other side reads the input as the ids were written too
    assert cli(shard, "--ids", ids, "--against", "tiktoken").stdout.endswith("identical: 2 checks\n")
    # a flag typed that differs from the manifest is told in one line, with the flag that matches
    stderr = cli(shard, "--ids", ids, "--errors", "strict", status=2).stderr
    assert stderr.endswith(f"{ids} was written from inputs read with --errors replace, not --errors strict (says "
                           f"{manifest}): pass --errors replace (or leave it out)\n")
    assert len(stderr.splitlines()) == 1
    # the library reads it as the manifest says too, unless told otherwise
    (report,) = parity.check_ids([tmp_path / shard], tmp_path / ids, get_encoding("gpt2"))
    assert report.identical
    with pytest.raises(ValueError, match="pass --errors replace"):
        parity.check_ids([tmp_path / shard], tmp_path / ids, get_encoding("gpt2"), errors="strict")


@pytest.mark.parametrize("gap", [2, 3, 4, 5, 9])  # from 1 equal id between: fewer than SYNC_IDS were one difference
def test_ids_replaced_a_few_apart_are_each_a_difference_of_their_own(cli, tmp_path, gap):
    # the walk got back in step where the sides agreed longest, which in repetitive text was past the second
    # replaced id: two ids replaced five apart were one difference of six pre-tokens, counted once (and two
    # ids replaced 2 to 4 apart, fewer than SYNC_IDS, one difference over the pre-tokens between them)
    text = "The quick brown fox jumps over the lazy dog. " * 40
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    ids = np.array(get_encoding("gpt2").encode(text), dtype="<u2")
    ids[100], ids[100 + gap] = 7, 9
    ids.tofile(tmp_path / "p.bin")
    out = cli("p.txt", "--ids", "p.bin", status=1).stdout
    assert "DIFFERENT at 2 places (2 pre-tokens)" in out
    assert ".bin index 100: ' The'" in out and f".bin index {100 + gap}: " in out
    # an id dropped, then one replaced a few ids on: each found where it is, the rest in step
    dropped = np.delete(ids, 50)
    dropped.tofile(tmp_path / "d.bin")
    out = cli("p.txt", "--ids", "d.bin", status=1).stdout
    assert "DIFFERENT at 3 places (3 pre-tokens)" in out and "theirs 9 " in out


@pytest.mark.parametrize("k", [50_001, 3])
def test_a_difference_inside_a_long_pre_token_is_shown_where_it_is(cli, tmp_path, k):
    # one pre-token of 100,001 ids: the 64 ids shown were its first, equal on both sides, and the whole
    # pre-token was printed twice (text and UTF-8), 800 kB for one difference
    text = "x" + "ab" * 100_000 + "\n"
    (tmp_path / "long.txt").write_text(text, encoding="utf-8")
    ids = get_encoding("gpt2").encode(text)
    bad = np.array(ids, dtype="<u2")
    bad[k] = 7
    bad.tofile(tmp_path / "long.bin")
    out = cli("long.txt", "--ids", "long.bin", status=1).stdout
    assert max(map(len, out.splitlines())) < 2_000
    lines = out.splitlines()
    if k > parity.SHOWN_IDS:  # shown from a few ids before it: where, and both sides' ids, start there
        first = k - parity.CONTEXT_IDS
        assert lines[1].startswith(f"  1. byte {1 + 2 * (first - 1):,}, line 1, .bin index {first:,}: 'abab")
    else:
        first = 0
        assert lines[1].startswith("  1. byte 0, line 1, .bin index 0: 'xabab") and "characters more)" in lines[1]
    assert lines[2].split()[1:65] == list(map(str, ids[first:first + 64]))
    assert lines[3].split()[1:65] == list(map(str, bad[first:first + 64]))
    assert lines[-2:] == ["       (cut: a longer difference)", "different: 1 of 1 check"]


def test_ids_left_over_after_standard_input(tmp_path, monkeypatch):
    # the line of the end of the text was counted by opening the input again: "stdin", a file that is not there
    text = "one\ntwo\nthree"
    enc = get_encoding("gpt2")
    np.array(enc.encode(text) + [995], dtype="<u2").tofile(tmp_path / "long.bin")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    (report,) = parity.check_ids(["-"], tmp_path / "long.bin", enc)
    assert (report.input, report.mismatches, report.other_tokens) == ("stdin", 1, len(enc.encode(text)) + 1)
    m = report.shown[0]
    assert (m.offset, m.line, m.theirs, m.their_pieces) == (len(text), 3, [995], [b" world"])


def test_ids_of_another_encoding_say_so(cli, tmp_path, dataset_files):
    # cl100k_base's ids checked as gpt2's: fewer ids than gpt2's, so the note guessed a .bin cut short
    data, ids = dataset_files
    cl100k = np.array(tiktoken.get_encoding("cl100k_base").encode(data.decode(), allowed_special="all"), dtype="<u4")
    cl100k.tofile(tmp_path / "cl100k.bin")
    past = int((cl100k > 50256).sum())
    out = cli("en.txt", "--ids", "cl100k.bin", "--dtype", "uint32", "--allowed_special", "all", status=1).stdout
    assert out.splitlines()[-2:] == [
        f"  note: {past:,} of the {len(cl100k):,} ids of cl100k.bin are past gpt2's last id, 50,256: was it written "
        "with another encoding? pass --encoding with that one", "different: 1 of 1 check"]
    # a few unknown ids are damage, not another encoding: no guess
    ids[[10, 2_000]] = 60_000
    ids.tofile(tmp_path / "damaged.bin")
    assert "note:" not in cli("en.txt", "--ids", "damaged.bin", "--allowed_special", "all", status=1).stdout


def test_ids_left_over_after_an_empty_last_input_are_shown_at_its_start(tmp_path):
    enc = get_encoding("gpt2")
    (tmp_path / "a.txt").write_text("hello world\nsecond line\n", encoding="utf-8")
    (tmp_path / "empty.txt").write_bytes(b"")
    np.array(enc.encode("hello world\nsecond line\n") + [995], dtype="<u2").tofile(tmp_path / "long.bin")
    first, last = parity.check_ids([tmp_path / "a.txt", tmp_path / "empty.txt"], tmp_path / "long.bin", enc)
    assert first.identical and (last.mismatches, last.other_tokens) == (1, 1)
    assert (last.shown[0].offset, last.shown[0].line, last.shown[0].theirs) == (0, 1, [995])


def test_a_bin_cut_short_says_so(cli, tmp_path, dataset_files):
    # the text past the end of the .bin was reported as one difference per chunk read, with no word of the cause
    data, ids = dataset_files
    ids[:1_000].tofile(tmp_path / "cut.bin")
    out = cli("en.txt", "--ids", "cut.bin", "--allowed_special", "all", status=1).stdout.splitlines()
    assert out[1].startswith("  1. byte ") and ", .bin index 1,000: " in out[1]
    assert out[-2:] == [f"  note: cut.bin ends at index 1,000, {len(ids) - 1_000:,} ids short of the {len(ids):,} of "
                        "the text: was it cut short (a copy or a write that did not finish)?",
                        "different: 1 of 1 check"]
    # a few ids dropped at the end are shown in full: no guess
    ids[:-3].tofile(tmp_path / "short.bin")
    assert "note:" not in cli("en.txt", "--ids", "short.bin", "--allowed_special", "all", status=1).stdout


def test_ids_of_several_files_one_after_another(tmp_path):
    enc = get_encoding("cl100k_base")
    texts = ["first file, " * 50, "second file\n" * 40, "third"]
    ids = []
    for number, text in enumerate(texts):
        (tmp_path / f"{number}.txt").write_text(text, encoding="utf-8")
        ids += enc.encode(text)
    np.array(ids, dtype="<u4").tofile(tmp_path / "all.bin")  # cl100k's ids need uint32
    paths = [tmp_path / f"{number}.txt" for number in range(3)]
    reports = parity.check_ids(paths, tmp_path / "all.bin", enc)
    assert [r.identical for r in reports] == [True] * 3
    assert [r.tokens for r in reports] == [len(enc.encode(t)) for t in texts]
    # the last id of the first file dropped, or the first of the second: one difference, in the file that lost it
    lengths = [len(enc.encode(t)) for t in texts]
    for dropped, damaged_file in ((lengths[0] - 1, 0), (lengths[0], 1)):
        np.array(ids[:dropped] + ids[dropped + 1:], dtype="<u4").tofile(tmp_path / "dropped.bin")
        reports = parity.check_ids(paths, tmp_path / "dropped.bin", enc)
        assert [r.mismatches for r in reports] == [int(n == damaged_file) for n in range(3)]
        assert [r.other_tokens for r in reports] == [n - (k == damaged_file) for k, n in enumerate(lengths)]


def test_ids_of_documents_with_an_end_of_text_dropped(tmp_path):
    # each document is a piece of its own: a document's last id (its <|endoftext|>) dropped was counted twice
    enc = get_encoding("gpt2")
    texts = ["one document", "another, longer document", "the last"]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    ids = [i for t in texts for i in enc.encode_ordinary(t) + [enc.eot_token]]
    dropped = len(enc.encode_ordinary(texts[0]))
    np.array(ids[:dropped] + ids[dropped + 1:], dtype="<u2").tofile(tmp_path / "docs.bin")
    (report,) = parity.check_ids([tmp_path / "docs.jsonl"], tmp_path / "docs.bin", enc)
    assert (report.mismatches, report.other_tokens) == (1, len(ids) - 1)
    m = report.shown[0]
    assert (m.record, m.ours, m.theirs, m.index) == (1, [enc.eot_token], [], dropped)


@given(st.data())
@settings(max_examples=max(FUZZ_EXAMPLES // 3, 30), deadline=None)
def test_diff_regions_against_the_edits_made(data):
    """The oracle is the list of edits: one region per edit, and the ids between regions equal one for one."""
    enc = get_encoding("gpt2")
    ours = enc.encode(corpus_prefix("en_docs.txt", 5_000).decode(), allowed_special="all")
    theirs = list(ours)
    gap = 2 * (parity.SYNC_IDS + 2 * parity.MAX_SHIFT)  # edits this far apart in prose are told apart
    positions = sorted(data.draw(st.sets(st.integers(0, len(ours) // gap - 1), min_size=1, max_size=8)))
    for slot in reversed(positions):
        k = slot * gap + gap // 2
        edit = data.draw(st.sampled_from(["replace", "insert", "drop", "replace2"]))
        new = data.draw(st.integers(0, enc.n_vocab - 1).filter(lambda t: t not in ours[k - 1:k + 3]))
        if edit == "replace":
            theirs[k] = new
        elif edit == "replace2":
            theirs[k:k + 2] = [new, new]
        elif edit == "insert":
            theirs.insert(k, new)
        else:
            del theirs[k]
    regions, used = parity.diff_regions(ours, theirs, enc.decode_tokens_bytes(ours),
                                        enc.decode_tokens_bytes(theirs))
    assert len(regions) == len(positions) and used == len(theirs)
    i = j = 0
    for (i1, i2, j1, j2), slot in zip(regions, positions):
        assert ours[i:i1] == theirs[j:j1] and ours[i1:i2] != theirs[j1:j2]
        assert i1 <= slot * gap + gap // 2 <= i2
        i, j = i2, j2
    assert ours[i:] == theirs[j:]


def test_diff_regions_of_dense_edits_in_repetitive_text():
    """Edits close together in a dictionary's repetitive lines: however they are grouped into regions, the ids
    between regions are equal one for one, and there are no more regions than edits."""
    enc = get_encoding("gpt2")
    ours = enc.encode(corpus_prefix("en_dictionary.txt", 20_000).decode(), disallowed_special=())
    rng = random.Random(0)
    for _ in range(50):
        theirs = list(ours)
        places = sorted(rng.sample(range(len(ours)), rng.randint(1, 30)), reverse=True)
        for k in places:
            edit = rng.choice(["replace", "insert", "drop"])
            if edit == "replace":
                theirs[k] = rng.randrange(enc.n_vocab - 1)
            elif edit == "insert":
                theirs.insert(k, rng.randrange(enc.n_vocab - 1))
            else:
                del theirs[k]
        regions, used = parity.diff_regions(ours, theirs, enc.decode_tokens_bytes(ours),
                                            enc.decode_tokens_bytes(theirs))
        assert 1 <= len(regions) <= len(places) and used == len(theirs)
        i = j = 0
        for i1, i2, j1, j2 in regions:
            assert ours[i:i1] == theirs[j:j1]
            i, j = i2, j2
        assert ours[i:] == theirs[j:]


ONE_EDIT = {"replace": (1, 1), "insert": (0, 1), "drop": (1, 0)}  # (our ids, their ids) of one edit's region


@pytest.mark.parametrize("gap", [1, 2, 3, 4])
@pytest.mark.parametrize("first, second", [(a, b) for a in ONE_EDIT for b in ONE_EDIT])
def test_two_edits_a_few_ids_apart_are_two_differences(first, second, gap):
    """Two ids edited fewer than SYNC_IDS (4) ids apart were one difference spanning both and the equal ids between
    them (ids 40 and 42 replaced: ours [40, 41, 42] against theirs [x, 41, x]): each edit is now a difference of
    its own, the ids between them equal. Two ids replaced side by side are one difference of two ids."""
    ours = list(range(1000, 1100))
    theirs = list(ours)
    for kind, k in ((second, 40 + gap), (first, 40)):  # the later place first: the earlier one's index holds
        if kind == "replace":
            theirs[k] = 7
        elif kind == "insert":
            theirs.insert(k, 7)
        else:
            del theirs[k]
    regions, used = parity.diff_regions(ours, theirs, [b"o%d" % t for t in ours], [b"t%d" % t for t in theirs])
    assert used == len(theirs)
    i = j = 0
    for i1, i2, j1, j2 in regions:  # the ids between differences are the same one for one
        assert ours[i:i1] == theirs[j:j1]
        i, j = i2, j2
    assert ours[i:] == theirs[j:]
    sizes = [(i2 - i1, j2 - j1) for i1, i2, j1, j2 in regions]
    adjacent = gap == 1 and first != "insert"  # no id of ours between the two edits: one run of edits
    if adjacent and first == second:
        assert sizes == [(2 * ONE_EDIT[first][0], 2 * ONE_EDIT[first][1])], regions
    elif not adjacent:
        assert sizes == [ONE_EDIT[first], ONE_EDIT[second]], regions
        assert regions[0][0] == 40  # the first edit is where it was made
    else:  # two edits side by side, of two kinds: told as the fewest edits in one run
        assert len(regions) == 1 and regions[0][0] == 40


def test_a_bin_with_two_ids_replaced_two_apart_reports_two_places(tmp_path):
    """parity --ids on a .bin with ids 3 and 5 replaced (in different pre-tokens) said "DIFFERENT at 1 place (3
    pre-tokens)", the word between them shown as a difference: it says 2 places, each its own word."""
    enc = get_encoding("gpt2")
    text = "one two three four five six seven eight nine ten eleven twelve\n"
    (tmp_path / "words.txt").write_text(text, encoding="utf-8")
    ids = enc.encode(text)
    damaged = list(ids)
    damaged[3] = damaged[5] = enc.encode_single_token(" zero")
    np.array(damaged, dtype="<u2").tofile(tmp_path / "words.bin")
    (report,) = parity.check_ids([tmp_path / "words.txt"], tmp_path / "words.bin", enc)
    assert (report.mismatches, report.mismatching_pretokens) == (2, 2)
    assert [(m.text, m.ours, m.theirs) for m in report.shown] == [(" four", [ids[3]], [damaged[3]]),
                                                                   (" six", [ids[5]], [damaged[5]])]


def test_diff_regions_of_the_same_text_split_differently():
    enc = get_encoding("gpt2")
    ours = enc.encode("one hello two hello three")
    hello, hell, o = enc.encode_single_token(" hello"), enc.encode_single_token(" hell"), enc.encode_single_token("o")
    theirs = [t for i in ours for t in ([hell, o] if i == hello else [i])]
    regions, _ = parity.diff_regions(ours, theirs, enc.decode_tokens_bytes(ours), enc.decode_tokens_bytes(theirs))
    assert regions == [(1, 2, 1, 3), (3, 4, 4, 6)]


# ---- two tokenizers that differ: a saved tokenizer with one merge taken out -------------------------------

MERGES = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b" ", b"w"), (b"o", b"r"), (b"hell", b"o")]
ALTERED_TEXT = "hello world\nsay hello, world\n\tHello hell hello\n"


def vocab_merges_encoding(merges) -> Encoding:
    vocab = {i: bytes([i]) for i in range(256)} | {256 + k: a + b for k, (a, b) in enumerate(merges)}
    return Encoding.from_vocab_merges(vocab, merges)


@pytest.fixture
def altered(tmp_path):
    """base/ and altered/ (base without its last merge, "hell" + "o"), and a text holding "hello" three times."""
    vocab_merges_encoding(MERGES).save(tmp_path / "base")
    vocab_merges_encoding(MERGES[:-1]).save(tmp_path / "altered")
    (tmp_path / "text.txt").write_text(ALTERED_TEXT, encoding="utf-8")
    return tmp_path


def test_altered_tokenizer_report_shows_the_pre_token_and_both_splits(cli, altered):
    out = cli("text.txt", "--encoding", "base", "--against", "altered", status=1).stdout.splitlines()
    n_ours, n_theirs = (len(vocab_merges_encoding(m).encode(ALTERED_TEXT)) for m in (MERGES, MERGES[:-1]))
    assert out[0].startswith(f"text.txt: base vs altered: DIFFERENT at 3 places (3 pre-tokens); "
                             f"{len(ALTERED_TEXT)} bytes, {n_ours} tokens (theirs {n_theirs}); ours ")
    assert out[1:] == [
        "  1. byte 0, line 1: 'hello'  utf-8: 68 65 6c 6c 6f",
        "       ours   261                      'hello'",
        "       theirs 258 111                  'hell' 'o'",
        "  2. byte 15, line 2: ' hello'  utf-8: 20 68 65 6c 6c 6f",
        "       ours   32 261                   ' ' 'hello'",
        "       theirs 32 258 111               ' ' 'hell' 'o'",
        "  3. byte 40, line 3: ' hello'  utf-8: 20 68 65 6c 6c 6f",
        "       ours   32 261                   ' ' 'hello'",
        "       theirs 32 258 111               ' ' 'hell' 'o'",
        "different: 1 of 1 check",
    ]
    # --max_report: the first N shown, all counted
    out = cli("text.txt", "--encoding", "base", "--against", "altered", "--max-report", "1", status=1).stdout
    assert "DIFFERENT at 3 places" in out and "  2. " not in out and "  ... and 2 more not shown" in out


def test_saved_tokenizer_against_tiktoken_uses_tiktokens_engine_with_its_tables(cli, altered):
    out = cli("text.txt", "--encoding", "base").stdout
    assert out.startswith("text.txt: base vs tiktoken engine with base's tables: identical;")
    assert "identical: 1 check" in cli("text.txt", "--encoding", "altered").stdout


@pytest.mark.parametrize("family", ["qwen3", "deepseek_v3"])
def test_a_tokenizer_json_with_steps_tiktoken_cannot_run_is_sent_to_hf(cli, tmp_path, family):
    # tiktoken's engine knows one pattern: it neither composes "e" + U+0301 (Qwen3's NFC) nor runs DeepSeek V3's
    # three splits, so it reported differences that were its own (a traceback, for DeepSeek's)
    (tmp_path / "text.txt").write_text("cafe\u0301 2024年的中文文本 12345\n", encoding="utf-8")
    folder = ENCODINGS_DIR / "hf" / family
    stderr = cli("text.txt", "--encoding", str(folder), status=2).stderr
    assert f"{family}: its tokenizer.json runs steps before BPE" in stderr and "(--against hf)" in stderr
    assert "identical: 1 check" in cli("text.txt", "--encoding", str(folder), "--against", "hf").stdout


def test_a_saved_tokenizer_named_like_a_tiktoken_encoding_is_checked_against_its_own_tables(cli, tmp_path):
    # GPT-2's tables saved in cl100k_base/ were checked against tiktoken's cl100k_base: DIFFERENT, exit 1
    get_encoding("gpt2").save(tmp_path / "cl100k_base")
    (tmp_path / "text.txt").write_text("hello world, again\n", encoding="utf-8")
    out = cli("text.txt", "--encoding", "./cl100k_base,cl100k_base").stdout.splitlines()
    assert out[0].startswith("text.txt: cl100k_base vs tiktoken engine with cl100k_base's tables: identical;")
    assert out[1].startswith("text.txt: cl100k_base vs tiktoken cl100k_base: identical;")
    assert out[2] == "identical: 2 checks"


def test_json_parses_and_matches_the_text_report(cli, altered):
    args = ["text.txt", "--encoding", "base", "--against", "altered", "--fuzz", "40", "--seed", "5"]
    text = cli(*args, status=1).stdout
    report = json.loads(cli(*args, "--json", status=1).stdout)
    assert report["identical"] is False and len(report["checks"]) == 3  # the file, the fuzz strings twice
    heads = summary(text)
    assert heads[-1] == f"different: {sum(not c['identical'] for c in report['checks'])} of 3 checks"
    for head, check in zip(heads, report["checks"]):
        assert head.startswith(f"{check['input']}: {check['encoding']} vs {check['against']}: ")
        assert f"{check['bytes']:,} bytes, {check['tokens']:,} tokens" in head
        if not check["identical"]:
            assert (f"DIFFERENT at {parity.plural(check['mismatches'], 'place')} "
                    f"({parity.plural(check['mismatching_pretokens'], 'pre-token')})") in head
            assert f"(theirs {check['other_tokens']:,})" in head
    first = report["checks"][0]
    assert (first["tokens"], first["mismatches"]) == (len(vocab_merges_encoding(MERGES).encode(ALTERED_TEXT)), 3)
    m = first["shown"][1]
    assert (m["offset"], m["line"], m["record"], m["pretokens"], m["utf8"]) == (
        15, 2, None, [" hello"], "20 68 65 6c 6c 6f")
    assert m["ours"] == {"ids": [32, 261], "pieces": [" ", "hello"], "pieces_hex": ["20", "68 65 6c 6c 6f"]}
    assert m["theirs"] == {"ids": [32, 258, 111], "pieces": [" ", "hell", "o"],
                           "pieces_hex": ["20", "68 65 6c 6c", "6f"]}
    # every difference shown in JSON is in the text, in order
    shown_lines = [line for line in text.splitlines() if re.match(r"  \d+\. ", line)]
    shown = [m for check in report["checks"] for m in check["shown"]]
    assert len(shown_lines) == len(shown)
    for line, m in zip(shown_lines, shown):
        assert f"byte {m['offset']:,}, line {m['line']:,}" in line
        assert " ".join(map(repr, m["pretokens"])) in line and m["utf8"] in line


def test_jsonl_records_are_located_by_record(cli, altered):
    records = ["nothing to see", "line one\nthen hello"]
    (altered / "docs.jsonl").write_text("".join(json.dumps({"body": r}) + "\n" for r in records), encoding="utf-8")
    out = cli("docs.jsonl", "--text-field", "body", "--encoding", "base", "--against", "altered",
              status=1).stdout.splitlines()
    assert out[1] == "  1. record 2: byte 13, line 2 of its text: ' hello'  utf-8: 20 68 65 6c 6c 6f"


# ---- fuzz -------------------------------------------------------------------------------------------------


def test_fuzz_equals_tiktoken_and_is_reproducible(cli):
    first = json.loads(cli("--fuzz", "200", "--seed", "7", "--encoding", "gpt2,o200k_base", "--json").stdout)
    again = json.loads(cli("--fuzz", "200", "--seed", "7", "--encoding", "gpt2,o200k_base", "--json").stdout)
    assert first["identical"] is True and len(first["checks"]) == 4
    timing = ("seconds", "other_seconds", "mb_per_s", "other_mb_per_s", "speed_ratio")
    strip = [{k: v for k, v in c.items() if k not in timing} for c in first["checks"]]
    assert strip == [{k: v for k, v in c.items() if k not in timing} for c in again["checks"]]
    texts = list(parity.fuzz_texts(200, seed=7))
    oracle = tiktoken.get_encoding("gpt2")
    assert first["checks"][0]["tokens"] == sum(len(oracle.encode(t, allowed_special="all")) for t in texts)
    assert first["checks"][1]["tokens"] == sum(len(oracle.encode(t, disallowed_special=())) for t in texts)
    assert "seed 7, special tokens as ids" in first["checks"][0]["input"]


def test_fuzz_texts_hold_the_kinds_the_tests_use():
    texts = list(parity.fuzz_texts(500, seed=0))
    assert texts == list(parity.fuzz_texts(500, seed=0)) and texts != list(parity.fuzz_texts(500, seed=1))
    joined = "".join(texts)
    assert re.search(r"[\ud800-\udfff]", joined)  # surrogates
    assert re.search(r"[ \t\n\r]{3,}", joined)  # whitespace runs
    assert re.search(r"'(?i:s|t|re|ve|m|ll|d)", joined)  # contractions
    assert "<|endoftext|>" in joined and "<|endof" in joined  # special tokens and their fragments
    assert re.search(r"[\u0400-\u04ff]", joined) and re.search(r"[\u4e00-\u9fff]", joined)  # scripts


def test_fuzz_finds_every_string_that_differs(cli, tmp_path):
    """Oracle: the strings on which the two encodings differ, found here by encoding each one with both."""
    merges = [(b"e", b"l"), (b"l", b"o")]  # "Hello" (a fuzz fragment) is H el lo, without the last merge H el l o
    ours, theirs = vocab_merges_encoding(merges), vocab_merges_encoding(merges[:-1])
    ours.save(tmp_path / "base")
    theirs.save(tmp_path / "altered")
    report = json.loads(cli("--fuzz", "300", "--seed", "3", "--encoding", "base", "--against", "altered",
                            "--max_report", "1000", "--json", status=1).stdout)
    texts = list(parity.fuzz_texts(300, seed=3))
    for check, allowed in zip(report["checks"], ("all", set())):
        differing = [n for n, t in enumerate(texts, start=1)
                     if ours.encode(t, allowed_special=allowed, disallowed_special=())
                     != theirs.encode(t, allowed_special=allowed, disallowed_special=())]
        assert differing and sorted({m["record"] for m in check["shown"]}) == differing


# ---- tiktoken is optional ---------------------------------------------------------------------------------


def test_missing_tiktoken_is_one_line_exit_2(cli, altered, monkeypatch):
    if cli.own_process:  # a tiktoken that cannot be imported, first on the path
        hide = altered / "hide"
        hide.mkdir()
        (hide / "tiktoken.py").write_text("raise ImportError('No module named tiktoken')\n")
        env = {"PYTHONPATH": os.pathsep.join([str(hide), str(REPO)])}
    else:  # None in sys.modules: `import tiktoken` raises ImportError
        monkeypatch.setitem(sys.modules, "tiktoken", None)
        env = None
    stderr = cli("text.txt", "--encoding", "gpt2", env=env, status=2).stderr
    assert stderr.startswith(f"{PROG}: error: parity against tiktoken needs tiktoken, which is not installed")
    assert "pip install tiktoken==0.14.0 'tokenizers>=0.20'" in stderr and "--against DIR" in stderr
    # comparing two saved tokenizers or checking a .bin does not need it
    cli("text.txt", "--encoding", "base", "--against", "altered", env=env, status=1)
    ids = vocab_merges_encoding(MERGES).encode(ALTERED_TEXT)
    np.array(ids, dtype="<u2").tofile(altered / "text.bin")
    cli("text.txt", "--encoding", "base", "--ids", "text.bin", env=env)


# ---- bad inputs ---------------------------------------------------------------------------------------------

BAD_UTF8 = "fine text\n".encode() * 100 + b"\x89PNG\r\n\x1a\n\x00\x00" + "more, 中文\n".encode()  # byte 1000 is bad


def test_missing_files_folders_and_globs(cli, tmp_path):
    assert cli("missing.txt", status=2).stderr == f"{PROG}: error: input file not found: missing.txt\n"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.md").write_text("x")
    assert "empty is a directory without .txt, .jsonl, .jsonl.gz or .parquet files" in cli("empty", status=2).stderr
    assert "no file matches 'nothing*.txt'" in cli("nothing*.txt", status=2).stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # nothing written


def test_non_utf8_names_the_offset_unless_replaced(cli, tmp_path):
    (tmp_path / "bin.dat").write_bytes(BAD_UTF8)
    stderr = cli("bin.dat", "--encoding", "gpt2", status=2).stderr
    assert "bin.dat is not valid UTF-8: byte 1000 is b'\\x89'" in stderr and "--errors replace" in stderr
    assert "identical: 1 check" in cli("bin.dat", "--encoding", "gpt2", "--errors", "replace").stdout
    # the ids of the text read so, checked with --ids and --against: both checks count the bytes read, as count
    # and stats do (each U+FFFD counted as its own 3 bytes made parity's figures disagree with theirs)
    text = BAD_UTF8.decode("utf-8", errors="replace")
    np.array(get_encoding("gpt2").encode(text), dtype="<u2").tofile(tmp_path / "bin.ids")
    checks = json.loads(cli("bin.dat", "--ids", "bin.ids", "--against", "tiktoken", "--errors", "replace",
                            "--json").stdout)["checks"]
    assert [c["bytes"] for c in checks] == [len(BAD_UTF8)] * 2


def test_a_jsonl_documents_bytes_not_utf8_count_as_the_bytes_read_as_count_and_stats_count_them(cli, tmp_path):
    """parity on a .jsonl under --errors replace counted each U+FFFD read for bytes not UTF-8 as 3 bytes (a run of
    2 bytes as 3, a single byte as 3), where count and stats count the bytes read: the checks against tiktoken and
    against the .bin of the documents now say the bytes count says."""
    lines = [b"line %d \xff\xfe ok \xe2\x82" % k for k in range(50)]  # a run of 2 bytes and a cut character
    (tmp_path / "bad.jsonl").write_bytes(b"".join(b'{"id": "\xc3", "text": "%s"}\n' % line for line in lines))
    counted = dataset.file_stats(tmp_path / "bad.jsonl", "gpt2", errors="replace")["bytes"]
    dataset.encode_file(tmp_path / "bad.jsonl", tmp_path / "bad.bin", encoding="gpt2", errors="replace", workers=1,
                        progress=False)
    checks = json.loads(cli("bad.jsonl", "--ids", "bad.bin", "--against", "tiktoken", "--errors", "replace",
                            "--json").stdout)["checks"]
    assert counted == sum(map(len, lines))
    assert [c["bytes"] for c in checks] == [counted] * 2, checks


def test_special_token_text_follows_the_api_rule(cli, tmp_path):
    (tmp_path / "special.txt").write_text("a <|endoftext|> b", encoding="utf-8")
    stderr = cli("special.txt", "--encoding", "gpt2", status=2).stderr
    assert "special.txt" in stderr and "'<|endoftext|>'" in stderr and "--allowed_special all" in stderr
    cli("special.txt", "--encoding", "gpt2", "--allowed_special", "all")
    cli("special.txt", "--encoding", "gpt2", "--disallowed_special", "none")


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "required: INPUT (or --fuzz N)"),
        (["a.txt", "--ids", "a.bin", "--fuzz", "3"], "drop --fuzz"),
        (["a.txt", "--ids", "a.bin", "--encoding", "gpt2,cl100k_base"], "pass one --encoding"),
        (["a.txt", "--dtype", "uint16"], "pass it with --ids"),
        (["a.txt", "--dtype", "int8", "--ids", "a.bin"], "invalid choice: 'int8'"),
        (["--fuzz", "0"], "expected a positive whole number, got '0'"),
        (["a.txt", "--max_report", "-1"], "expected a positive whole number"),
        (["a.txt", "--seed", "x", "--fuzz", "3"], "expected a whole number (digits 0-9), got 'x'"),
        (["a.txt", "--seed", "1_0", "--fuzz", "3"], "expected a whole number (digits 0-9), got '1_0'"),
        (["a.txt", "--bogus"], "--bogus is not an option of parity (see"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(cli, args, message):
    stderr = cli(*args, status=2).stderr
    assert message in stderr and "--help" in stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["a.txt", "--encoding", "gpt5"], "Unknown encoding 'gpt5'"),
        (["a.txt", "--against", "no_such_folder"],
         "--against no_such_folder: no such file or folder; pass tiktoken, hf"),
        (["a.txt", "--ids", "missing.bin"], "ids file not found: missing.bin"),
        (["a.txt", "--ids", "ids"], "error: ids is a folder; name the .bin file of ids"),
        # the text read as ids was a flood of differences
        (["a.txt", "--ids", "a.txt"], "error: a.txt is the input a.txt itself: name the .bin file of its ids "
         "(encode-file writes INPUT.bin)"),
        # a device or a pipe (--ids <(zcat ids.bin.gz)) was "not found"
        (["a.txt", "--ids", os.devnull], f"error: {os.devnull} is not a regular file (a device or a pipe?): the ids "
         "are read back and forth; save them to a file and name it"),
        # 3 bytes are no uint32 ids either: --dtype uint32 would be no way out
        (["a.txt", "--ids", "odd.bin"], "odd.bin is 3 bytes, not a whole number of uint16 ids, nor of uint32 ids; "
         "is it a file of ids"),
        (["a.txt", "--ids", "six.bin", "--dtype", "uint32"], "was it written as uint16? pass --dtype uint16"),
        (["a.txt", "--ids", "odd.bin", "--dtype", "uint32"], "not a whole number of uint32 ids"),
        # a header of 128 bytes, read as 64 ids: every id after it was reported out of place
        (["a.txt", "--ids", "a.npy"], "a.npy is a NumPy .npy file (a header, then the array), not a flat file of "
         "ids as nanoGPT's .bin: save its array with np.load('a.npy').tofile('ids.bin') and check ids.bin"),
        (["docs.jsonl", "--encoding", "gpt2"], "docs.jsonl line 2: not JSON"),
        (["fields.jsonl", "--encoding", "gpt2"], 'fields.jsonl line 1: no "text" field (its fields: "body")'),
        (["numbers.jsonl", "--encoding", "gpt2"], 'numbers.jsonl line 1: "text" holds a number, not text'),
        (["a.txt", "--allowed_special", "<|pad|>"], "'<|pad|>' is not a special token of gpt2"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(cli, tmp_path, args, message):
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "a.bin").write_bytes(b"\x00\x00")
    (tmp_path / "odd.bin").write_bytes(b"\x00\x00\x00")
    (tmp_path / "six.bin").write_bytes(b"\x00" * 6)
    np.save(tmp_path / "a.npy", np.array(get_encoding("gpt2").encode("hello"), dtype="<u2"))
    (tmp_path / "ids").mkdir()
    (tmp_path / "docs.jsonl").write_text('{"text": "fine"}\n{"text": \n')
    (tmp_path / "fields.jsonl").write_text('{"body": "fine"}\n')
    (tmp_path / "numbers.jsonl").write_text('{"text": 3}\n')
    assert message in cli(*args, status=2).stderr


def test_bounded_memory(tmp_path):
    """Files are read in chunks and a .bin a window at a time: 12 MB costs little more memory than 0.1 MB."""
    block = corpus_prefix("en_dictionary.txt", 1_000_000)
    (tmp_path / "small.txt").write_bytes(block[:100_000])
    (tmp_path / "big.txt").write_bytes(block * 12)
    oracle = tiktoken.get_encoding("gpt2")
    for name in ("small", "big"):
        ids = oracle.encode_ordinary((tmp_path / f"{name}.txt").read_text(encoding="utf-8"))
        np.array(ids, dtype="<u2").tofile(tmp_path / f"{name}.bin")
    measure = ("import resource, sys; from tokenizer.cli import main; status = main(sys.argv[1:], prog='t'); "
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(status)")
    for extra in ([], ["--ids"]):
        peak_kib = {}
        for name in ("small", "big"):
            args = ["parity", f"{name}.txt", "--encoding", "gpt2"] + (extra and [*extra, f"{name}.bin"])
            proc = subprocess.run([sys.executable, "-c", measure, *args], cwd=tmp_path, capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
            assert proc.returncode == 0, proc.stderr
            assert "identical: 1 check" in proc.stdout
            peak_kib[name] = int(proc.stderr.split()[-1])
        assert peak_kib["big"] - peak_kib["small"] < 100 * 1024, (extra, peak_kib)


def test_a_tokenizer_json_with_several_splits_is_shown_at_its_own_pre_tokens(cli, tmp_path):
    # DeepSeek V3 splits numbers, CJK runs and words in three steps, which its one pattern does not cover: the
    # pre-tokens of a difference were cut by that pattern alone, and a difference ended in an IndexError
    deepseek = load(ENCODINGS_DIR / "hf" / "deepseek_v3")
    text = "CMPP 常见问题 2024年 x\n"
    pieces = parity.pretokens(deepseek, text)
    assert "".join(pieces) == text and pieces == deepseek.text_steps.split(text)
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    llama3 = str(ENCODINGS_DIR / "hf" / "llama3")
    out = cli("text.txt", "--encoding", str(ENCODINGS_DIR / "hf" / "deepseek_v3"), "--against", llama3,
              status=1).stdout.splitlines()
    assert out[1] == "  1. byte 0, line 1: 'CMPP'  utf-8: 43 4d 50 50"
    assert out[-1] == "different: 1 of 1 check"


def test_docstring_examples():
    result = doctest.testmod(parity)
    assert result.failed == 0 and result.attempted > 0


def test_pretokens_are_our_split():
    """What a mismatch calls a pre-token is what encode() encodes on its own: the pattern's pieces, and each
    special token that is encoded as one."""
    enc = get_encoding("cl100k_base")
    text = "Hello <|endoftext|>world's  end\n"
    pieces = parity.pretokens(enc, text, enc.special_tokens_set)
    assert pieces == ["Hello", " ", "<|endoftext|>", "world", "'s", " ", " end", "\n"]
    assert [i for p in pieces for i in enc.encode(p, allowed_special="all")] == enc.encode(text, allowed_special="all")
    split = compile_pattern(enc.pat_str).split
    assert parity.pretokens(enc, text) == split(text)



def test_parity_offline_checks_against_tiktokens_engine_on_the_checksummed_tables(tmp_path, monkeypatch):
    """No network and nothing in tiktoken's cache: parity still runs, tiktoken's engine on the tables this project
    read from its own checksummed files, and says so (it was a raw HTTPSConnectionPool error, exit 2). In this
    process: tiktoken's fetch is made to fail here."""
    from conftest import check_command, run_command

    def unreachable(name):
        raise ConnectionError(f"HTTPSConnectionPool(host='openaipublic.blob.core.windows.net'): {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unreachable)
    (tmp_path / "t.txt").write_text("Hello, world! naïve 🙂 <|endoftext|>", encoding="utf-8")
    args = ["parity", "t.txt", "--encoding", "gpt2,cl100k_base", "--allowed_special", "all"]
    out = check_command(run_command(args, cwd=tmp_path, own_process=False), 0).stdout
    assert "tiktoken engine with gpt2's tables (tiktoken could not fetch its own files: offline?)" in out
    assert out.rstrip().endswith("identical: 2 checks")


def tokenizer_pair(folder, merged: bytes, normalizer: dict | None = None) -> None:
    """folder/ours and folder/theirs: tokenizer.json files with the same ids (and <|endoftext|>), ours with the
    one merge that makes ``merged`` (two bytes) and theirs without it, so that they differ wherever ``merged``
    is encoded as text; both with ``normalizer``."""
    vocab = {i: bytes([i]) for i in range(256)} | {256: merged}
    enc = Encoding.from_vocab_merges(vocab, [(merged[:1], merged[1:])], special_tokens={"<|endoftext|>": 257})
    for name in ("ours", "theirs"):
        enc.save(folder / name, format="hf")
        spec = json.loads((folder / name / "tokenizer.json").read_text(encoding="utf-8"))
        spec["normalizer"] = normalizer
        if name == "theirs":
            spec["model"]["merges"] = []
        (folder / name / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")


def test_a_difference_after_normalized_text_is_placed_in_the_file(cli, tmp_path):
    # NFC encodes "e" + U+0301 as "é", a byte shorter: a difference after it was placed by the normalized text's
    # bytes and lines (byte 9 of this file's " ab", which is at byte 12), nowhere a user could find it
    tokenizer_pair(tmp_path, b"ab", {"type": "NFC"})
    text = "e\u0301" * 3 + "\nxx ab <|endoftext|>e\u0301\u0301\n ab\n"
    data = text.encode("utf-8")
    places = [data.index(b" ab"), data.rindex(b" ab")]
    (tmp_path / "t.txt").write_bytes(data)
    out = cli("t.txt", "--encoding", "ours/tokenizer.json", "--against", "theirs/tokenizer.json",
              "--allowed_special", "all", status=1).stdout.splitlines()
    assert [line for line in out if line.startswith("  ") and ". byte " in line] == [
        f"  1. byte {places[0]}, line 2: ' ab'  utf-8: 20 61 62",
        f"  2. byte {places[1]}, line 3: ' ab'  utf-8: 20 61 62",
    ]
    # the same text as a .jsonl record, and a .bin of ours ids with the second " ab" changed
    (tmp_path / "t.jsonl").write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    report = json.loads(cli("t.jsonl", "--encoding", "ours/tokenizer.json", "--against", "theirs/tokenizer.json",
                            "--allowed_special", "all", "--json", status=1).stdout)
    assert [(m["record"], m["offset"], m["line"]) for m in report["checks"][0]["shown"]] == [
        (1, places[0], 2), (1, places[1], 3)]
    ours = load(tmp_path / "ours" / "tokenizer.json")
    ids = ours.encode(text, allowed_special="all")
    ids[ids.index(256, ids.index(257))] = 99
    np.array(ids, dtype="<u2").tofile(tmp_path / "t.bin")
    report = json.loads(cli("t.txt", "--ids", "t.bin", "--encoding", "ours/tokenizer.json", "--allowed_special",
                            "all", "--json", status=1).stdout)
    assert [(m["offset"], m["line"]) for m in report["checks"][0]["shown"]] == [(places[1], 3)]


def test_a_difference_after_invalid_utf8_read_as_replacement_characters_is_placed_in_the_file(cli, tmp_path):
    # --errors replace reads each run of invalid bytes as U+FFFD, 3 bytes of text for 1 to 3 of the file: the
    # places after one counted the text's bytes (byte 8 for this file's " ab" at byte 4)
    tokenizer_pair(tmp_path, b"ab")
    data = b"x\xff\xfe\n ab\n\xf0\x9f\x98 ab \xef\xbf\xbd ab\n"  # 2 invalid bytes, a cut emoji, a real U+FFFD
    (tmp_path / "bad.txt").write_bytes(data)
    places = [k for k in range(len(data)) if data.startswith(b" ab", k)]
    lines = [data[:k].count(b"\n") + 1 for k in places]
    report = json.loads(cli("bad.txt", "--encoding", "ours", "--against", "theirs", "--errors", "replace", "--json",
                            status=1).stdout)
    assert [(m["offset"], m["line"]) for m in report["checks"][0]["shown"]] == list(zip(places, lines))
    # and the ids, with the last " ab" changed (edits a few ids apart may be one difference in a .bin)
    ids = load(tmp_path / "ours" / "tokenizer.json").encode(data.decode("utf-8", errors="replace"))
    ids[len(ids) - 1 - ids[::-1].index(256)] = 99
    np.array(ids, dtype="<u2").tofile(tmp_path / "bad.bin")
    report = json.loads(cli("bad.txt", "--ids", "bad.bin", "--encoding", "ours", "--errors", "replace", "--json",
                            status=1).stdout)
    assert [(m["offset"], m["line"]) for m in report["checks"][0]["shown"]] == [(places[-1], lines[-1])]


def test_ids_of_documents_against_another_side_are_checked_as_encode_file_wrote_them(cli, tmp_path):
    # encode-file writes a document as encode_ordinary(text) + <|endoftext|>, and --ids checked that; but with
    # --against each record went to both sides with the command's special-token rule: refused by default (exit 2
    # for a .bin that was right), and with --allowed_special all its special-token text became the special id on
    # both sides, so ids that differ from the other side's (here "<|" as text) were called identical
    tokenizer_pair(tmp_path, b"<|")
    texts = ["a <|endoftext|> b", "plain"]
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    ours = load(tmp_path / "ours" / "tokenizer.json")
    np.array([i for t in texts for i in ours.encode_ordinary(t) + [ours.eot_token]], dtype="<u2").tofile(
        tmp_path / "docs.bin")
    for rule in ([], ["--allowed_special", "all"]):
        report = json.loads(cli("docs.jsonl", "--ids", "docs.bin", "--encoding", "ours", "--against", "theirs",
                                *rule, "--json", status=1).stdout)
        ids_check, against_check = report["checks"]
        assert ids_check["identical"] and not against_check["identical"]
        assert [(m["record"], m["pretokens"], m["ours"]["ids"], m["theirs"]["ids"])
                for m in against_check["shown"]] == [(1, [" <|"], [32, 256], [32, 60, 124])]
