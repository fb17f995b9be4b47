"""``--encoding PATH`` wherever a user names an encoding, and ``parity --against hf``.

A path is a Hugging Face ``tokenizer.json``, its folder, or any folder :func:`tokenizer.load` reads
(:mod:`tokenizer.encoding_argument`). Everyday checks use a small tokenizer saved as ``tokenizer.json`` by this
project, which HF ``tokenizers`` reads too; the real files of ``../shared/encodings/hf`` (Llama 3 and GPT-OSS,
which load exactly today) are checked end to end, each command in its own process, in the exhaustive tier.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np
import pytest

from conftest import CORPUS, ENCODINGS_DIR, PROG, check_command, run_command
from tokenizer import Encoding, load
from tokenizer.cli import build_parser
from tokenizer.encoding_argument import looks_like_a_path, open_encoding, tokenizer_json

HF = ENCODINGS_DIR / "hf"
TEXT = "Hello, world! Hello again, wide world."
MERGES = [(b"l", b"l"), (b"H", b"e"), (b"He", b"ll"), (b"Hell", b"o"), (b" ", b"w"), (b" w", b"o"), (b"r", b"l"),
          (b" wo", b"rl"), (b" worl", b"d"), (b"i", b"d")]


def tiny_encoding() -> Encoding:
    vocab = {i: bytes([i]) for i in range(256)}
    for a, b in MERGES:
        vocab[len(vocab)] = a + b
    return Encoding.from_vocab_merges(vocab, MERGES, ["<|endoftext|>"], name="tiny")


@pytest.fixture
def tiny(tmp_path):
    """A small byte-level BPE saved as ``tiny/tokenizer.json`` in the folder the commands run in."""
    tiny_encoding().save(tmp_path / "tiny", format="hf")
    (tmp_path / "text.txt").write_text(TEXT * 3, encoding="utf-8")
    return tmp_path / "tiny"


def tiny_ids(text: str = TEXT) -> list[int]:
    return tiny_encoding().encode(text)


# ---- every command that names an encoding ------------------------------------------------------------------

# command -> its arguments besides the encoding, and the flag that names it
COMMANDS = {
    "encode": ([TEXT], "--encoding"),
    "decode": ([" ".join(map(str, tiny_ids()))], "--encoding"),
    "count": (["text.txt"], "--encoding"),
    "encode-file": (["text.txt", "--out", "OUT"], "--encoding"),
    "encode-dataset": (["text.txt", "--out", "OUT"], "--encoding"),
    "stats": (["text.txt", "--min-seconds", "0.01"], "--encodings"),
    "show": ([TEXT], "--encoding"),
    "explain": ([TEXT], "--encoding"),
    "compare": ([TEXT], "--encodings"),
    "parity": (["text.txt"], "--encoding"),  # against tiktoken's engine with its tables
    "serve": (["--port", "0"], "--encoding"),  # in this process only its mistakes (it serves until Ctrl-C)
}


def encoding_flags() -> dict[str, set[str]]:
    """Each subcommand of gpt2-tokenizer that names an encoding, and the flags it names it with."""
    parser = build_parser(PROG)
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = {name: {flag for action in sub._actions for flag in action.option_strings
                    if flag in ("--encoding", "--encodings")} for name, sub in commands.items()}
    return {name: named for name, named in flags.items() if named}


def test_the_table_holds_every_command_that_names_an_encoding():
    flags = encoding_flags()
    assert set(flags) == set(COMMANDS)
    assert all(flag in flags[name] for name, (_, flag) in COMMANDS.items())
    # the README's promise: --encoding NAME|PATH in every command that names one (a list's too, for one)
    assert all("--encoding" in named for named in flags.values())


def output_of(command: str, args: list[str], flag: str, encoding: str, cwd, out: str) -> str:
    args = [out if arg == "OUT" else arg for arg in args]
    proc = check_command(run_command([command, *args, flag, encoding], cwd=cwd, own_process=False), 0)
    return proc.stdout


def without_timings(out: str) -> str:
    """A command's output without what changes from run to run: speeds and times."""
    out = re.sub(r"\d+(\.\d+)? ?(MB/s|s\b|x as fast|days|hours|minutes)", "#", out)
    return re.sub(r"\| [\d.]+ \| # \|", "| # | # |", out)  # stats: the MB/s column, then the Pile's time


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "serve"])
def test_every_command_takes_a_tokenizer_json_or_its_folder(tiny, command):
    args, flag = COMMANDS[command]
    by_file = output_of(command, args, flag, "tiny/tokenizer.json", tiny.parent, "by_file")
    by_folder = output_of(command, args, flag, "tiny", tiny.parent, "by_folder")
    assert without_timings(by_file).replace("by_file", "OUT") == without_timings(by_folder).replace("by_folder", "OUT")
    if command in ("count", "stats"):
        assert "54" in by_file and "2.111" in by_file  # tokens, bytes/token
    if command == "encode":
        assert by_file.split() == [str(i) for i in tiny_ids()]
    if command == "decode":
        assert by_file == TEXT  # into a file or a pipe, the text exactly
    if command == "encode-file":
        assert np.fromfile(tiny.parent / "by_file", dtype="<u2").tolist() == tiny_ids(TEXT * 3)
    if command == "parity":
        assert "identical: 1 check" in by_file


def test_open_encoding_rule():
    assert open_encoding("gpt-2").name == "gpt2"
    assert looks_like_a_path("./gpt2") and looks_like_a_path("vocab.tiktoken") and not looks_like_a_path("gpt4")
    with pytest.raises(ValueError, match="is not a Hugging Face tokenizer.json"):
        tokenizer_json("gpt2")


def test_a_folder_named_twice_is_one_encoding_under_one_name(tiny, monkeypatch):
    # ./tiny and tiny/ (a symlink to it, its tokenizer.json) were read twice, as two tokenizers: stats and the
    # playground showed "tiny" and "tiny (saved)", as if a registered encoding or another folder had that name
    from tokenizer.registry import shown_names
    from tokenizer.serve import Playground

    (tiny.parent / "link").symlink_to(tiny, target_is_directory=True)
    monkeypatch.chdir(tiny.parent)
    spellings = ["./tiny", "tiny/", "link", str(tiny), "tiny/tokenizer.json", "link/tokenizer.json", "tiny"]
    encs = [open_encoding(name) for name in spellings]
    assert all(enc is encs[0] for enc in encs) and shown_names(encs) == ["tiny"] * len(spellings)
    assert Playground(encs).answer("/api/encodings", {})["encodings"][:2] == ["tiny", "gpt2"]
    out = output_of("stats", ["text.txt", "--min-seconds", "0"], "--encodings", ",".join(spellings), tiny.parent, "")
    assert [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| text.txt")] == \
        ["tiny"] * len(spellings)
    # its files written again (trained anew into the same folder): read anew
    vocab = {i: bytes([i]) for i in range(256)}
    Encoding.from_vocab_merges(vocab, [], ["<|endoftext|>"], name="tiny").save(tiny, format="hf", overwrite=True)
    again = open_encoding("tiny")
    assert again is not encs[0] and again.encode("Hello") == list(b"Hello")


# ---- paths that are wrong: one line, exit 2 ----------------------------------------------------------------

def bad_paths(folder) -> dict[str, str]:
    """A path -> what its one-line error says."""
    (folder / "empty").mkdir()
    (folder / "wordpiece").mkdir()
    (folder / "wordpiece" / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordPiece", "vocab": {}}}))
    return {
        "missing/tokenizer.json": "missing/tokenizer.json: no such file or folder; pass a registered encoding",
        "tokenizer.json": "tokenizer.json: no such file or folder",
        "empty": "empty: no saved encoding here (expected tokenizer.json",
        "wordpiece": "wordpiece/tokenizer.json: model 'WordPiece' is not supported; only byte-level BPE files load",
        "wordpiece/tokenizer.json": ("wordpiece/tokenizer.json: model 'WordPiece' is not supported; "
                                     "only byte-level BPE files load"),
        "llama": "Unknown encoding 'llama'. Known encodings: gpt2, ",
    }


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_wrong_path_is_one_line_and_exit_2_in_every_command(tmp_path, command):
    args, flag = COMMANDS[command]
    (tmp_path / "text.txt").write_text(TEXT, encoding="utf-8")
    for path, message in bad_paths(tmp_path).items():
        proc = run_command([command, *[a if a != "OUT" else "out" for a in args], flag, path], cwd=tmp_path,
                           own_process=False)
        stderr = check_command(proc, 2).stderr
        assert message in stderr, (command, path, stderr)
    assert not (tmp_path / "out").exists()


# ---- parity --against hf ------------------------------------------------------------------------------------


def test_parity_against_hf_reads_like_against_tiktoken(tiny):
    pytest.importorskip("tokenizers")
    import tokenizers

    run = [("parity", "text.txt", "--encoding", "tiny", "--against", "hf")]
    out = check_command(run_command(run[0], cwd=tiny.parent, own_process=False), 0).stdout.splitlines()
    assert out[0].startswith(f"text.txt: tiny vs HF tokenizers {tokenizers.__version__}: identical; "
                             f"{len(TEXT) * 3} bytes, {len(tiny_ids(TEXT * 3))} tokens; ours ")
    assert out[1:] == ["identical: 1 check"]
    # the fuzz, special tokens both ways; and JSON
    proc = run_command(["parity", "--fuzz", "50", "--encoding", "tiny/tokenizer.json", "--against", "hf", "--json"],
                       cwd=tiny.parent, own_process=False)
    report = json.loads(check_command(proc, 0).stdout)
    assert report["identical"] and [c["against"] for c in report["checks"]] == [
        f"HF tokenizers {tokenizers.__version__}"] * 2
    assert all(c["tokens"] > 0 for c in report["checks"])


def test_parity_against_hf_finds_a_difference(tiny, monkeypatch):
    """HF made to differ (its merges cut short), the report names the place, as against tiktoken."""
    data = json.loads((tiny / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["merges"] = data["model"]["merges"][:-1]  # "i d" gone: " wide" is split differently
    (tiny.parent / "cut").mkdir()
    (tiny.parent / "cut" / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    from tokenizer.jobs import parity

    real = parity.hf_counterpart
    monkeypatch.setattr(parity, "hf_counterpart", lambda file: real(tiny.parent / "cut" / "tokenizer.json"))
    proc = run_command(["parity", "text.txt", "--encoding", "tiny", "--against", "hf"], cwd=tiny.parent,
                       own_process=False)
    out = check_command(proc, 1).stdout
    assert "text.txt: tiny vs HF tokenizers" in out and "DIFFERENT at 3 places" in out and "' wide'" in out


def test_parity_of_a_bin_against_hf(tiny):
    """--ids with --against hf: the .bin against our ids, and our ids against HF's: the .bin against HF."""
    pytest.importorskip("tokenizers")
    check_command(run_command(["encode-file", "text.txt", "--out", "text.bin", "--encoding", "tiny"],
                              cwd=tiny.parent, own_process=False), 0)
    proc = run_command(["parity", "text.txt", "--ids", "text.bin", "--encoding", "tiny/tokenizer.json", "--against",
                        "hf"], cwd=tiny.parent, own_process=False)
    out = check_command(proc, 0).stdout.splitlines()
    assert out[0].startswith("text.txt: tiny vs text.bin: identical;") and "vs HF tokenizers" in out[1]
    assert out[-1] == "identical: 2 checks"


def test_parity_against_hf_mistakes_are_one_line_and_exit_2(tiny, monkeypatch):
    cases = {
        ("text.txt", "--encoding", "gpt2", "--against", "hf"):
            "--against hf checks a Hugging Face tokenizer.json: --encoding gpt2 is not a Hugging Face tokenizer.json",
        ("text.txt", "--encoding", "tiny", "--against", "nowhere"):
            "--against nowhere: no such file or folder; pass tiktoken, hf, or a saved tokenizer",
    }
    for args, message in cases.items():
        assert message in check_command(run_command(["parity", *args], cwd=tiny.parent, own_process=False), 2).stderr
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # not installed: `import tokenizers` raises ImportError
    stderr = check_command(run_command(["parity", "text.txt", "--encoding", "tiny", "--against", "hf"],
                                       cwd=tiny.parent, own_process=False), 2).stderr
    assert stderr == (f"{PROG}: error: parity against Hugging Face tokenizers needs tokenizers, which is not "
                      "installed: pip install tokenizers\n")
    # the other sides do not need it
    check_command(run_command(["parity", "text.txt", "--encoding", "tiny"], cwd=tiny.parent, own_process=False), 0)


# ---- the real files, each command in its own process (the exhaustive tier) ----------------------------------


@pytest.mark.exhaustive
@pytest.mark.parametrize("family", ["llama3", "gpt_oss"])
def test_real_tokenizer_json_end_to_end(tmp_path, family):
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(HF / family / "tokenizer.json"))
    sample = (CORPUS / "en_docs.txt").read_bytes()[:150_000] + (CORPUS / "zh_manpages.txt").read_bytes()[:50_000]
    (tmp_path / "sample.txt").write_bytes(sample[: len(sample.decode("utf-8", "ignore").encode("utf-8"))])
    text = "Hello, world! 12345 tokens, naïve café 中文"
    own = dict(cwd=tmp_path, own_process=True)
    out = check_command(run_command(["encode", text, "--encoding", str(HF / family / "tokenizer.json")], **own), 0)
    assert [int(i) for i in out.stdout.split()] == hf.encode(text, add_special_tokens=False).ids
    out = check_command(run_command(["parity", "sample.txt", "--encoding", str(HF / family), "--against", "hf",
                                     "--disallowed_special", "none"], **own), 0).stdout
    assert f"sample.txt: {family} vs HF tokenizers {tokenizers.__version__}: identical;" in out
    assert out.endswith("identical: 1 check\n")


@pytest.mark.exhaustive
def test_serve_offers_a_tokenizer_json(tiny):
    from test_playground import interrupt, start_serve
    import urllib.request

    proc, url = start_serve("--encoding", "tiny/tokenizer.json", cwd=tiny.parent)
    try:
        with urllib.request.urlopen(url + "api/encodings", timeout=60) as response:
            info = json.load(response)
        assert info["default"] == "tiny" and info["encodings"][0] == "tiny"
        with urllib.request.urlopen(url + "api/encode?text=Hello%2C%20world", timeout=60) as response:
            assert [t["id"] for t in json.load(response)["tokens"]] == tiny_ids("Hello, world")
    finally:
        interrupt(proc)
    assert load(tiny).name == "tiny"


def test_docstring_examples():
    import doctest

    import tokenizer.encoding_argument

    result = doctest.testmod(tokenizer.encoding_argument)
    assert result.failed == 0 and result.attempted >= 2
