"""``decode --ids FILE.bin``: a file of token ids (nanoGPT's ``train.bin``, what ``encode-file`` and
``encode-dataset`` write) read back as text, whole or a slice of it, a window at a time, with the output rule of
every command. The oracles: the text files from ../shared/corpus that were encoded (a round trip gives back their
bytes), and ``Encoding.decode`` of the ids NumPy reads from the file."""

from __future__ import annotations

import io
import json
import os
import sys

import numpy as np
import pytest

import tokenizer.cli
import tokenizer.command_line
from conftest import CORPUS, PROG
from tokenizer import get_encoding
from tokenizer.jobs.id_files import IdsFile


def corpus_prefix(name: str, limit: int) -> bytes:
    data = (CORPUS / name).read_bytes()[:limit]
    return data[: len(data.decode("utf-8", errors="ignore").encode("utf-8"))]  # whole characters only


@pytest.fixture
def en_bin(cli, tmp_path):
    """en.txt (1.2 MB of ../shared/corpus/en_docs.txt, its <|endoftext|> separators as their id) and en.bin, as
    encode-file writes it."""
    text = corpus_prefix("en_docs.txt", 1_200_000)
    (tmp_path / "en.txt").write_bytes(text)
    cli("encode-file", "en.txt", "--out", "en.bin", "--allowed_special", "all", "--workers", "2")
    return text, np.fromfile(tmp_path / "en.bin", dtype="<u2")


def test_a_bin_decodes_back_to_the_text_encode_file_read(cli, tmp_path, en_bin):
    text, ids = en_bin
    out = cli("decode", "--ids", "en.bin", "--out", "back.txt").stdout
    assert (tmp_path / "back.txt").read_bytes() == text
    assert out == f"back.txt: {len(ids):,} ids (uint16) of en.bin from index 0 decoded into {len(text):,} bytes of " \
                  "text (gpt2)\n"
    assert cli("decode", "--ids", "en.bin").stdout.encode("utf-8") == text  # to stdout: the text alone


def test_a_slice_of_a_bin_is_the_text_of_those_ids(cli, en_bin):
    _, ids = en_bin
    enc = get_encoding("gpt2")
    for start, count in ((0, 1), (1000, 200), (len(ids) - 5, 100), (12_345, 1)):
        args = ["decode", "--ids", "en.bin", "--start", str(start), "--count", str(count)]
        assert cli(*args).stdout == enc.decode(ids[start:start + count].tolist()), (start, count)
    assert cli("decode", "--ids", "en.bin", "--start", str(len(ids) - 3)).stdout == enc.decode(ids[-3:].tolist())
    stderr = cli("decode", "--ids", "en.bin", "--start", str(len(ids)), status=2).stderr
    assert f"--start {len(ids):,}: en.bin holds {len(ids):,} ids (uint16), indexed from 0 to {len(ids) - 1:,}" in stderr


@pytest.mark.parametrize("window", [1, 7, 1000])
def test_windows_join_a_character_cut_between_them(tmp_path, monkeypatch, capsys, window):
    # Japanese: a character is often two ids, so many windows end inside one, which must not become U+FFFD
    text = corpus_prefix("ja_manpages.txt", 20_000).decode("utf-8")
    enc = get_encoding("gpt2")
    ids = enc.encode(text)
    np.array(ids, dtype="<u2").tofile(tmp_path / "ja.bin")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tokenizer.cli, "DECODE_WINDOW_IDS", window)
    read = []
    peek = IdsFile.peek
    monkeypatch.setattr(IdsFile, "peek", lambda self, count: read.append(count) or peek(self, count))
    assert tokenizer.cli.main(["decode", "--ids", "ja.bin", "--out", "back.txt"], prog=PROG) == 0
    assert (tmp_path / "back.txt").read_text(encoding="utf-8") == text
    assert max(read) <= max(window, 1024)  # never more than a window (or the first 1,024, looked at for a note)
    capsys.readouterr()
    # a slice that starts and ends inside characters: U+FFFD for each part, as decode() has it
    start = next(k for k, piece in enumerate(enc.decode_tokens_bytes(ids)) if piece[:1] >= b"\x80")
    assert tokenizer.cli.main(["decode", "--ids", "ja.bin", "--start", str(start), "--count", "5"], prog=PROG) == 0
    assert capsys.readouterr().out == enc.decode(ids[start:start + 5]) and "\ufffd" in enc.decode(ids[start:start + 5])


def test_encode_dataset_shards_decode_back_with_the_manifest_s_dtype(cli, tmp_path):
    # cl100k_base: uint32 ids; a .txt shard is its text, a .jsonl shard each document then <|endoftext|>
    (tmp_path / "data").mkdir()
    fr = corpus_prefix("fr_manpages.txt", 100_000)
    (tmp_path / "data" / "fr.txt").write_bytes(fr)
    documents = ["Bonjour <|endoftext|> à tous", "第二の文書\n", ""]
    (tmp_path / "data" / "docs.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in documents),
                                                  encoding="utf-8")
    cli("encode-dataset", "data", "--out", "shards", "--encoding", "cl100k_base", "--workers", "1")
    cli("decode", "--ids", "shards/fr.bin", "--encoding", "cl100k_base", "--out", "fr.txt")
    assert (tmp_path / "fr.txt").read_bytes() == fr
    docs = cli("decode", "--ids", "shards/docs.bin", "--encoding", "cl100k_base").stdout
    assert docs == "".join(d + "<|endoftext|>" for d in documents)
    # the manifest says what wrote them: another encoding or another --dtype is told, not decoded into nonsense
    stderr = cli("decode", "--ids", "shards/fr.bin", status=2).stderr
    assert "--ids shards/fr.bin: its folder's manifest.json says it was written with cl100k_base, not gpt2: pass " \
           "that --encoding" in stderr
    stderr = cli("decode", "--ids", "shards/fr.bin", "--encoding", "cl100k_base", "--dtype", "uint16", status=2).stderr
    assert "--dtype uint16: shards/fr.bin's folder's manifest.json says its ids are uint32: drop --dtype" in stderr


def test_a_bin_of_the_other_dtype_is_told_with_the_flag_to_pass(cli, tmp_path, en_bin):
    text, ids = en_bin
    ids.astype("<u4").tofile(tmp_path / "wide.bin")  # gpt2's ids written as uint32: every other uint16 is 0 ("!")
    for start in ("0", "1"):  # (from index 1 the ids read as 0 come first)
        proc = cli("decode", "--ids", "wide.bin", "--count", "10", "--start", start)
        assert proc.stderr == f"note: in wide.bin, every other one of the 1,024 ids from index {start} is 0: was it " \
                              "written as uint32? pass --dtype uint32\n"
    assert cli("decode", "--ids", "en.bin", "--count", "10").stderr == ""  # the right type: no note
    cli("decode", "--ids", "wide.bin", "--dtype", "uint32", "--out", "wide.txt")
    assert (tmp_path / "wide.txt").read_bytes() == text
    # uint16 ids read as uint32 (cl100k_base's type) are out of its range: told where, with the flag
    stderr = cli("decode", "--ids", "en.bin", "--encoding", "cl100k_base", status=2).stderr
    first = int(ids[0]) + (int(ids[1]) << 16)
    assert f"--ids en.bin index 0: token id {first} is not in the vocabulary of 'cl100k_base' (ids run from 0 to " \
           "100276); was it written as uint16? pass --dtype uint16; or was it written with another encoding? pass " \
           "its --encoding" in stderr


def test_files_that_are_no_bin_are_refused_in_one_line(cli, tmp_path, en_bin):
    _, ids = en_bin
    np.save(tmp_path / "ids.npy", ids)
    stderr = cli("decode", "--ids", "ids.npy", status=2).stderr
    assert "ids.npy is a NumPy .npy file (a header, then the array), not a flat file of ids as nanoGPT's .bin: " \
           "save its array with np.load('ids.npy').tofile('ids.bin') and decode ids.bin" in stderr
    (tmp_path / "odd.bin").write_bytes(b"\x01\x02\x03")
    assert "odd.bin is 3 bytes, not a whole number of uint16 ids, nor of uint32 ids" in cli(
        "decode", "--ids", "odd.bin", status=2).stderr
    (tmp_path / "six.bin").write_bytes(b"\x01\x00" * 3)
    assert "six.bin is 6 bytes, not a whole number of uint32 ids; was it written as uint16? pass --dtype uint16" in \
        cli("decode", "--ids", "six.bin", "--encoding", "cl100k_base", status=2).stderr
    assert "ids file not found: missing.bin" in cli("decode", "--ids", "missing.bin", status=2).stderr
    assert "is a folder; name the .bin file of ids" in cli("decode", "--ids", ".", status=2).stderr
    os.mkfifo(tmp_path / "fifo.bin")
    assert "fifo.bin is not a regular file; save the ids to a file" in cli(
        "decode", "--ids", "fifo.bin", status=2).stderr


@pytest.mark.parametrize("args, message", [
    (["decode", "--ids", "en.bin", "31373"], "--ids FILE.bin decodes the ids in that file: pass no ids with it"),
    (["decode", "31373", "--start", "5"], "--start is an index in --ids FILE.bin: pass it with --ids"),
    (["decode", "31373", "--count", "5"], "--count is how many ids of --ids FILE.bin: pass it with --ids"),
    (["decode", "31373", "--dtype", "uint32"], "--dtype is the type of the ids in --ids FILE.bin: pass it with --ids"),
    (["decode", "--ids", "en.bin", "--count", "0"], "--count: expected a positive whole number, got '0'"),
    (["decode", "--ids", "en.bin", "--start", "-1"], "--start: expected a whole number from 0, got '-1'"),
    (["decode", "--ids", "en.bin", "--out", "en.bin", "--force"], "--out en.bin is the --ids file it would read"),
    (["decode", "--ids", "en.bin", "--out", "en.txt"], "--out en.txt already exists; pass --force to replace it"),
    (["decode", "--ids", "en.bin", "--out", "/dev/null"], "--out /dev/null is a character device, not a regular "
     "file: the output would replace it; name a regular file, or pass --out - and redirect standard output to it"),
    (["decode", "31373", "--out", ""], "--out '': an empty path; name a file"),
    (["decode", "--ids", "-"], "--ids -: a .bin is read from a file, whose size tells how many ids it holds"),
])
def test_decode_mistakes_are_one_line_and_exit_2(cli, en_bin, args, message):
    assert message in cli(*args, status=2).stderr


def test_an_unknown_id_leaves_no_output_file(tmp_path, monkeypatch, capsys):
    ids = get_encoding("gpt2").encode("hello world " * 50) + [50257]  # past the vocabulary, in the last window
    np.array(ids, dtype="<u2").tofile(tmp_path / "bad.bin")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tokenizer.cli, "DECODE_WINDOW_IDS", 10)
    assert tokenizer.cli.main(["decode", "--ids", "bad.bin", "--out", "bad.txt"], prog=PROG) == 2
    assert f"--ids bad.bin index {len(ids) - 1}: token id 50257 is not in the vocabulary of 'gpt2'" in \
        capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.bin"]  # no bad.txt, no partial file


def test_a_progress_bar_only_when_the_text_goes_elsewhere_than_the_terminal(tmp_path, monkeypatch):
    np.array(get_encoding("gpt2").encode("hello world"), dtype="<u2").tofile(tmp_path / "x.bin")
    monkeypatch.chdir(tmp_path)
    bars = []
    real_bar = tokenizer.cli.bar_if_slow
    monkeypatch.setattr(tokenizer.cli, "bar_if_slow", lambda **options: bars.append(options) or real_bar(**options))
    assert tokenizer.cli.main(["decode", "--ids", "x.bin", "--out", "x.txt"], prog=PROG) == 0
    monkeypatch.setattr(sys, "stdout", Terminal(io.BytesIO(), encoding="utf-8"))
    assert tokenizer.cli.main(["decode", "--ids", "x.bin"], prog=PROG) == 0
    assert [(bar["total"], bar["disable"]) for bar in bars] == [(2, False), (2, True)]
    # and bar_if_slow draws one when a person watches stderr, unless told not to
    monkeypatch.setattr(tokenizer.command_line, "show_progress", lambda: True)
    assert [real_bar(total=2, disable=hidden).disable for hidden in (False, True)] == [False, True]
    monkeypatch.setattr(tokenizer.command_line, "show_progress", lambda: False)
    assert real_bar(total=2, disable=False).disable


class Terminal(io.TextIOWrapper):
    def isatty(self):
        return True


def test_ctrl_c_leaves_no_output_file(tmp_path, monkeypatch, capsys):
    np.array(get_encoding("gpt2").encode("hello world " * 100), dtype="<u2").tofile(tmp_path / "x.bin")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tokenizer.cli, "DECODE_WINDOW_IDS", 10)
    calls = []
    peek = IdsFile.peek

    def interrupted_at_the_fifth_window(self, count):
        calls.append(count)
        if len(calls) == 6:  # (the first look is for the note on the type)
            raise KeyboardInterrupt
        return peek(self, count)

    monkeypatch.setattr(IdsFile, "peek", interrupted_at_the_fifth_window)
    assert tokenizer.cli.main(["decode", "--ids", "x.bin", "--out", "out/x.txt"], prog=PROG) == 130
    assert capsys.readouterr().err == f"{PROG}: interrupted\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.bin"]  # no x.txt, no partial, no out/ made for it


@pytest.mark.parametrize("encoding", ["gpt2", "o200k_base"])  # uint16 and uint32 ids; 1 MB of every corpus
def test_every_corpus_round_trips_through_encode_file_and_decode_ids(tmp_path, monkeypatch, encoding):
    from tokenizer.jobs.dataset import encode_file

    monkeypatch.chdir(tmp_path)
    for path in sorted(CORPUS.glob("*.txt")):
        text = corpus_prefix(path.name, 1_000_000)
        (tmp_path / "in.txt").write_bytes(text)
        encode_file("in.txt", "in.bin", encoding=encoding, workers=1, progress=False, overwrite=True)
        argv = ["decode", "--ids", "in.bin", "--encoding", encoding, "--out", "back.txt", "--force"]
        assert tokenizer.cli.main(argv, prog=PROG) == 0
        assert (tmp_path / "back.txt").read_bytes() == text, path.name


def test_a_bad_ids_file_is_told_before_the_vocabulary_loads(tmp_path, monkeypatch, capsys):
    # a vocabulary not yet in the cache is a download: a missing file or a .npy is said first
    np.save(tmp_path / "ids.npy", np.arange(10, dtype="<u2"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tokenizer.cli, "open_encoding", lambda name: pytest.fail("the vocabulary was loaded"))
    for ids_file, said in (("missing.bin", "ids file not found: missing.bin"), ("ids.npy", "is a NumPy .npy file"),
                           (".", "is a folder; name the .bin file of ids")):
        assert tokenizer.cli.main(["decode", "--ids", ids_file, "--encoding", "cl100k_base"], prog=PROG) == 2
        assert said in capsys.readouterr().err


def test_a_tokenizer_json_without_a_decoder_decodes_to_the_text_in_both_forms(cli, tmp_path):
    # a tokenizer.json whose "decoder" is null: Encoding.decode gives, as HF's decode, the tokens' strings joined
    # ("ab Ġw Ã¶r"), and decode ID... printed that, where decode --ids of the same ids printed the text
    from tokenizer import load
    from tokenizer.vocab_files import token_to_gpt2_str

    level = {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True, "trim_offsets": True}
    vocab = {token_to_gpt2_str(bytes([b])): b for b in range(256)} | {"ab": 256}
    special = {"id": 257, "content": "<s>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
               "single_word": False}
    data = {"version": "1.0", "added_tokens": [special], "normalizer": None, "pre_tokenizer": level,
            "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "vocab": vocab, "merges": ["a b"], "ignore_merges": False}}
    (tmp_path / "nodecoder").mkdir()
    (tmp_path / "nodecoder" / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    text = "ab wör<s>\n你 ab"
    (tmp_path / "t.txt").write_text(text, encoding="utf-8")
    ids = [int(i) for i in cli("encode", text, "--encoding", "nodecoder", "--allowed_special", "all").stdout.split()]
    enc = load(tmp_path / "nodecoder")
    assert 256 in ids and 257 in ids and enc.decode(ids) != text  # HF's joined strings, as the library keeps them
    cli("encode-file", "t.txt", "--out", "t.bin", "--encoding", "nodecoder", "--allowed_special", "all")
    assert np.fromfile(tmp_path / "t.bin", dtype="<u2").tolist() == ids
    from_file = cli("decode", "--ids", "t.bin", "--encoding", "nodecoder").stdout
    from_args = cli("decode", *map(str, ids), "--encoding", "nodecoder").stdout
    from_stdin = cli("decode", "-", "--encoding", "nodecoder", stdin=" ".join(map(str, ids)).encode()).stdout
    assert from_file == from_args == from_stdin == text
    assert '"decoder" is null' in " ".join(cli("decode", "--help").stdout.split())
