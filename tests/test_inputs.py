"""tokenizer/jobs/inputs.py: how every file command names its inputs and reads their documents, and standard
input (``-``) through the commands. The oracles are the files the tests write and the library's own encode."""

from __future__ import annotations

import doctest
import gzip
import json
import sys

import numpy as np
import pytest

from conftest import PROG
from tokenizer import get_encoding
from tokenizer.jobs import inputs
from tokenizer.jobs.inputs import STDIN, find_inputs, read_records


def test_files_folders_globs_and_stdin_in_order_each_once(tmp_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    for name in ("d/b.txt", "d/sub/a.jsonl", "d/notes.md", "c.txt", "x.csv"):
        (tmp_path / name).write_text("x")
    found = find_inputs([tmp_path / "x.csv", str(tmp_path / "d"), str(tmp_path / "*.txt"), "-",
                         tmp_path / "d" / "b.txt"])
    # a named file of any kind; a folder's known formats, sorted; a glob's matches; stdin; no file twice
    assert found == [tmp_path / "x.csv", tmp_path / "d" / "b.txt", tmp_path / "d" / "sub" / "a.jsonl",
                     tmp_path / "c.txt", STDIN]
    with pytest.raises(ValueError, match="named twice"):
        find_inputs(["-", "-"])
    with pytest.raises(ValueError, match="no input given"):
        find_inputs([])


def test_records_of_every_format_with_their_lines(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = '{"text": "one"}\n\n{"text": ""}\n{"text": "three", "id": 3}\n'
    (tmp_path / "a.jsonl").write_text(lines)
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.write(lines)
    pq.write_table(pa.table({"text": ["one", "", "three"]}), tmp_path / "a.parquet", row_group_size=2)
    for name, numbers in (("a.jsonl", [1, 3, 4]), ("a.jsonl.gz", [1, 3, 4]), ("a.parquet", [1, 2, 3])):
        records = list(read_records(tmp_path / name))
        assert [(r.text, r.number) for r in records] == list(zip(["one", "", "three"], numbers)), name
        assert records[-1].done <= (tmp_path / name).stat().st_size
    # a range of a .jsonl file starts at a line; its records have no number, its errors still name the line
    start = len('{"text": "one"}\n\n')
    assert [r.text for r in read_records(tmp_path / "a.jsonl", start=start)] == ["", "three"]
    (tmp_path / "b.jsonl").write_text(lines + "{oops\n")
    with pytest.raises(ValueError, match=r"^.*b\.jsonl line 5: not JSON \(.*at column 2\); a \.jsonl file"):
        list(read_records(tmp_path / "b.jsonl", start=start))


def test_missing_pyarrow_is_said_before_any_work(tmp_path, monkeypatch):
    (tmp_path / "a.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"pip install 'ray>=2.9' 'pyarrow>=14'"):
        find_inputs([tmp_path])


def test_docstring_examples():
    result = doctest.testmod(inputs)
    assert result.attempted > 0 and result.failed == 0


# ---- standard input through the commands (conftest.py's ``cli``: in this process, and in its own) -----------

TEXT = "A story about a cat.<|endoftext|>Another one, about a dog.\n" * 50


def test_count_stats_encode_file_and_parity_read_stdin(cli, tmp_path):
    enc = get_encoding("gpt2")
    ids = enc.encode(TEXT, allowed_special="all")
    data = TEXT.encode()
    out = cli("count", "-", "--allowed_special", "all", stdin=data).stdout
    assert out.startswith(f"stdin: {len(ids):,} tokens, {len(data):,} bytes")
    out = cli("stats", "-", "--encodings", "gpt2,cl100k_base", "--allowed_special", "all", stdin=data).stdout
    assert f"| stdin | gpt2 | {len(data):,} | {len(ids):,} |" in out and "| stdin | cl100k_base |" in out
    cli("encode-file", "-", "--out", "out.bin", "--allowed_special", "all", stdin=data)
    assert np.fromfile(tmp_path / "out.bin", dtype="<u2").tolist() == ids
    out = cli("parity", "-", "--allowed_special", "all", stdin=data).stdout
    assert "identical: 3 checks" in out and "stdin" in out
    err = cli("encode-file", "-", stdin=data, status=2).stderr
    assert "--out" in err


def test_errors_about_a_copy_of_stdin_name_stdin(cli, tmp_path):
    # stats and parity read standard input twice, from a temporary copy: their errors named that copy's path
    bad = b"fine\n\xff"
    for command in (["stats", "-", "--encodings", "gpt2"], ["parity", "-", "--encoding", "gpt2"]):
        err = cli(*command, stdin=bad, status=2).stderr
        assert ": error: stdin is not valid UTF-8: byte 5 is b'\\xff'" in err and "tokenizer-stdin-" not in err
    err = cli("parity", "-", "--encoding", "gpt2", stdin=b"a <|endoftext|> b", status=2).stderr
    assert ": error: stdin: The text contains the special token '<|endoftext|>'" in err
    # --ids: ids left over after the text are shown at its last line, as for a file
    ids = get_encoding("gpt2").encode("one\ntwo")
    np.array(ids + [995], dtype="<u2").tofile(tmp_path / "long.bin")
    out = cli("parity", "-", "--ids", "long.bin", stdin=b"one\ntwo", status=1).stdout.splitlines()
    assert out[0].startswith(f"stdin: gpt2 vs long.bin: DIFFERENT at 1 place (0 pre-tokens); 7 bytes, {len(ids)} ")
    assert out[1] == f"  1. byte 7, line 2, .bin index {len(ids)}: (the end of the text)  utf-8: -"


def test_train_reads_stdin_like_a_file(cli, tmp_path):
    (tmp_path / "corpus.txt").write_text(TEXT)
    cli("train", "--input", "-", "--vocab_size", "300", "--out", "from_stdin", stdin=TEXT.encode())
    cli("train", "--input", "corpus.txt", "--vocab_size", "300", "--out", "from_file", stdin=b"")
    assert (tmp_path / "from_stdin" / "vocab.bpe").read_bytes() == (tmp_path / "from_file" / "vocab.bpe").read_bytes()
    err = cli("train", "--input", "-", "--vocab_size", "300", "--out", "x", "--resume", stdin=b"",
              status=2).stderr
    assert "standard input cannot be read twice" in err


DAMAGED_GZ_COMMANDS = [["count"], ["encode-file", "--out", "d.bin"], ["encode-dataset", "--out", "out"],
                       ["train", "--vocab_size", "300", "--out", "tok"], ["parity", "--encoding", "gpt2"]]


@pytest.mark.parametrize("command", DAMAGED_GZ_COMMANDS)
@pytest.mark.parametrize("damage", ["cut short", "corrupt"])
def test_a_damaged_jsonl_gz_is_named_in_one_line(cli, tmp_path, command, damage):
    # gzip says EOFError for a cut file and zlib.error for corrupt data, neither an OSError: both were tracebacks
    lines = "".join(json.dumps({"text": f"document {k} " + "word " * (k % 50)}) + "\n" for k in range(2000))
    data = gzip.compress(lines.encode(), mtime=0)
    damaged = data[: len(data) // 2] if damage == "cut short" else data[:40] + bytes(64) + data[104:]
    (tmp_path / "d.jsonl.gz").write_bytes(damaged)
    name = command[:1] + (["--input"] if command[0] == "train" else []) + ["d.jsonl.gz"] + command[1:]
    err = cli(*name, status=2).stderr
    assert err.startswith(f"{PROG}: error: d.jsonl.gz: the compressed data is damaged or cut short after line "), err
    assert err.endswith("; compress the file again, or fetch it again\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl.gz"]  # no output left


def test_count_reads_documents_and_names_a_bad_line(cli, tmp_path):
    docs = ["first document", "second <|endoftext|> document"]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in docs) + "[1]\n")
    err = cli("count", "d.jsonl", "--text_field", "body", stdin=b"", status=2).stderr
    assert err == f'{PROG}: error: d.jsonl line 3: a JSON list, not an object with a "body" field; a .jsonl file ' \
                  "holds one JSON object per line\n"
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"body": d}) + "\n" for d in docs))
    out = cli("count", "d.jsonl", "--text_field", "body", "--disallowed_special", "none", stdin=b"").stdout
    enc = get_encoding("gpt2")
    tokens = sum(len(enc.encode(d, disallowed_special=())) for d in docs)
    assert out.startswith(f"d.jsonl: {tokens} tokens, {sum(len(d) for d in docs)} bytes")


def test_records_count_the_bytes_of_their_text_read_as_u_fffd(tmp_path):
    # errors="replace": a record said how many invalid bytes its text holds as U+FFFD (count, stats and
    # encode-file reported none for any .jsonl input); only those in the text field count, not the file's own U+FFFD
    lines = [
        b'{"text": "ok \xff there \xe2\x82 x"}',  # a lone byte and a cut character (2 bytes): 3
        b'{"id": "\xfe\xfe", "text": "fine"}',  # invalid bytes in another field: read, never encoded
        '{"text": "own \ufffd and \\ufffd, then '.encode("utf-8") + b'\xc3"}',  # the file's two U+FFFD, one bad byte
        b'{"text": "valid"}',
        # a bad byte in another field's name; the file's U+FFFD in both fields, then a bad byte in the text
        b'{"te\xffxt": "\xef\xbf\xbd", "text": "\xef\xbf\xbd\xfe"}',
    ]
    (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    records = list(read_records(tmp_path / "bad.jsonl", errors="replace"))
    assert [(r.text, r.replaced, r.inserted) for r in records] == [
        ("ok \ufffd there \ufffd x", 3, 2), ("fine", 0, 0), ("own \ufffd and \ufffd, then \ufffd", 1, 1),
        ("valid", 0, 0), ("\ufffd\ufffd", 1, 1)]
    with gzip.open(tmp_path / "bad.jsonl.gz", "wb") as f:
        f.write(b"\n".join(lines))
    assert [r.replaced for r in read_records(tmp_path / "bad.jsonl.gz", errors="replace")] == [3, 0, 1, 0, 1]
    with pytest.raises(ValueError, match=r"bad\.jsonl line 1 is not valid UTF-8: byte 13 is b'\\xff'"):
        list(read_records(tmp_path / "bad.jsonl"))
