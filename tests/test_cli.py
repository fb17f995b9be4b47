"""Every ``python -m tokenizer`` command, run as a user runs it: started from another folder (``tmp_path``), with
its output, its one-line errors and its exit status checked. conftest.py's ``cli`` fixture runs each command
twice over the two tiers: in this process (``tokenizer.cli.main``, the everyday tier) and in its own (the
exhaustive tier); what only a process of its own shows (Ctrl-C, a reader that goes away, memory) is tested in
one. The oracles are the library (``Encoding.encode``) and tiktoken; the installed console script is tested in
test_package.py."""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import doctest
import errno
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib

import numpy as np
import pytest
import tiktoken

import tokenizer
import tokenizer.cli
import tokenizer.command_line
import tokenizer.version
from conftest import CORPUS, PROG, REPO, interrupt
from tokenizer import get_encoding
from tokenizer.encoding import Encoding
from tokenizer.training.train import train_bpe

COMMANDS = ["encode", "decode", "count", "encode-file", "encode-dataset", "stats", "show", "explain", "compare",
            "train", "parity", "serve"]


@pytest.fixture(autouse=True)
def stats_in_one_pass(monkeypatch):
    """stats times each encoding over at least a second by default: the tests here check its table, in one timed
    pass (its --min_seconds default set to 0 for commands run in this process); test_stats_times_over_min_seconds
    checks the timing."""
    monkeypatch.setattr(tokenizer.cli, "STATS_MIN_SECONDS", 0.0)


def start(*args, cwd, **options) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NO_COLOR", None)
    return subprocess.Popen([sys.executable, "-m", "tokenizer", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **options)


def corpus_prefix(name: str, limit: int) -> bytes:
    data = (CORPUS / name).read_bytes()[:limit]
    return data[: len(data.decode("utf-8", errors="ignore").encode("utf-8"))]  # whole characters only


# ---- text reaches the code as typed -----------------------------------------------------------------------

VERBATIM = ["Hello, world", "1e3", "42", "'quoted'", '"double"', "[1, 2]", "{'a': (1,)}", "True", "None", "",
            "a,b,c", "-x", "--help", " leading space", "tab\there\nnewline", "héllo wörld 中文 😀", "0x10 -1 3.0"]


@pytest.mark.parametrize("text", VERBATIM)
def test_encode_and_decode_text_exactly_as_typed(cli, text):
    enc = get_encoding("gpt2")
    ids = cli("encode", "--", text).stdout.split()  # "--": the text may start with a dash
    assert ids == [str(i) for i in enc.encode(text)]
    assert cli("decode", ",".join(ids)).stdout == text if ids else True  # exactly: no newline added to a pipe


def test_show_explain_compare_take_text_as_typed(cli):
    text = "Hello, [1e3] 'x' True"
    ids = get_encoding("gpt2").encode(text)
    assert cli("show", text).stdout.splitlines()[1] == " ".join(map(str, ids))
    explained = re.findall(r"^pre-token (.*): \d+ bytes?", cli("explain", text).stdout, flags=re.M)
    assert "".join(map(ast.literal_eval, explained)) == text
    assert f"gpt2  GPT-2   {len(ids):>5} tokens" in cli("compare", text, "--encodings", "gpt2").stdout


@pytest.mark.parametrize("command", ["stats", "compare"])
def test_commands_of_several_encodings_take_one_with_encoding_too(cli, tmp_path, command):
    """The README says --encoding works in every command; stats and compare, which take --encodings, answered
    "unrecognized arguments: --encoding". It names one encoding there too; both at once is a mistake."""
    (tmp_path / "t.txt").write_text("Not all heroes wear capes.", encoding="utf-8")
    given = ["t.txt", "--min_seconds", "0"] if command == "stats" else ["Not all heroes wear capes."]
    one = cli(command, *given, "--encoding", "cl100k_base").stdout
    assert "cl100k_base" in one and "gpt2" not in one and "o200k_base" not in one
    table = cli(command, *given, "--encodings", "cl100k_base").stdout
    if command == "stats":  # (the speed column differs from run to run)
        one, table = ([line.split("|")[:5] for line in out.splitlines()] for out in (one, table))
    assert one == table
    stderr = cli(command, *given, "--encoding", "gpt2", "--encodings", "gpt2,o200k_base", status=2).stderr
    assert f"{PROG} {command}: error: --encoding gpt2 and --encodings gpt2,o200k_base: pass one of them " \
           "(--encoding for one encoding, --encodings for a comma list)" in stderr


@pytest.mark.parametrize("command", ["stats", "compare"])
def test_a_repeated_encodings_flag_adds_to_the_list(cli, tmp_path, command):
    """--encodings gpt2 --encodings cl100k_base kept only cl100k_base, silently: each one counts, as parity's
    --encoding (and train's --input) do, and so does each --encoding."""
    (tmp_path / "t.txt").write_text("Not all heroes wear capes.", encoding="utf-8")
    given = ["t.txt", "--min_seconds", "0"] if command == "stats" else ["Not all heroes wear capes."]
    for flag, names in (("--encodings", ["gpt2", "cl100k_base,o200k_base"]), ("--encoding", ["gpt2", "o200k_base"])):
        typed = [word for name in names for word in (flag, name)]
        out = cli(command, *given, *typed).stdout
        for name in ",".join(names).split(","):
            assert re.search(rf"^(\| t\.txt \| )?{name} ", out, flags=re.M), (name, out)


def test_parity_and_serve_take_encodings_as_stats_and_compare_spell_it(cli, tmp_path):
    """parity and serve take a list as --encoding; a user who learned stats --encodings typed it there and got
    "unrecognized arguments". It is the same list, added to --encoding's."""
    (tmp_path / "t.txt").write_text("Not all heroes wear capes.", encoding="utf-8")
    out = cli("parity", "t.txt", "--encodings", "gpt2", "--encoding", "cl100k_base", "--json").stdout
    assert [check["encoding"] for check in json.loads(out)["checks"]] == ["gpt2", "cl100k_base"]
    assert "--encodings E1,E2" in cli("serve", "--help").stdout


def test_decode_takes_ids_as_arguments_or_lists(cli):
    for args in (["31373", "995"], ["31373 995"], ["31373,995"], ["31373, 995"]):
        assert cli("decode", *args).stdout == "hello world"
    assert cli("encode", "hello world", "--encoding", "cl100k_base").stdout.split() == ["15339", "1917"]



@pytest.mark.parametrize("typed, bad, position", [
    (["1_000"], "1_000", 1), (["31373", "\u0661\u0662"], "\u0661\u0662", 2), (["31373,995,\uff19"], "\uff19", 3),
    (["31373 +995"], "+995", 2), (["0x10"], "0x10", 1), (["31373", "99\u00b2"], "99\u00b2", 2)])
def test_decode_takes_ids_in_ascii_digits_only(cli, typed, bad, position):
    # Python's int() also reads 1_000, Arabic-Indic and full-width digits, "+5": none is how an id is written
    stderr = cli("decode", *typed, status=2).stderr
    assert f"decode: {bad!r} (id {position}) is not a token id: write ids in the digits 0-9" in stderr, stderr

# ---- --help, unknown flags, missing arguments -------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(cli, command):
    out = cli(command, "--help").stdout
    assert out.startswith(f"usage: {PROG} {command}") and "--help" in out
    # serve: the page switches the rule; encode-dataset: documents are ordinary text, .txt as encode-file's
    if command not in ("decode", "train", "serve", "encode-dataset"):
        assert "--allowed_special" in out and "--disallowed_special" in out
    if command != "train":  # (not "--encoding" alone, which "--encodings" holds: stats and compare lacked it)
        assert "--encoding NAME|PATH" in out


@pytest.mark.parametrize("typed, advised", [
    (["--encoding", "cl100k_base", "encode", "hi there"], "encode 'hi there' --encoding cl100k_base"),
    (["--encoding=gpt2", "count", "a.txt"], "count a.txt --encoding=gpt2"),
    (["--force", "train", "--input", "a.txt", "--out", "tok"], "train --input a.txt --out tok --force"),
    (["--encoding", "gpt2", "encode", "--", "-x"], "encode --encoding gpt2 -- -x"),
])
def test_a_commands_option_before_the_command_says_where_it_goes(cli, typed, advised):
    """``gpt2-tokenizer --encoding gpt2 encode hi`` answered "argument COMMAND: invalid choice: 'gpt2'", as if gpt2
    were a misspelt command. It says the options go after the COMMAND, with the line so written."""
    stderr = cli(*typed, status=2).stderr
    options = " ".join(typed[:typed.index(advised.split()[0])])
    assert stderr == f"{PROG}: error: {options}: a command's options go after the COMMAND: {PROG} {advised} (see " \
                     f"{PROG} --help)\n"


# commands the help quotes for a user to copy: each must stay on one line, whatever the terminal's width
QUOTED_COMMANDS = {"parity": ["pip install tokenizers"], "serve": ["gpt2 --serve --model 124M"],
                   None: ["gpt2 --serve --model 124M"]}  # None: the top-level help, whose list has serve's summary


@pytest.mark.parametrize("columns", ["40", "60", "70", "72", "75", "80", "100", "120", "160"])
def test_no_help_breaks_a_command_it_quotes_across_lines(monkeypatch, columns):
    """parity --help said `(pip` at the end of one line and `install tokenizers)` on the next at 70-80 columns
    (argparse wraps at any space), so the command copied from it was two lines; serve's `gpt2 --serve --model
    124M` broke the same way. Every command's help (and the top level's) keeps each whole, with plain spaces, and
    wraps as gpt2's help does (tokenizer.command_line.PathFriendlyFormatter, one formatter for both commands)."""
    monkeypatch.setenv("COLUMNS", columns)
    for command in [None, *COMMANDS]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            tokenizer.cli.main(["--help"] if command is None else [command, "--help"], prog="gpt2-tokenizer")
        help_lines = out.getvalue().splitlines()
        for quoted in QUOTED_COMMANDS.get(command, []):
            assert any(quoted in line for line in help_lines), (command, quoted, out.getvalue())
        assert "\xa0" not in out.getvalue()  # the spaces a reader copies are spaces
        assert not any(line.rstrip().endswith(("(pip", " pip", "(gpt2")) for line in help_lines), out.getvalue()


def test_top_level_help_lists_every_command(cli):
    out = cli("--help").stdout
    assert all(command in out for command in COMMANDS)


def test_version_names_the_version_the_folder_the_code_runs_from_and_the_python(cli):
    """What a bug report needs: --version before any command, exit 0, one line on stdout; the version is the one
    pyproject.toml builds the package with (it reads tokenizer/version.py)."""
    run = cli("--version")
    assert run.stdout == (f"{PROG} {tokenizer.version.VERSION} (gpt2-numpy, from {REPO}; "
                          f"Python {platform.python_version()})\n") and run.stderr == ""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tokenizer.version.VERSION"}


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "required: COMMAND"),
        (["tokenize", "x"], "invalid choice: 'tokenize'"),
        # an option before any command is named, not taken for a missing COMMAND
        (["--bogus"], "unrecognized arguments: --bogus; give a COMMAND first"),
        (["-V", "--verbose"], "unrecognized arguments: -V --verbose; give a COMMAND first"),
        # the typo, first, with the flag it most likely meant
        (["train", "--vocab_sise", "300"], "error: --vocab_sise is not an option of train; did you mean --vocab_size?"),
        (["train", "--input", "x.txt"], "required: --vocab_size, --out"),
        (["encode"], "required: TEXT"),
        (["encode", "x", "--bogus"], "error: --bogus is not an option of encode (see"),
        (["encode", "-x"], "unrecognized arguments: -x; a TEXT that starts with a dash goes after --"),
        # no guessing from prefixes: an error, with the flag it is like
        (["encode", "x", "--encod", "gpt2"], "error: --encod is not an option of encode; did you mean --encoding?"),
        # a misspelt flag before the TEXT: argparse took its value for the TEXT, and said "--encodings hi"
        (["show", "--encodings", "gpt2", "hi"],
         "error: --encodings is not an option of show; did you mean --encoding?"),
        (["encode", "--encodng=gpt2", "hi"], "error: --encodng is not an option of encode; did you mean --encoding?"),
        (["count", "--allowed-specials", "all", "a.txt"],
         "error: --allowed-specials is not an option of count; did you mean --allowed_special?"),
        (["decode", "--id", "x.bin"], "error: --id is not an option of decode; did you mean --ids?"),
        (["serve", "--prot", "9000"], "error: --prot is not an option of serve; did you mean --port?"),
        # an empty host is every network to a socket: the page, which has no login, was served there unasked
        (["serve", "--host", "", "--port", "0"], "error: argument --host: expected an address, got ''; pass 127.0.0.1 "
                                                 "(this machine only), 0.0.0.0 (every network) or one of this machine's"),
        (["train", "--inputs", "a.txt", "--vocab_size", "300", "--out", "d"],
         "error: --inputs is not an option of train; did you mean --input?"),
        # a flag cut short is named with the flag it starts (argparse takes no abbreviation here)
        (["train", "--check", "5", "--input", "a.txt", "--vocab_size", "300", "--out", "d"],
         "error: --check is not an option of train; did you mean --checkpoint_every?"),
        (["decode"], "required: ID"),
        (["count"], "required: FILE"),
        (["encode-file"], "required: INPUT"),
        (["encode-file", "x.txt", "--workers", "0"], "--workers: expected a positive whole number, got '0'"),
        (["stats"], "required: FILE"),
        (["show"], "required: TEXT"),
        (["show", "x", "--color", "yes"], "expected auto, always or never"),
        (["explain"], "required: TEXT"),
        (["compare"], "required: TEXT"),
        (["train", "--input", "x", "--vocab_size", "ten", "--out", "d"], "expected a positive whole number"),
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--format", "pickle"], "invalid choice"),
        (["count", "x.txt", "--errors", "ignore"], "invalid choice: 'ignore'"),
        # how often the state is saved: a negative or NaN number of seconds is no time at all
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--checkpoint_every", "-5"],
         "--checkpoint_every: expected a number of seconds, 0 or more, got '-5'"),
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--checkpoint_every", "nan"],
         "--checkpoint_every: expected a number of seconds, 0 or more, got 'nan'"),
        # as typed: float() reads "1_0" as 10, other scripts' digits, and 1e999 as inf
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--checkpoint_every", "1_0"],
         "--checkpoint_every: expected a number of seconds, 0 or more, got '1_0'"),
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--checkpoint_every", "\u0661\u0660"],
         "--checkpoint_every: expected a number of seconds, 0 or more, got '\u0661\u0660'"),
        (["train", "--input", "x", "--vocab_size", "300", "--out", "d", "--checkpoint-every", "1e999"],
         "--checkpoint-every: expected a number of seconds, 0 or more, got '1e999'"),
        (["stats", "x.txt", "--min_seconds", " 1"], "--min_seconds: expected a number of seconds, 0 or more, got ' 1'"),
        (["stats", "x.txt", "--min-seconds", "1_0"],
         "--min-seconds: expected a number of seconds, 0 or more, got '1_0'"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(cli, args, message):
    stderr = cli(*args, status=2).stderr
    assert message in stderr and "--help" in stderr


@pytest.mark.parametrize(
    "args, message",
    [
        # where other commands take a repeated --encoding as one more, argparse used the last one silently
        (["encode", "hi", "--encoding", "gpt2", "--encoding", "cl100k_base"],
         "error: --encoding gpt2 and --encoding cl100k_base name two encodings, where one is used: pass one of them"),
        (["count", "a.txt", "--encoding=r50k_base", "--encoding", "gpt2"],
         "--encoding r50k_base and --encoding gpt2 name two encodings"),
        (["decode", "1", "--out", "a.txt", "--out", "b c.txt"],
         "error: --out a.txt and --out 'b c.txt' name two outputs, where one is used: pass one of them"),
        (["decode", "--ids", "a.bin", "--ids", "b.bin"], "--ids a.bin and --ids b.bin name two files of ids"),
        (["encode-file", "a.txt", "--out", "a.bin", "--out", "b.bin"], "--out a.bin and --out b.bin name two outputs"),
        (["encode-dataset", "a.txt", "--out", "d1", "--out", "d2"], "--out d1 and --out d2 name two outputs"),
        (["train", "--input", "a.txt", "--vocab_size", "300", "--out", "d1", "--out", "d2"],
         "--out d1 and --out d2 name two outputs"),
        # parity checks one other side: a second --against read as "and this one too" checked only the last
        (["parity", "a.txt", "--against", "tiktoken", "--against", "hf"],
         "--against tiktoken and --against hf name two other sides, where one is used: pass one of them"),
        (["parity", "a.txt", "--ids", "a.bin", "--ids", "b.bin"], "--ids a.bin and --ids b.bin name two files of ids"),
    ],
)
def test_one_encoding_or_output_given_twice_is_a_mistake_naming_both(cli, args, message):
    stderr = cli(*args, status=2).stderr
    assert message in stderr, stderr


def test_the_same_encoding_twice_is_taken(cli):
    """One value typed twice is no mistake (an alias that sets it, and the user who types it again)."""
    assert cli("encode", "hi", "--encoding", "cl100k_base", "--encoding", "cl100k_base").stdout == "6151\n"
    assert cli("encode", "hi", "--encoding", "gpt2").stdout == "5303\n"


@pytest.mark.parametrize(
    "args, message",
    [
        (["encode", "x", "--encoding", "gpt5"], "Unknown encoding 'gpt5'"),
        (["encode", "x", "--encoding", "./no/such/folder"], "./no/such/folder: no such file or folder"),
        (["encode", "x", "--allowed_special", "yes"], "'yes' is not a special token of gpt2"),
        (["encode", "x", "--disallowed_special", "<|pad|>"], "pass all, none or a comma list"),
        (["compare", "x", "--encodings", "gpt2", "--allowed_special", "<|endofprompt|>"],
         "not a special token of gpt2"),
        (["decode", "99999999"], "not in the vocabulary"),
        (["decode", "hello"], "decode: 'hello' (id 1) is not a token id: write ids in the digits 0-9"),
        (["decode", "1e3"], "decode: '1e3' (id 1) is not a token id"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(cli, args, message):
    assert message in cli(*args, status=2).stderr


@pytest.mark.parametrize("typed", [["31373", "7" * 5000], ["[31373, %s]" % ("7" * 5000)], ["31373,-" + "7" * 4400],
                                   ["-"]])
def test_an_id_too_long_for_int_is_out_of_range_like_any_other(cli, typed):
    # int() refuses numbers of over 4,300 digits and its message advises sys.set_int_max_str_digits(), a Python
    # call no one at a command line can make: such an id is out of range, said as for any other, shortened
    stdin = b"31373 " + b"7" * 5000 + b"\n" if typed == ["-"] else None
    stderr = cli("decode", *typed, status=2, stdin=stdin).stderr
    digits = 4400 if typed[0].startswith("31373,-") else 5000
    assert "is not in the vocabulary of 'gpt2' (ids run from 0 to 50256)" in stderr, stderr
    assert f"7777777777 ({digits:,} digits)" in stderr and "set_int_max_str_digits" not in stderr
    assert len(stderr) < 200, stderr


@pytest.mark.parametrize("typed", ["1_0", "+4", "\u0664", "\uff14", "4\u00b2"])
def test_numbers_of_options_are_written_in_ascii_digits(cli, typed):
    # int() reads all of these (as 10, 4, 4, 4 and... an error), which no one types as a number of workers
    stderr = cli("encode-file", "x.txt", "--workers", typed, status=2).stderr
    assert f"--workers: expected a positive whole number, got {typed!r}" in stderr
    with pytest.raises(argparse.ArgumentTypeError, match="expected a port from 0 to 65535"):
        tokenizer.cli.port_number(typed.replace("4", "\u0668\u0660\u0660\u0660"))  # as 8000: a server started
    assert tokenizer.cli.positive_int("4") == 4 and tokenizer.cli.port_number("8000") == 8000


@pytest.mark.parametrize("args", [["encode-file", "x.txt", "--workers"], ["decode", "--ids", "x.bin", "--start"],
                                  ["decode", "--ids", "x.bin", "--count"], ["parity", "--fuzz", "1", "--seed"],
                                  ["serve", "--port"], ["train", "--input", "x", "--out", "d", "--vocab_size"]])
def test_an_option_number_too_long_for_int_is_one_short_line(cli, args):
    # int() refuses over 4,300 digits: argparse said "invalid positive_int value: '...'", 5,000 digits long
    stderr = cli(*args, "7" * 5000, status=2).stderr
    assert f"argument {args[-1]}: expected a " in stderr and "'7777777777...7777777777' (5,000 characters)" in stderr
    assert "invalid" not in stderr and len(stderr) < 250, stderr
    assert tokenizer.command_line.whole_number("-" + "7" * 40) == -int("7" * 40)  # (gpt2's options too)
    with pytest.raises(argparse.ArgumentTypeError, match="of at most 40 digits, got '77777"):
        tokenizer.command_line.whole_number("7" * 41)


# ---- special tokens: one rule, the API's ------------------------------------------------------------------

SPECIAL_TEXT = "a <|endoftext|> b"


@pytest.fixture
def special_file(tmp_path):
    (tmp_path / "special.txt").write_text(SPECIAL_TEXT, encoding="utf-8")
    return "special.txt"


# show, explain and compare, teaching tools, show special-token text as its id by default (test_teach.py):
# tiktoken's rule by flags
@pytest.mark.parametrize("command", ["encode", "count", "stats", "encode-file"])
def test_special_token_text_is_an_error_unless_allowed(cli, special_file, command):
    target = special_file if command in ("count", "stats", "encode-file") else SPECIAL_TEXT
    stderr = cli(command, target, status=2).stderr
    assert "'<|endoftext|>'" in stderr and "--allowed_special all" in stderr and "--disallowed_special none" in stderr
    assert "allowed_special={" not in stderr  # the advice is in flags, not Python arguments
    again = ["--force"] if command == "encode-file" else []  # its output is written each time
    if command == "stats":  # one timed pass (in its own process the fixture above does not reach it)
        again = ["--min_seconds", "0"]
    cli(command, target, "--allowed_special", "all", *again)
    cli(command, target, "--allowed-special", "<|endoftext|>", *again)  # the dashed spelling works too
    cli(command, target, "--disallowed_special", "none", *again)


def test_allowed_special_gives_the_id_and_disallowed_none_plain_text(cli, special_file, tmp_path):
    enc = get_encoding("gpt2")
    as_special = enc.encode(SPECIAL_TEXT, allowed_special="all")
    as_text = enc.encode(SPECIAL_TEXT, disallowed_special=())
    assert 50256 in as_special and 50256 not in as_text
    assert cli("encode", SPECIAL_TEXT, "--allowed_special", "all").stdout.split() == list(map(str, as_special))
    assert cli("encode", SPECIAL_TEXT, "--disallowed_special", "none").stdout.split() == list(map(str, as_text))
    assert cli("show", SPECIAL_TEXT, "--allowed_special", "all").stdout.splitlines()[1] == " ".join(map(str, as_special))
    plain = cli("show", SPECIAL_TEXT, "--disallowed_special", "none", "--allowed_special", "none")  # show allows them
    assert plain.stdout.splitlines()[1] == " ".join(map(str, as_text))
    assert "special token '<|endoftext|>' = id 50256" in cli("explain", SPECIAL_TEXT, "--allowed_special", "all").stdout
    assert "special token '" not in cli("explain", SPECIAL_TEXT, "--disallowed_special", "none",
                                        "--allowed_special", "none").stdout  # explain allows them by default
    for flags, ids in ((["--allowed_special", "all"], as_special), (["--disallowed_special", "none"], as_text)):
        assert f": {len(ids)} tokens" in cli("count", special_file, *flags).stdout
        cli("encode-file", special_file, "--out", "out.bin", "--force", *flags)
        assert np.fromfile(tmp_path / "out.bin", dtype="<u2").tolist() == ids


@pytest.mark.parametrize("command", ["show", "encode"])
def test_a_token_disallowed_by_name_gets_advice_that_changes_a_flag(cli, command):
    # show allows special tokens by default: --disallowed_special naming one was answered "pass --allowed_special
    # all", which was already set, and "--disallowed_special none to encode it as plain text", which gave its id
    enc = get_encoding("gpt2")
    as_special = " ".join(map(str, enc.encode(SPECIAL_TEXT, allowed_special="all")))
    as_text = " ".join(map(str, enc.encode(SPECIAL_TEXT, disallowed_special=())))

    def ids(*flags) -> str:
        out = cli(command, SPECIAL_TEXT, *flags).stdout
        return out.splitlines()[1] if command == "show" else out.strip()

    allowing = ["--allowed_special", "all"] if command == "encode" else []  # show's default
    stderr = cli(command, SPECIAL_TEXT, "--disallowed_special", "<|endoftext|>", *allowing, status=2).stderr
    assert stderr.endswith("'<|endoftext|>', which is disallowed. --allowed_special allows it, but "
                           "--disallowed_special names it, which refuses it: to encode it as the special token, pass "
                           "--disallowed_special none (or leave '<|endoftext|>' out of it); to encode it as plain "
                           "text, leave it out of --allowed_special as well (--allowed_special none).\n")
    assert ids("--disallowed_special", "none", *allowing) == as_special
    assert ids("--disallowed_special", "none", "--allowed_special", "none") == as_text
    stderr = cli(command, SPECIAL_TEXT, "--disallowed_special", "<|endoftext|>", "--allowed_special", "none",
                 status=2).stderr
    assert stderr.endswith("'<|endoftext|>', which is disallowed. --disallowed_special names it, which refuses it "
                           "whatever --allowed_special says: to encode it as plain text, pass --disallowed_special "
                           "none (or leave '<|endoftext|>' out of it); to encode it as the special token, leave it out "
                           "of --disallowed_special and pass --allowed_special all (or that token) as well.\n")
    assert ids("--disallowed_special", "none", "--allowed_special", "<|endoftext|>") == as_special


def test_the_flags_advice_keeps_the_input_named_whatever_its_name_says(cli, tmp_path):
    # the command line reworded the library's advice by cutting its message at "which is disallowed.": a file
    # whose name holds those words was cut there, and the error lost the rest of the name and the token
    name = "notes which is disallowed. draft.txt"
    (tmp_path / name).write_text(SPECIAL_TEXT, encoding="utf-8")
    stderr = cli("count", name, status=2).stderr
    assert stderr.endswith(f": error: {name}: The text contains the special token '<|endoftext|>', which is "
                           "disallowed. To encode it as the special token, pass --allowed_special all (or that "
                           "token); to encode it as plain text, pass --disallowed_special none.\n")


@pytest.mark.parametrize("command", ["count", "encode-file", "parity"])
def test_a_refusal_read_from_a_file_is_advised_in_flags(cli, special_file, command):
    # each command names the file; the refusal reaches the command line as itself (encode-file's workers send it
    # back across processes) or as the context of the error that named the file (parity)
    out = ["--out", "out.bin"] if command == "encode-file" else []
    stderr = cli(command, special_file, *out, "--disallowed_special", "<|endoftext|>", status=2).stderr
    assert f"error: {special_file}" in stderr and "which refuses it whatever --allowed_special says" in stderr
    assert "allowed_special={" not in stderr and "disallowed_special=()" not in stderr


# ---- files: missing, folders, empty, binary, not UTF-8 ----------------------------------------------------


@pytest.mark.parametrize("command", ["count", "stats", "encode-file"])
def test_missing_files_and_folders(cli, tmp_path, command):
    assert cli(command, "missing.txt", status=2).stderr == f"{PROG}: error: input file not found: missing.txt\n"
    (tmp_path / "folder").mkdir()
    assert "folder is a directory" in cli(command, "folder", status=2).stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]  # nothing written


def test_train_missing_file_and_folder(cli, tmp_path):
    assert "input file not found: missing.txt" in cli("train", "--input", "missing.txt", "--vocab_size", "300",
                                                      "--out", "tok", status=2).stderr
    assert "is a directory" in cli("train", "--input", ".", "--vocab_size", "300", "--out", "tok", status=2).stderr
    (tmp_path / "empty.txt").write_bytes(b"")
    assert "empty" in cli("train", "--input", "empty.txt", "--vocab_size", "300", "--out", "tok", status=2).stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]
    # empty standard input is named as the user gave it, not as the temporary file train copied it to
    stderr = cli("train", "--input", "-", "--vocab_size", "300", "--out", "tok", stdin=b"", status=2).stderr
    assert stderr == f"{PROG}: error: training file is empty: 'stdin' (nothing to learn merges from)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]


def test_empty_file(cli, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    assert cli("count", "empty.txt").stdout.startswith("empty.txt: 0 tokens, 0 bytes")
    assert "| empty.txt | gpt2 | 0 | 0 |" in cli("stats", "empty.txt").stdout
    cli("encode-file", "empty.txt")
    assert (tmp_path / "empty.bin").read_bytes() == b""


BAD_UTF8 = "fine text\n".encode() * 100 + b"\x89PNG\r\n\x1a\n\x00\x00" + "more, 中文\n".encode()  # byte 1000 is bad


@pytest.mark.parametrize("command", ["count", "stats", "encode-file"])
def test_non_utf8_bytes_name_the_offset_unless_replaced(cli, tmp_path, command):
    (tmp_path / "bin.dat").write_bytes(BAD_UTF8)
    stderr = cli(command, "bin.dat", status=2).stderr
    assert "bin.dat is not valid UTF-8: byte 1000 is b'\\x89'" in stderr and "--errors replace" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin.dat"]  # no .bin left behind
    out = cli(command, "bin.dat", "--errors", "replace").stdout
    ids = get_encoding("gpt2").encode(BAD_UTF8.decode("utf-8", errors="replace"))
    if command == "count":
        assert out.startswith(f"bin.dat: {len(ids)} tokens, {len(BAD_UTF8):,} bytes")
    elif command == "stats":
        assert f"| bin.dat | gpt2 | {len(BAD_UTF8):,} | {len(ids)} |" in out
    else:
        assert np.fromfile(tmp_path / "bin.bin", dtype="<u2").tolist() == ids


def test_encode_file_says_how_many_bytes_it_read_as_u_fffd(cli, tmp_path):
    # --errors replace: the summary said "from 15 bytes" of text, as if every byte read were text encoded as it is;
    # it says how many of them were not UTF-8 (each run of them one U+FFFD), and the file's own U+FFFD is no error
    data = "ok \ufffd ".encode("utf-8") + b"\xe2\x82 x\xff"  # a cut character (2 bytes) and a lone byte
    (tmp_path / "bad.txt").write_bytes(data)
    out = cli("encode-file", "bad.txt", "--errors", "replace").stdout
    ids = get_encoding("gpt2").encode(data.decode("utf-8", errors="replace"))
    assert out.startswith(f"bad.bin: {len(ids)} tokens (uint16) from 12 bytes (3 of them not UTF-8, each run read "
                          f"as U+FFFD), {12 / len(ids):.3f} bytes/token, ")
    (tmp_path / "good.txt").write_bytes("ok \ufffd".encode("utf-8"))
    assert "good.bin: 2 tokens (uint16) from 6 bytes, 3.000 bytes/token" in cli("encode-file", "good.txt").stdout


def test_count_and_stats_say_how_many_bytes_they_read_as_u_fffd(cli, tmp_path):
    # --errors replace: count and stats printed only the bytes read, as encode-file did; they say as it does how
    # many were not UTF-8, once per file (stats, under its table), and nothing of a valid file or its own U+FFFD
    data = "ok \ufffd ".encode("utf-8") + b"\xe2\x82 x\xff"  # a cut character (2 bytes) and a lone byte
    (tmp_path / "bad.txt").write_bytes(data)
    (tmp_path / "good.txt").write_bytes("ok \ufffd".encode("utf-8"))
    tokens = len(get_encoding("gpt2").encode(data.decode("utf-8", errors="replace")))
    out = cli("count", "bad.txt", "good.txt", "--errors", "replace").stdout.splitlines()
    assert out[0].startswith(f"bad.txt: {tokens} tokens, 12 bytes (3 of them not UTF-8, each run read as U+FFFD), "
                             f"{12 / tokens:.3f} bytes/token (gpt2, ")
    assert out[1].startswith("good.txt: 2 tokens, 6 bytes, 3.000 bytes/token (gpt2, ")
    out = cli("stats", "bad.txt", "good.txt", "--errors", "replace", "--encodings", "gpt2,cl100k_base",
              "--min_seconds", "0").stdout
    assert f"| bad.txt | gpt2 | 12 | {tokens} |" in out and "| good.txt | cl100k_base | 6 | 2 |" in out
    notes = [line for line in out.splitlines() if "U+FFFD" in line]
    assert notes == ["bad.txt: 3 of its bytes are not UTF-8, each run read as U+FFFD (--errors replace)"]


def test_count_stats_and_encode_file_say_the_bytes_a_jsonl_text_holds_as_u_fffd(cli, tmp_path):
    # --errors replace: a .jsonl document's invalid bytes were read as U+FFFD with no word of it (count printed
    # "18 bytes" alone: the U+FFFD's, not the bytes read); they are said, and counted, as a text file's are, and
    # only those of the text field count
    text = b"ok \xff there \xe2\x82 x"  # a lone byte and a cut character: 3 bytes, read as two U+FFFD
    (tmp_path / "bad.txt").write_bytes(text)
    (tmp_path / "bad.jsonl").write_bytes(b'{"id": "\xfe", "text": "' + text + b'"}\n')
    tokens = len(get_encoding("gpt2").encode(text.decode("utf-8", errors="replace")))
    n_bytes = len(text)
    out = cli("count", "bad.txt", "bad.jsonl", "--errors", "replace").stdout.splitlines()
    for line, name in zip(out, ("bad.txt", "bad.jsonl"), strict=True):
        assert line.startswith(f"{name}: {tokens} tokens, {n_bytes} bytes (3 of them not UTF-8, each run read as "
                               "U+FFFD), "), line
    out = cli("stats", "bad.txt", "bad.jsonl", "--errors", "replace", "--encodings", "gpt2",
              "--min_seconds", "0").stdout
    notes = [line for line in out.splitlines() if "U+FFFD" in line]
    assert notes == [f"{name}: 3 of its bytes are not UTF-8, each run read as U+FFFD (--errors replace)"
                     for name in ("bad.txt", "bad.jsonl")]
    (tmp_path / "one.jsonl").write_bytes(b'{"text": "ok \xff"}\n')  # one byte "is" ("1 of its bytes are")
    out = cli("stats", "one.jsonl", "--errors", "replace", "--encodings", "gpt2", "--min_seconds", "0").stdout
    assert "one.jsonl: 1 of its bytes is not UTF-8, each run read as U+FFFD (--errors replace)" in out
    out = cli("encode-file", "bad.jsonl", "--errors", "replace").stdout
    stored = (tmp_path / "bad.jsonl").stat().st_size
    # "of them" said right after the text's bytes, whose they are (after the file's, a .gz's would seem to hold them)
    assert out.startswith(f"bad.bin: {tokens + 1} tokens (uint16) from {n_bytes} bytes (3 of them not UTF-8, each "
                          f"run read as U+FFFD; {stored} file bytes), "), out


def test_train_on_globs_lists_and_jsonl(cli, tmp_path):
    text = corpus_prefix("en_docs.txt", 200_000).decode("utf-8")
    docs = [d for d in text.split("\n\n") if d]
    (tmp_path / "data").mkdir()
    for k in range(3):
        (tmp_path / "data" / f"{k}.txt").write_text("\n\n".join(docs[k::3]), encoding="utf-8")
    lines = "".join(json.dumps({"content": d}) + "\n" for d in docs[:50])
    (tmp_path / "more.jsonl").write_text(lines, encoding="utf-8")
    out = cli("train", "--input", "data/*.txt,more.jsonl", "--input", "data/0.txt", "--text_field", "content",
              "--vocab_size", "300", "--out", "tok").stdout
    assert "trained 44 merges (300 tokens) from 4 files" in out
    vocab, merges = train_bpe([str(tmp_path / "data" / "*.txt"), tmp_path / "more.jsonl"], 300,
                              text_field="content", progress=False)
    assert tokenizer.load(tmp_path / "tok").encode(text) == Encoding.from_vocab_merges(vocab, merges).encode(text)
    stderr = cli("train", "--input", "more.jsonl", "--vocab_size", "300", "--out", "tok2", status=2).stderr
    # Workers count chunks in parallel; the error names the earliest bad line whichever fails first.
    assert stderr.startswith(f'{PROG}: error: more.jsonl line 1: no "text" field (its fields: "content")'), stderr
    stderr = cli("train", "--input", "nothing/*.txt", "--vocab_size", "300", "--out", "tok2", status=2).stderr
    assert stderr == f"{PROG}: error: no file matches 'nothing/*.txt'\n"
    assert not (tmp_path / "tok2").exists()


def test_train_refuses_non_utf8_naming_the_offset(cli, tmp_path):
    (tmp_path / "bin.dat").write_bytes(BAD_UTF8)
    stderr = cli("train", "--input", "bin.dat", "--vocab_size", "300", "--out", "tok", status=2).stderr
    assert "bin.dat is not valid UTF-8: byte 1000 is b'\\x89'" in stderr


# ---- files: the results ------------------------------------------------------------------------------------


def test_count_and_stats_equal_encode(cli, tmp_path):
    (tmp_path / "zh.txt").write_bytes(corpus_prefix("zh_manpages.txt", 200_000))
    text = (tmp_path / "zh.txt").read_text(encoding="utf-8")
    n = len(get_encoding("cl100k_base").encode(text))
    assert cli("count", "zh.txt", "--encoding", "cl100k_base").stdout.startswith(f"zh.txt: {n:,} tokens")
    out = cli("stats", "zh.txt", "--encodings", "gpt2, cl100k_base").stdout
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| zh.txt")]
    assert [(row[2].strip(), row[4].strip()) for row in rows] == [
        ("gpt2", f"{len(get_encoding('gpt2').encode(text)):,}"), ("cl100k_base", f"{n:,}")]
    assert "825 GB" in out


def test_stats_times_over_min_seconds(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer.cli, "STATS_MIN_SECONDS", 1.0)
    (tmp_path / "small.txt").write_bytes(corpus_prefix("en_dictionary.txt", 5_000))
    out = cli("stats", "small.txt", "--encodings", "gpt2", "--min_seconds", "0.2").stdout
    assert "(each speed timed over at least 0.2 s of encoding, after a warm-up pass)" in out
    assert "(each speed timed over one pass)" in cli("stats", "small.txt", "--encodings", "gpt2",
                                                    "--min-seconds", "0").stdout
    assert "at least S seconds" in cli("stats", "--help").stdout and "default 1;" in cli("stats", "--help").stdout
    stderr = cli("stats", "small.txt", "--min_seconds", "-1", status=2).stderr
    assert "expected a number of seconds, 0 or more, got '-1'" in stderr


def test_count_streams_in_bounded_memory(tmp_path):
    """count reads in chunks: 24 MB of text costs little more memory than 0.1 MB (the old count read the whole
    file and held every id: over 1 GB for 55 MB)."""
    block = corpus_prefix("en_dictionary.txt", 1_000_000)
    (tmp_path / "small.txt").write_bytes(block[:100_000])
    (tmp_path / "big.txt").write_bytes(block * 24)
    measure = ("import resource, sys; from tokenizer.cli import main; status = main(sys.argv[1:], prog='t'); "
               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(status)")
    peak_kib = {}
    for name in ("small.txt", "big.txt"):
        proc = subprocess.run([sys.executable, "-c", measure, "count", name], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=600)
        assert proc.returncode == 0, proc.stderr
        peak_kib[name] = int(proc.stderr.split()[-1])
        if name == "big.txt":
            expected = len(tiktoken.get_encoding("gpt2").encode_ordinary((block * 24).decode("utf-8")))
            assert proc.stdout.startswith(f"big.txt: {expected:,} tokens, {len(block) * 24:,} bytes")
    assert peak_kib["big.txt"] - peak_kib["small.txt"] < 100 * 1024, peak_kib


def test_train_then_use_the_folder_everywhere(cli, tmp_path):
    (tmp_path / "corpus.txt").write_bytes(corpus_prefix("en_docs.txt", 300_000))
    out = cli("train", "--input", "corpus.txt", "--vocab_size", "400", "--out", "tok",
              "--special_tokens", "<|endoftext|>,<|pad|>", "--num_workers", "2").stdout
    assert "trained 142 merges (400 tokens)" in out and "saved in the gpt2 format in tok" in out
    enc = tokenizer.load(tmp_path / "tok")
    assert enc.special_tokens_set == {"<|endoftext|>", "<|pad|>"}  # the comma list is two tokens
    # encode-file with two workers (the file holds two chunks): the trained encoding reaches them by its tables
    (tmp_path / "more.txt").write_bytes(corpus_prefix("en_docs.txt", 1_200_000))
    ids = enc.encode((tmp_path / "more.txt").read_text(encoding="utf-8"), allowed_special="all")
    out = cli("encode-file", "more.txt", "--encoding", "tok", "--workers", "2", "--allowed_special", "all").stdout
    assert "2 workers, tok)" in out
    assert np.fromfile(tmp_path / "more.bin", dtype="<u2").tolist() == ids
    assert f"more.txt: {len(ids):,} tokens" in cli("count", "more.txt", "--encoding", "./tok",
                                                   "--allowed_special", "all").stdout
    sample = "Not all heroes wear capes.<|pad|>"
    sample_ids = enc.encode(sample, allowed_special={"<|pad|>"})
    assert cli("encode", sample, "--encoding", "tok", "--allowed_special", "<|pad|>").stdout.split() == [
        str(i) for i in sample_ids]
    assert cli("decode", *map(str, sample_ids), "--encoding", "tok").stdout == sample
    assert cli("show", sample, "--encoding", "tok", "--allowed_special", "all").stdout.splitlines()[1] == " ".join(
        map(str, sample_ids))
    assert "special token '<|pad|>' = id 399" in cli("explain", sample, "--encoding", "tok",
                                                      "--allowed_special", "all").stdout
    assert "tok " in cli("compare", "hello", "--encodings", "gpt2,tok").stdout


@pytest.mark.parametrize("fmt", ["gpt2", "tiktoken", "hf"])
def test_train_saves_a_loadable_tokenizer(cli, tmp_path, fmt):
    (tmp_path / "corpus.txt").write_bytes(corpus_prefix("en_docs.txt", 300_000))
    out = cli("train", "--input", "corpus.txt", "--vocab-size", "400", "--special_tokens", "<|endoftext|>",
              "--out", "tok", "--format", fmt, "--num_workers", "2").stdout
    for expected in ["trained 143 merges (400 tokens)", f"saved in the {fmt} format in tok", "peak memory:",
                     "longest token:", "bytes/token"]:
        assert expected in out
    # the longest learned token, and a word that special tokens (longer here) were left out
    vocab_bytes = [token for token in tokenizer.load(tmp_path / "tok").token_byte_values()]
    longest = max(vocab_bytes, key=len)
    assert len(longest) < len(b"<|endoftext|>")
    assert (f"longest token: {longest!r} ({len(longest)} bytes; special tokens left out: '<|endoftext|>' is 13 "
            "bytes)") in out
    enc = tokenizer.load(tmp_path / "tok")
    text = (tmp_path / "corpus.txt").read_text(encoding="utf-8")[:20_000]
    ids = enc.encode(text, allowed_special="all")
    assert enc.decode(ids) == text and max(ids) < 400


def test_train_says_1_merge_and_1_byte_in_the_singular(cli, tmp_path):
    """A vocab_size of 257 (no special token) learns one merge, and a token of one byte is one byte: train
    said "trained 1 merges" and "(1 bytes"."""
    (tmp_path / "corpus.txt").write_text("hello world, hello help\n", encoding="utf-8")
    out = cli("train", "--input", "corpus.txt", "--vocab_size", "257", "--out", "tok").stdout
    assert "trained 1 merge (257 tokens)" in out, out
    assert tokenizer.cli.longest_token_line(b"a", []) == "longest token: b'a' (1 byte)"
    assert tokenizer.cli.longest_token_line(b"ab", ["|"]) == (
        "longest token: b'ab' (2 bytes; special tokens left out: '|' is 1 byte)")


def test_train_shows_the_start_of_a_very_long_token(cli, tmp_path):
    # text without spaces is one pre-token, and a few merges make it one token: train printed all of it (a
    # 1 MB file of one letter, a line of a megabyte)
    (tmp_path / "ab.txt").write_text("ab" * 2000, encoding="utf-8")
    out = cli("train", "--input", "ab.txt", "--vocab_size", "300", "--out", "tok").stdout
    line = next(line for line in out.splitlines() if line.startswith("longest token:"))
    assert line == f"longest token: {b'ab' * 50!r}... (4,000 bytes, the first 100 shown)"
    assert doctest.testmod(tokenizer.cli).failed == 0  # its docstring's example of the same


def test_train_vocab_size_too_small(cli):
    stderr = cli("train", "--input", str(CORPUS / "de_manpages.txt"), "--vocab_size", "10", "--out", "tok",
                 status=2).stderr
    assert "too small" in stderr


def test_train_with_a_vocab_size_beyond_the_text_saves_every_merge_there_is(cli, tmp_path):
    # a vocab_size typed with too many digits: training stops when no pair is left, as it does for any size
    (tmp_path / "corpus.txt").write_text("hello world, hello help\n", encoding="utf-8")
    out = cli("train", "--input", "corpus.txt", "--vocab_size", "99999999999999", "--out", "tok").stdout
    merges = train_bpe(tmp_path / "corpus.txt", 1000, progress=False)[1]
    assert f"trained {len(merges)} merges ({256 + len(merges)} tokens)" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "tok"]  # no state folder left


def test_train_says_a_vocab_size_too_small_in_its_flag(cli, tmp_path):
    # it said train_bpe's "vocab_size=200 is too small ... (256 single bytes + 0 special token(s))"
    (tmp_path / "corpus.txt").write_text("hello world\n", encoding="utf-8")
    stderr = cli("train", "--input", "corpus.txt", "--vocab_size", "200", "--out", "tok", status=2).stderr
    assert stderr.endswith(": error: --vocab_size 200 is too small: the 256 bytes and 0 special tokens take 256 ids; "
                           "pass a larger --vocab_size (each id above those is one merge)\n")
    stderr = cli("train", "--input", "corpus.txt", "--vocab_size", "256", "--special_tokens", "<|endoftext|>",
                 "--out", "tok", "--format", "hf", status=2).stderr
    assert "--vocab_size 256 is too small: the 256 bytes and 1 special token take 257 ids; " in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]


def test_train_a_gpt2_format_without_merges_is_refused_before_any_work(cli, tmp_path):
    # vocab.bpe holds the merges: with none it cannot be read back, which was said only after the counting
    (tmp_path / "corpus.txt").write_text("hello world\n", encoding="utf-8")
    stderr = cli("train", "--input", "corpus.txt", "--vocab_size", "257", "--special_tokens", "<|endoftext|>",
                 "--out", "tok", status=2).stderr
    assert "--vocab_size 257 leaves no merges (256 bytes + 1 special token), and the gpt2 format's vocab.bpe is " \
           "its merges: pass a larger --vocab_size, or --format hf or tiktoken" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]
    cli("train", "--input", "corpus.txt", "--vocab_size", "257", "--special_tokens", "<|endoftext|>",
        "--out", "tok", "--format", "hf")
    assert tokenizer.load(tmp_path / "tok").encode("hi <|endoftext|>", allowed_special="all") == [104, 105, 32, 256]


def test_train_a_gpt2_format_of_a_text_with_nothing_to_merge_is_one_line_and_leaves_nothing(cli, tmp_path):
    # told only at save time, as the library's "save as 'hf' or 'tiktoken'", with a state folder left behind that
    # the next run took for a run that stopped
    (tmp_path / "letters.txt").write_text("a\nb\n", encoding="utf-8")  # pre-tokens of one byte each
    stderr = cli("train", "--input", "letters.txt", "--vocab_size", "300", "--out", "tok", status=2).stderr
    assert stderr.endswith("--out tok: the training text holds no pair of bytes to merge, so there are no merges, "
                           "and the gpt2 format's vocab.bpe is its merges: pass --format hf or tiktoken\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["letters.txt"]
    out = cli("train", "--input", "letters.txt", "--vocab_size", "300", "--out", "tok", "--format", "hf").stdout
    assert tokenizer.load(tmp_path / "tok").encode("a\nb") == [97, 10, 98]
    # no token was learned, so none is named the longest (it named b'\x00', of "1 bytes")
    assert "longest token: 1 byte (no merges learned: every token but the special ones is a single byte)\n" in out


def test_train_a_gpt2_format_with_a_special_token_it_cannot_mark_is_refused_before_any_work(cli, tmp_path):
    # encoder.json tells a special token only by its form <|...|>: saving refused [SEP], but after the training
    (tmp_path / "corpus.txt").write_text("hello world [SEP] hello\n", encoding="utf-8")
    stderr = cli("train", "--input", "corpus.txt", "--vocab_size", "270", "--special_tokens", "<|endoftext|>,[SEP]",
                 "--out", "tok", status=2).stderr
    assert "--special_tokens [SEP]: the gpt2 format tells special tokens only by their form <|...|>, so it would " \
           "load back as ordinary text: pass --format hf or tiktoken, or name it like <|...|>" in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no state folder left behind either
    cli("train", "--input", "corpus.txt", "--vocab_size", "270", "--special_tokens", "<|endoftext|>,[SEP]",
        "--out", "tok", "--format", "tiktoken")
    assert tokenizer.load(tmp_path / "tok").special_tokens_set == {"<|endoftext|>", "[SEP]"}


@pytest.mark.parametrize("out_format", ["hf", "tiktoken"])
def test_train_with_a_one_byte_special_token_says_so_before_any_work(cli, tmp_path, out_format):
    """--special_tokens "|" trained, then failed with "vocab lacks 1 single-byte tokens (e.g. b'|')", of a vocab
    the user never passed, and left tok.checkpoint behind (the next run asked for --resume). The rule: a special
    token's bytes are never an ordinary token, and ordinary text needs every byte's own token."""
    (tmp_path / "corpus.txt").write_text("hello | world | hello\n", encoding="utf-8")
    run = cli("train", "--input", "corpus.txt", "--vocab_size", "258", "--special_tokens", "<|endoftext|>,|",
              "--format", out_format, "--out", "tok", status=2)
    assert run.stderr.endswith("error: --special_tokens |: a special token of one byte would take that byte's own "
                               "token, which ordinary text needs (byte-level BPE encodes any text with the 256 "
                               "bytes): name it with two or more characters, e.g. <|...|>\n"), run.stderr
    assert run.stderr.count("\n") == 1 and run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt"]  # no state folder left behind either


def test_compare_prints_only_what_it_computed(cli):
    out = cli("compare", "hi", "--encodings", "gpt2").stdout
    assert out == "gpt2  GPT-2       1 token   longest whitespace token:  0 chars\n      |hi|\n"
    out = cli("compare", "        return x").stdout
    counts = {name: len(get_encoding(name).encode("        return x")) for name in ("gpt2", "cl100k_base")}
    assert "spaces before 'return'" not in out
    assert f"fewest tokens: cl100k_base (GPT-4) ({counts['cl100k_base']})" in out
    assert f"gpt2 (GPT-2) {counts['gpt2'] / counts['cl100k_base']:.2f}x as many" in out


def test_compare_tells_a_saved_tokenizer_from_the_registered_encoding_of_its_name(cli, tmp_path):
    # GPT-2's vocabulary saved in a folder called cl100k_base: its row said GPT-4, and the closing line counted
    # the two cl100k_base rows as one
    get_encoding("gpt2").save(tmp_path / "cl100k_base")
    text = "        return x"
    out = cli("compare", text, "--encodings", "./cl100k_base,cl100k_base").stdout.splitlines()
    saved, registered = (len(get_encoding(name).encode(text)) for name in ("gpt2", "cl100k_base"))
    assert registered < saved
    assert out[0].startswith("cl100k_base  saved") and f"{saved:>5} tokens" in out[0]
    assert out[2].startswith("cl100k_base  GPT-4") and f"{registered:>5} tokens" in out[2]
    assert out[5] == (f"fewest tokens: cl100k_base (GPT-4) ({registered}); cl100k_base (saved) "
                      f"{saved / registered:.2f}x as many")


def test_stats_names_a_saved_tokenizer_apart_from_the_registered_encoding_of_its_name(cli, tmp_path):
    # GPT-2's vocabulary saved in a folder called cl100k_base: its row was a second "cl100k_base", with other counts
    get_encoding("gpt2").save(tmp_path / "cl100k_base")
    text = "        return x"
    (tmp_path / "code.txt").write_text(text, encoding="utf-8")
    out = cli("stats", "code.txt", "--encodings", "cl100k_base,./cl100k_base", "--min_seconds", "0").stdout
    rows = [[cell.strip() for cell in line.split("|")[1:5]] for line in out.splitlines() if line.startswith("| code")]
    saved, registered = (len(get_encoding(name).encode(text)) for name in ("gpt2", "cl100k_base"))
    assert registered < saved
    assert rows == [["code.txt", "cl100k_base", "16", str(registered)], ["code.txt", "cl100k_base (saved)", "16",
                                                                          str(saved)]]


def test_a_saved_tokenizer_named_like_an_alias_is_named_apart_from_the_encoding_the_alias_gives(cli, tmp_path):
    # GPT-2's vocabulary saved in a folder called gpt4 was shown as plain "gpt4", a name that, typed back as
    # --encoding gpt4, gives cl100k_base
    get_encoding("gpt2").save(tmp_path / "gpt4")
    assert cli("show", "hi", "--encoding", "./gpt4").stdout.splitlines()[2].endswith(" bytes (gpt4 (saved))")
    (tmp_path / "code.txt").write_text("hi", encoding="utf-8")
    out = cli("stats", "code.txt", "--encodings", "gpt4,./gpt4", "--min_seconds", "0").stdout
    assert [line.split("|")[2].strip() for line in out.splitlines() if line.startswith("| code")] == \
        ["cl100k_base", "gpt4 (saved)"]


def test_every_command_names_a_saved_tokenizer_apart_from_the_registered_encoding_of_its_name(cli, tmp_path):
    # show, explain, count, encode-file and encode-dataset printed GPT-2's vocabulary saved in cl100k_base/ as
    # plain "cl100k_base", while stats and the playground said "cl100k_base (saved)"
    get_encoding("gpt2").save(tmp_path / "cl100k_base")
    text = "        return x"
    (tmp_path / "code.txt").write_text(text, encoding="utf-8")
    ids = get_encoding("gpt2").encode(text)
    assert ids != get_encoding("cl100k_base").encode(text)  # the two are told apart by more than their names
    saved = ["--encoding", "./cl100k_base"]
    assert cli("show", text, *saved).stdout.splitlines()[2] == f"{len(ids)} tokens, 16 characters, 16 bytes " \
                                                               "(cl100k_base (saved))"
    assert cli("explain", text, *saved).stdout.startswith("encoding cl100k_base (saved): special tokens first")
    assert cli("count", "code.txt", *saved).stdout.startswith(f"code.txt: {len(ids)} tokens, 16 bytes, "
                                                              f"{16 / len(ids):.3f} bytes/token (cl100k_base (saved), ")
    assert "1 worker, cl100k_base (saved))" in cli("encode-file", "code.txt", *saved).stdout
    assert "local engine, cl100k_base (saved)); see" in cli("encode-dataset", "code.txt", "--out", "shards",
                                                             *saved).stdout
    # the registered encoding keeps its own name
    assert cli("show", text, "--encoding", "cl100k_base").stdout.splitlines()[2].endswith(" bytes (cl100k_base)")
    assert cli("explain", text, "--encoding", "cl100k_base").stdout.startswith("encoding cl100k_base: ")


def test_outputs_are_checked_before_any_work(cli, tmp_path):
    """Issue 42's output mistakes as a user types them, each one line and exit 2 with nothing written (each is
    tested in detail, with devices and symlinks, in test_outputs.py)."""
    (tmp_path / "de.txt").write_text("Grüße aus Köln. " * 50, encoding="utf-8")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "emptydir").mkdir()
    train = ["train", "--input", "de.txt", "--vocab_size", "300", "--out"]
    for args, said in [(["encode-file", "de.txt", "--out", "fifo"], "--out fifo is a FIFO (named pipe)"),
                       (["encode-file", "de.txt", "--out", ""], "--out '': an empty path"),
                       (["encode-dataset", "de.txt", "--out", ""], "--out '': an empty path"),
                       ([*train, ""], "--out '': an empty path"),
                       (["encode-file", "de.txt", "--out", "emptydir"], "--out emptydir is a folder"),
                       ([*train, "de.txt"], "--out de.txt is a file"),
                       ([*train, "/proc/tk"], "--out /proc/tk: cannot write in /proc")]:
        assert said in cli(*args, status=2).stderr, args
    assert sorted(p.name for p in tmp_path.iterdir()) == ["de.txt", "emptydir", "fifo"]
    assert (tmp_path / "fifo").is_fifo() and not any((tmp_path / "emptydir").iterdir())


# ---- Ctrl-C -------------------------------------------------------------------------------------------------


def test_ctrl_c_during_encode_file_is_one_line_and_leaves_no_file(tmp_path):
    """Ctrl-C in the middle of the work, a moment the command's own state shows, not a time that a faster or
    slower machine would move: its input is a pipe still open, so it cannot have finished, and ids are in its
    output, so its workers are at work."""
    proc = start("encode-file", "-", "--out", "big.bin", "--workers", "2", cwd=tmp_path, start_new_session=True,
                 stdin=subprocess.PIPE)
    proc.stdin.write(corpus_prefix("en_dictionary.txt", 3_000_000).decode())  # three of its pieces
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size for p in tmp_path.glob(".big.bin.*.partial")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    stdout, stderr = interrupt(proc)
    assert (proc.returncode, stdout, stderr) == (130, "", f"{PROG}: interrupted\n")
    assert list(tmp_path.iterdir()) == []
    assert_no_process_left(proc.pid)


@pytest.mark.parametrize("delay", [0.0, 0.1])
def test_ctrl_c_while_the_workers_start_leaves_no_process(tmp_path, delay):
    """Ctrl-C around the moment the worker pool starts: no worker may be left behind, waiting forever."""
    proc = start("encode-file", str(CORPUS / "en_docs.txt"), "--out", "big.bin", "--workers", "2",
                 "--allowed_special", "all", cwd=tmp_path, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob(".big.bin.*.partial")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    time.sleep(delay)
    interrupt(proc)
    assert proc.returncode == 130
    assert_no_process_left(proc.pid)


def assert_no_process_left(group: int) -> None:
    """Every process of the command's process group (the command and its workers) has ended."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)  # signal 0: only asks whether any process of the group exists
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(group, signal.SIGKILL)
    raise AssertionError("worker processes were left running after Ctrl-C")


def test_ctrl_c_during_train_is_one_line_and_saves_nothing(tmp_path):
    proc = start("train", "--input", str(CORPUS / "en_dictionary.txt"), "--vocab_size", "5000", "--out", "tok",
                 "--num_workers", "2", cwd=tmp_path, start_new_session=True)
    # Interrupted once it is merging (its state is kept from then on): a moment its own files show, not a time
    # that a faster or slower machine would move.
    deadline = time.monotonic() + 120
    while not (tmp_path / "tok.checkpoint" / "settings.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    stdout, stderr = interrupt(proc)
    said = "; the training state is kept in tok.checkpoint: run the same command with --resume to continue"
    assert (proc.returncode, stdout, stderr) == (130, "", f"{PROG}: interrupted{said}\n")
    assert [p.name for p in tmp_path.iterdir()] == ["tok.checkpoint"]  # no tokenizer


@pytest.mark.parametrize("cli", ["own_process"], indirect=True)  # it kills a training in its own process anyway
def test_train_killed_then_resumed_ends_with_the_same_merges(cli, tmp_path):
    (tmp_path / "corpus.txt").write_bytes(corpus_prefix("en_docs.txt", 1_500_000))
    options = ["--input", "corpus.txt", "--vocab_size", "3000", "--num_workers", "1"]
    cli("train", *options, "--out", "whole")
    assert not (tmp_path / "whole.checkpoint").exists()  # removed once the tokenizer is saved
    proc = start("train", *options, "--out", "tok", "--checkpoint_every", "0", cwd=tmp_path)
    merges_file = tmp_path / "tok.checkpoint" / "merges.json"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            done = len(json.loads(merges_file.read_text()))
        except (FileNotFoundError, ValueError):
            done = 0
        if done > 100:
            break
        time.sleep(0.01)
    proc.kill()  # SIGKILL: no chance to clean up
    proc.communicate()
    assert 100 < len(json.loads(merges_file.read_text())) < 3000 - 256, "the run was not killed while merging"
    assert not (tmp_path / "tok").exists()
    said = cli("train", *options, "--out", "tok", "--resume").stdout
    assert "trained 2,744 merges" in said
    # the killed run's time up to its last saved merges counts too
    this_run, in_all = map(float, re.search(r" in ([\d.]+) s \(([\d.]+) s in all, with the run it resumed\)",
                                            said).groups())
    assert in_all > this_run
    assert (tmp_path / "tok" / "vocab.bpe").read_bytes() == (tmp_path / "whole" / "vocab.bpe").read_bytes()
    assert not (tmp_path / "tok.checkpoint").exists()
    stderr = cli("train", *options, "--out", "tok", "--resume", status=2).stderr
    assert "--resume: no training state in tok.checkpoint" in stderr


# ---- stdin, JSON lists, an existing tokenizer, broken pipes, Ctrl-C in train ----------------------------------


def run_main(capsys, monkeypatch, *argv, stdin: bytes | None = None) -> tuple[int, str, str]:
    """The command in this process: (status, stdout, stderr); ``stdin`` as the bytes a pipe would bring."""
    from tokenizer.cli import main

    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    try:
        status = main(list(argv), prog=PROG)
    except SystemExit as e:  # argparse's own mistakes
        status = e.code
    out, err = capsys.readouterr()
    if status == 2:
        assert err.count("\n") == 1 and err.startswith(PROG), err
    return status, out, err


class TypedStdin(io.TextIOWrapper):
    """Standard input as a terminal would give it: what the person typed, up to their Ctrl-D."""

    def isatty(self):
        return True


def test_a_dash_read_from_a_terminal_says_how_to_end_the_text_once(capsys, monkeypatch):
    """``encode -`` (and every command reading ``-``) on a terminal would otherwise wait for Ctrl-D in silence;
    piped input says nothing."""
    from tokenizer.cli import main

    waiting = "reading stdin from the terminal: type the text, then Ctrl-D at the start of a line to end it"
    for argv in (["encode", "-"], ["decode", "-"], ["count", "-"]):
        monkeypatch.setattr(sys, "stdin", TypedStdin(io.BytesIO(b"31373\n"), encoding="utf-8"))
        assert main(argv, prog=PROG) == 0, argv
        out, err = capsys.readouterr()
        assert out and err.count(waiting) == 1 and err.startswith(waiting), (argv, err)
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"31373\n"), encoding="utf-8"))
        assert main(argv, prog=PROG) == 0 and capsys.readouterr().err == "", argv


def test_a_dash_on_a_real_terminal_says_how_to_end_the_text_and_reads_it(tmp_path):
    leader, follower = os.openpty()
    try:
        with start("encode", "-", cwd=tmp_path, stdin=follower) as proc:
            os.write(leader, b"hello\n")
            os.write(leader, b"\x04")  # Ctrl-D at the start of a line: the end of the text
            out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
        os.close(follower)
    assert (proc.returncode, out) == (0, "31373 198\n")
    assert err.startswith("reading stdin from the terminal:") and "Ctrl-D" in err and err.count("\n") == 1


def test_decode_takes_a_json_list(capsys, monkeypatch):
    for args in (["[15496, 11, 995]"], ["[15496,11,995]"], [" [15496, 11]", "995"], ["[]", "15496", "11,995"]):
        assert run_main(capsys, monkeypatch, "decode", *args)[:2] == (0, "Hello, world"), args
    for bad in ("[15496, 11", "[1.5]", "[true]", '["a"]', "[[1]]", "[[15496 11]]", '["15496" 11]'):
        status, _, err = run_main(capsys, monkeypatch, "decode", bad)
        assert status == 2 and "token ids" in err, bad
    # NumPy prints an array of ids (np.memmap's of a train.bin) without commas: it was "not a JSON list"
    printed = str(np.array([15496, 11, 995], dtype=np.uint16))
    assert printed == "[15496    11   995]"
    for args in ([printed], ["[15496 11\n 995]\n"], ["[ 15496 ]", "[11   995]"]):
        assert run_main(capsys, monkeypatch, "decode", *args)[:2] == (0, "Hello, world"), args
    assert run_main(capsys, monkeypatch, "decode", "-", stdin=printed.encode())[:2] == (0, "Hello, world")
    status, _, err = run_main(capsys, monkeypatch, "decode", "[15496 ... 995]")
    assert status == 2 and "decode: '...' (id 2) is not a token id" in err


def test_encode_and_decode_read_stdin_for_a_dash(capsys, monkeypatch):
    text = "Hello, world\n\nnaïve 🙂 <|endoftext|>\r\n"  # newlines, a final one included, kept exactly
    ids = get_encoding("gpt2").encode(text, disallowed_special=())
    status, out, _ = run_main(capsys, monkeypatch, "encode", "-", "--disallowed_special", "none",
                              stdin=text.encode())
    assert (status, out) == (0, " ".join(map(str, ids)) + "\n")
    for typed in (out, json.dumps(ids), ",".join(map(str, ids)) + "\n"):
        assert run_main(capsys, monkeypatch, "decode", "-", stdin=typed.encode())[:2] == (0, text)  # the text back
    assert run_main(capsys, monkeypatch, "encode", "--", "-x")[1] == "12 87\n"  # a text that starts with a dash
    status, _, err = run_main(capsys, monkeypatch, "encode", "-", stdin=b"ok \xff")
    assert status == 2 and "encode -: stdin is not valid UTF-8: byte 3 is b'\\xff'" in err
    assert run_main(capsys, monkeypatch, "decode", "-", "995")[0] == 2
    assert run_main(capsys, monkeypatch, "show", "-", "--color", "never", stdin=b"hi there")[1].startswith(
        "hi| there")


class TerminalStdout(io.TextIOWrapper):
    """Standard output as a terminal: what a person reads, the shell's prompt after it."""

    def isatty(self):
        return True


@pytest.mark.parametrize("ids, shown", [("31373 995", "hello world\n"), ("31373 198", "hello\n"), ("[]", "")])
def test_decode_on_a_terminal_ends_the_line_before_the_prompt(monkeypatch, ids, shown):
    # only for the eye: a pipe or a file gets the text exactly (test_encode_then_decode_gives_back_the_bytes)
    written = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", TerminalStdout(written, encoding="utf-8"))
    assert tokenizer.cli.main(["decode", ids], prog=PROG) == 0
    sys.stdout.flush()
    assert written.getvalue().decode("utf-8") == shown


ROUND_TRIP_TEXTS = {"no final newline": b"Hello, world", "CRLF and blank lines": b"a\r\n\r\nb\n\n",
                    "a final newline": b"hello\n", "en_docs.txt": corpus_prefix("en_docs.txt", 300_000),
                    "ja_manpages.txt": corpus_prefix("ja_manpages.txt", 100_000)}


@pytest.mark.exhaustive  # two processes per text
@pytest.mark.parametrize("name", ROUND_TRIP_TEXTS)
def test_encode_then_decode_gives_back_the_bytes(tmp_path, name):
    """``encode - | decode -`` is the text again, byte for byte, as ``base64 | base64 -d`` is: decode added a
    newline to every output, so a text came back one line longer (and a file of it was not the file)."""
    text = ROUND_TRIP_TEXTS[name]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "tokenizer"]
    ids = subprocess.run([*command, "encode", "-", "--allowed_special", "all"], input=text, capture_output=True,
                         check=True, cwd=tmp_path, env=env).stdout
    back = subprocess.run([*command, "decode", "-"], input=ids, capture_output=True, check=True, cwd=tmp_path,
                          env=env).stdout
    assert back == text
    subprocess.run([*command, "decode", "-", "--out", "back.txt"], input=ids, check=True, cwd=tmp_path, env=env,
                   capture_output=True)
    assert (tmp_path / "back.txt").read_bytes() == text


def test_train_refuses_a_folder_that_holds_a_tokenizer_unless_force(capsys, monkeypatch, tmp_path):
    (tmp_path / "t.txt").write_text("low lower lowest newer newest " * 50, encoding="utf-8")
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok"),
               "--num_workers", "1"]
    assert run_main(capsys, monkeypatch, *options, "--format", "hf")[0] == 0
    before = (tmp_path / "tok" / "tokenizer.json").read_bytes()
    status, out, err = run_main(capsys, monkeypatch, *options)
    assert (status, out) == (2, "") and "already holds a tokenizer (tokenizer.json); pass --force" in err
    assert (tmp_path / "tok" / "tokenizer.json").read_bytes() == before and not (tmp_path / "tok.checkpoint").exists()
    assert run_main(capsys, monkeypatch, *options, "--force")[0] == 0  # gpt2 format now: the hf file is gone
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["encoder.json", "vocab.bpe"]
    (tmp_path / "empty").mkdir()
    options[options.index(str(tmp_path / "tok"))] = str(tmp_path / "empty")
    assert run_main(capsys, monkeypatch, *options)[0] == 0  # a folder without a tokenizer is fine


@pytest.mark.parametrize("format_, input_name", [
    ("gpt2", "vocab.bpe"), ("gpt2", "tokenizer.json"), ("hf", "tokenizer.json"), ("tiktoken", "merges.txt"),
    ("tiktoken", "other.tiktoken")])
def test_train_refuses_an_input_it_would_replace_in_out(cli, tmp_path, format_, input_name):
    # train writes its format's files into --out and removes another format's: an input among them would be lost
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / input_name).write_text("low lower lowest newer newest " * 50, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for given in [f"tok/{input_name}", f"tok/../tok/{input_name}"]:
        stderr = cli("train", "--input", given, "--vocab_size", "270", "--out", "tok", "--format", format_,
                     "--force", status=2).stderr
        assert f"would replace the input {given}" in stderr, stderr
        assert "name another --out, or move the input out of tok" in stderr
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    (tmp_path / "link.txt").symlink_to(tmp_path / "tok" / input_name)  # a link to it is that input too
    assert "would replace the input link.txt" in cli("train", "--input", "link.txt", "--vocab_size", "270", "--out",
                                                      "tok", "--format", format_, "--force", status=2).stderr


def test_train_refuses_an_input_in_its_state_folder(cli, tmp_path):
    (tmp_path / "tok.checkpoint").mkdir()
    (tmp_path / "tok.checkpoint" / "settings.json").write_text("low lower " * 50, encoding="utf-8")
    stderr = cli("train", "--input", "tok.checkpoint/settings.json", "--vocab_size", "270", "--out", "tok",
                 "--force", status=2).stderr
    assert "--input tok.checkpoint/settings.json is in tok.checkpoint, the folder where train keeps its state and " \
           "removes once the tokenizer is saved: move the input, or name another --out" in stderr
    assert (tmp_path / "tok.checkpoint" / "settings.json").is_file() and not (tmp_path / "tok").exists()


def test_train_may_read_a_file_of_out_it_does_not_replace(cli, tmp_path):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "notes.txt").write_text("low lower lowest newer newest " * 50, encoding="utf-8")
    cli("train", "--input", "tok", "--vocab_size", "270", "--out", "tok")
    assert sorted(p.name for p in (tmp_path / "tok").iterdir()) == ["encoder.json", "notes.txt", "vocab.bpe"]


def test_ctrl_c_in_train_names_the_checkpoint_and_resume(capsys, monkeypatch, tmp_path):
    import tokenizer.cli

    (tmp_path / "t.txt").write_text("hello world " * 10, encoding="utf-8")
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]

    def interrupted_after_counting(*args, checkpoint, **kwargs):
        (checkpoint / "settings.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer.cli, "train_bpe", interrupted_after_counting)
    status, out, err = run_main(capsys, monkeypatch, *options)
    assert (status, out) == (130, "")
    assert err == (f"{PROG}: interrupted; the training state is kept in {tmp_path / 'tok.checkpoint'}: run the same "
                   "command with --resume to continue\n")

    def interrupted_while_counting(*args, **kwargs):
        raise KeyboardInterrupt

    shutil.rmtree(tmp_path / "tok.checkpoint")
    monkeypatch.setattr(tokenizer.cli, "train_bpe", interrupted_while_counting)
    assert run_main(capsys, monkeypatch, *options)[::2] == (130, f"{PROG}: interrupted\n")
    assert not (tmp_path / "tok.checkpoint").exists()  # nothing to resume: nothing left


@pytest.mark.parametrize(("cwd", "out"), [("tok", "."), ("tok", "./"), ("tok/inner", ".."), ("tok/inner", "../"),
                                          ("tok", "inner/.."), ("", "tok/"), ("", "ABSOLUTE"), ("", "ABSOLUTE/"),
                                          ("tok/inner", "ABSOLUTE/inner/..")])
def test_train_keeps_its_state_beside_the_out_folder_however_it_is_written(capsys, monkeypatch, tmp_path, cwd, out):
    """The state folder's name was --out's with ".checkpoint" added: --out . kept it in "..checkpoint", a hidden
    folder inside the output folder (and .. in "...checkpoint"). Every spelling of tmp_path/tok keeps it in
    tmp_path/tok.checkpoint."""
    (tmp_path / "tok" / "inner").mkdir(parents=True)
    (tmp_path / "t.txt").write_text("hello world " * 10, encoding="utf-8")
    monkeypatch.chdir(tmp_path / cwd)

    def interrupted_after_counting(*args, checkpoint, **kwargs):
        checkpoint.mkdir(exist_ok=True)
        (checkpoint / "settings.json").write_text("{}")
        raise KeyboardInterrupt

    monkeypatch.setattr(tokenizer.cli, "train_bpe", interrupted_after_counting)
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270"]
    out = out.replace("ABSOLUTE", str(tmp_path / "tok"))
    status, printed, err = run_main(capsys, monkeypatch, *options, "--out", out)
    kept = re.fullmatch(f"{PROG}: interrupted; the training state is kept in (.+): run the same command with --resume "
                        "to continue\n", err)
    assert (status, printed) == (130, "") and kept, err
    assert (tmp_path / cwd / kept.group(1)).resolve() == tmp_path / "tok.checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt", "tok", "tok.checkpoint"]
    assert [p.name for p in (tmp_path / "tok").iterdir()] == ["inner"]


def test_train_into_the_root_folder_is_refused_before_any_work(capsys, monkeypatch, tmp_path):
    """--out / trained, then failed to name the tokenizer ("PosixPath('/') has an empty name") and kept its state
    in /.checkpoint: the root folder has no folder beside it for the state. (Run in this process with the trainer
    replaced, so that a regression fails here rather than writing into /.)"""
    (tmp_path / "t.txt").write_text("hello world " * 10, encoding="utf-8")

    def trained(*args, **kwargs):
        raise AssertionError("train started with --out /")

    monkeypatch.setattr(tokenizer.cli, "train_bpe", trained)
    monkeypatch.setattr(tokenizer.cli, "RunClock", trained)
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", "/"]
    assert run_main(capsys, monkeypatch, *options) == (
        2, "", f"{PROG}: error: --out /: train keeps its state in a folder beside --out, and the root folder has none "
               "beside it: name a folder inside it\n")


@pytest.mark.parametrize("failing", ["making", "saving"])
def test_a_tokenizer_not_made_or_saved_after_training_keeps_the_state_and_says_so(capsys, monkeypatch, tmp_path,
                                                                               failing):
    """A mistake found once the merges are learned (the encoding refuses them, or the format or the folder cannot
    take it): the state is kept, with every merge, and the error says so and what to do. It was kept without a
    word, and the next run answered that tok.checkpoint "holds the training state of a run that stopped"."""
    (tmp_path / "t.txt").write_text("low lower lowest newer newest " * 20, encoding="utf-8")
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]
    state = tmp_path / "tok.checkpoint"

    def refused(*args, **kwargs):
        raise ValueError("refused for the test")

    with monkeypatch.context() as patched:
        if failing == "making":
            patched.setattr(tokenizer.cli.Encoding, "from_vocab_merges", refused)
        else:
            patched.setattr(tokenizer.cli, "save_encoding", refused)
        status, out, err = run_main(capsys, monkeypatch, *options)
    assert (status, out) == (2, "")
    assert err == (f"{PROG}: error: refused for the test; the training state is kept in {state}, with every merge: "
                   "once that is fixed, run the command again with --resume to save the tokenizer without training "
                   "again, or with --force to start over\n")
    assert (state / "settings.json").is_file() and not (tmp_path / "tok").exists()
    merges = json.loads((state / "merges.json").read_text())
    assert len(merges) == 270 - 256  # all of them: resuming learns none again
    status, out, err = run_main(capsys, monkeypatch, *options, "--resume", "--format", "hf")
    assert (status, err) == (0, "") and "saved in the hf format" in out
    assert not state.exists()
    text = (tmp_path / "t.txt").read_text(encoding="utf-8")
    uninterrupted = Encoding.from_vocab_merges(*train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1))
    assert tokenizer.load(tmp_path / "tok").encode(text) == uninterrupted.encode(text)


def test_resuming_with_other_inputs_says_to_start_over_with_force(capsys, monkeypatch, tmp_path):
    """The library's advice, "start without resume", was refused by the command: a state is there, so starting
    over takes --force. The command names that flag."""
    (tmp_path / "t.txt").write_text("low lower lowest " * 20, encoding="utf-8")
    state = tmp_path / "tok.checkpoint"
    train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state)  # the state of a stopped run
    with open(tmp_path / "t.txt", "a", encoding="utf-8") as f:
        f.write("newer newest")
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]
    assert run_main(capsys, monkeypatch, *options, "--resume")[::2] == (
        2, f"{PROG}: error: --resume: the training state in {state} was made with other inputs: resume with the "
           "same ones, or pass --force instead of --resume to start over\n")
    assert (state / "settings.json").is_file()  # kept: the inputs may be put back
    status, out, err = run_main(capsys, monkeypatch, *options, "--force")
    assert (status, err) == (0, "") and out.startswith("trained ") and not state.exists()


@pytest.mark.parametrize(("file", "damage", "reason"), [
    ("counts.pickle", lambda data: data[:20], "pickle data was truncated"),
    ("merges.json", lambda data: b"[[1,", "Expecting value: line 1 column 5 (char 4)"),
    ("merges.json", lambda data: b"[1, 2]", "cannot unpack non-iterable int object"),
    ("settings.json", lambda data: b"[]", "not a JSON object"),
    ("counts.pickle", None, "no such file"),  # removed: "start without resume" was wrapped as a disk's error
    ("merges.json", None, "no such file"),
])
def test_resuming_a_damaged_state_names_the_file_and_says_to_start_over(capsys, monkeypatch, tmp_path, file, damage,
                                                                         reason):
    """A state file cut short or edited: --resume gave pickle's traceback, or JSON's bare "Expecting value"; one
    removed (``damage`` None) gave "start without resume", which the command refuses, and "run the same command
    with --resume", which it just was."""
    (tmp_path / "t.txt").write_text("low lower lowest " * 20, encoding="utf-8")
    state = tmp_path / "tok.checkpoint"
    train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state)  # the state of a stopped run
    if damage is None:
        (state / file).unlink()
    else:
        (state / file).write_bytes(damage((state / file).read_bytes()))
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]
    assert run_main(capsys, monkeypatch, *options, "--resume")[::2] == (
        2, f"{PROG}: error: --resume: the training state in {state} is damaged: {file} cannot be read ({reason}); "
           "pass --force instead of --resume to start over\n")
    status, out, err = run_main(capsys, monkeypatch, *options, "--force")
    assert (status, err) == (0, "") and out.startswith("trained ") and not state.exists()


@pytest.mark.parametrize("file", ["settings.json", "merges.json", "counts.pickle"])
def test_resuming_a_state_file_that_cannot_be_read_names_it_and_what_works(capsys, monkeypatch, tmp_path, file):
    """A state file there but not readable (no permission) gave "Permission denied: ...; the training state is kept
    in tok.checkpoint: run the same command with --resume to continue", which was that command. The file is named,
    and both ways out work: once it is readable, --resume; else --force. (Tests run as root, whom chmod does not
    stop: the state's reader is refused the file instead.)"""
    import tokenizer.training.checkpoint as checkpoint_module

    (tmp_path / "t.txt").write_text("low lower lowest " * 20, encoding="utf-8")
    state = tmp_path / "tok.checkpoint"
    train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state)  # the state of a stopped run
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]

    def refused(path, *args, **kwargs):
        if os.path.basename(path) == file:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return open(path, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(checkpoint_module, "open", refused, raising=False)
        assert run_main(capsys, monkeypatch, *options, "--resume")[::2] == (
            2, f"{PROG}: error: --resume: {state / file}, a file of the training state, cannot be read (Permission "
               "denied): make it readable (chmod u+r) and run the same command again, or pass --force instead of "
               "--resume to start over\n")
        assert (state / "settings.json").is_file()  # kept
        with pytest.raises(OSError, match=f"cannot be read: {file}: Permission denied; make it readable to resume"):
            train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state, resume=True)
    status, out, err = run_main(capsys, monkeypatch, *options, "--resume")  # readable again
    assert (status, err) == (0, "") and out.startswith("trained ") and not state.exists()
    train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state)
    with monkeypatch.context() as patched:
        patched.setattr(checkpoint_module, "open", refused, raising=False)
        status, out, err = run_main(capsys, monkeypatch, *options, "--force")  # still unreadable: start over
    assert (status, err) == (0, "") and out.startswith("trained ") and not state.exists()


@pytest.mark.parametrize("file", ["settings.json", "merges.json", "counts.pickle", "merges.json.partial"])
def test_a_folder_where_a_state_file_goes_is_named_before_any_work(capsys, monkeypatch, tmp_path, file):
    """A folder with a state file's name: --resume said "Is a directory ...; run the same command with --resume",
    --force could not remove it and said the same (or named a .partial file train had not made): advice that
    looped. It is named, with what works, before any work, and left as it is (it may hold the user's files)."""
    (tmp_path / "t.txt").write_text("low lower lowest " * 20, encoding="utf-8")
    state = tmp_path / "tok.checkpoint"
    train_bpe(tmp_path / "t.txt", 270, progress=False, num_workers=1, checkpoint=state)
    (state / file).unlink(missing_ok=True)
    (state / file).mkdir()
    (state / file / "notes.txt").write_text("mine")
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]
    for flag in ("--resume", "--force", None):
        assert run_main(capsys, monkeypatch, *options, *([flag] if flag else []))[::2] == (
            2, f"{PROG}: error: {state / file} is a folder, where train keeps a file of its training state: move it "
               f"out of {state}, or name another --out\n")
        assert (state / file / "notes.txt").read_text() == "mine"
    shutil.move(state / file, tmp_path / "moved")
    status, out, err = run_main(capsys, monkeypatch, *options, "--force")
    assert (status, err) == (0, "") and out.startswith("trained ") and not state.exists()


def test_a_disk_error_while_training_says_to_resume_once_it_is_fixed(capsys, monkeypatch, tmp_path):
    """A failure to write the state (a full disk) said "[Errno 28] ...; run the same command with --resume to
    continue": run at once, a --resume run fails the same way. The advice is to resume once that is fixed."""
    (tmp_path / "t.txt").write_text("hello world " * 10, encoding="utf-8")
    state = tmp_path / "tok.checkpoint"

    def disk_full_after_counting(*args, checkpoint, **kwargs):
        (checkpoint / "settings.json").write_text("{}")
        raise OSError(errno.ENOSPC, "No space left on device", str(checkpoint / "merges.json.partial"))

    monkeypatch.setattr(tokenizer.cli, "train_bpe", disk_full_after_counting)
    options = ["train", "--input", str(tmp_path / "t.txt"), "--vocab_size", "270", "--out", str(tmp_path / "tok")]
    for flag in ([], ["--resume"]):
        assert run_main(capsys, monkeypatch, *options, *flag)[::2] == (
            2, f"{PROG}: error: {state / 'merges.json.partial'}: No space left on device; the training state is kept "
               f"in {state}: once that is fixed, run the same command with --resume to continue\n")


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``encode - | head -c 10``: the command stops at once, says nothing, and exits as SIGPIPE would (141),
    not with 1 (parity's "different") or a traceback."""
    with start("encode", "-", cwd=tmp_path, stdin=subprocess.PIPE) as proc:  # closes its pipes at the end
        proc.stdin.write(corpus_prefix("en_dictionary.txt", 400_000).decode())  # ids: far more than a pipe holds
        proc.stdin.close()
        assert len(proc.stdout.read(10)) == 10
        proc.stdout.close()
        assert proc.wait(timeout=120) == 141
        assert proc.stderr.read() == ""


@pytest.mark.parametrize("command", [["stats", "--min_seconds", "0.1"], ["parity", "--encoding", "gpt2"]])
def test_a_pipe_named_as_an_input_is_read_once_as_stdin_is(tmp_path, command):
    """``stats <(zcat corpus.gz)`` (a pipe or FIFO, which can be read once): stats times an encoding by reading its
    inputs again, and so did wait forever on the FIFO; it is copied first, as standard input is, and named as
    given."""
    text = corpus_prefix("en_docs.txt", 20_000).decode("utf-8")
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)

    def write_once():
        with open(fifo, "w", encoding="utf-8") as f:  # waits for the command to open it
            f.write(text)

    threading.Thread(target=write_once, daemon=True).start()
    with start(command[0], str(fifo), *command[1:], "--allowed_special", "all", cwd=tmp_path) as proc:
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    tokens = len(get_encoding("gpt2").encode(text, allowed_special="all"))
    if command[0] == "stats":
        assert f"| {fifo} | gpt2 | {len(text.encode()):,} | {tokens:,} |" in out  # named as given
    else:
        assert out.startswith(f"{fifo}: gpt2 vs tiktoken gpt2: identical;") and f"{tokens:,} tokens" in out


def test_compare_prints_nothing_before_an_encoding_refuses_the_text(cli):
    # gpt2 has no <|endofprompt|>, cl100k_base refuses it: gpt2's rows were printed above the error
    result = cli("compare", "hi <|endofprompt|>", "--encodings", "gpt2,cl100k_base", "--allowed_special", "none",
                 "--disallowed_special", "all", status=2)
    assert result.stdout == "" and "'<|endofprompt|>', which is disallowed" in result.stderr


def test_the_advice_to_name_a_refused_token_works_in_a_command_over_several_encodings(cli, tmp_path):
    # cl100k_base refused <|endofprompt|> and advised "--allowed_special all (or that token)"; naming the token was
    # then refused, as no special token of gpt2, the other encoding compared
    (tmp_path / "p.txt").write_text("hi <|endofprompt|>", encoding="utf-8")
    both = ["--encodings", "gpt2,cl100k_base"]
    assert "(or that token)" in cli("stats", "p.txt", *both, status=2).stderr
    named = ["--allowed_special", "<|endofprompt|>"]
    rows = [line.split("|")[2:5] for line in cli("stats", "p.txt", *both, *named, "--min_seconds", "0").stdout
            .splitlines() if line.startswith("| p.txt")]
    gpt2, cl100k = get_encoding("gpt2"), get_encoding("cl100k_base")
    text = "hi <|endofprompt|>"
    assert [int(tokens.replace(",", "")) for _, _, tokens in rows] == [
        len(gpt2.encode_ordinary(text)), len(cl100k.encode(text, allowed_special="all"))]
    compared = cli("compare", "hi <|endofprompt|>", *both, *named, "--disallowed_special", "all").stdout
    assert "|<|endofprompt|>|" in compared and "|hi| <|||end|of|prom|pt|||>|" in compared
    # a token none of them has is still a mistake, said against all of them
    assert cli("stats", "p.txt", *both, "--allowed_special", "<|x|>", status=2).stderr.endswith(
        "'<|x|>' is not a special token of gpt2 or cl100k_base (their special tokens: <|endofprompt|>, <|endoftext|>, "
        "<|fim_middle|>, <|fim_prefix|>, <|fim_suffix|>); pass all, none or a comma list of their special tokens\n")


def test_parity_over_several_encodings_takes_the_token_its_advice_names(cli, tmp_path):
    # parity checked the flags against each encoding alone: cl100k_base's refusal advised "(or that token)", and
    # naming it was then refused as no special token of gpt2; checked against both, as stats and compare do
    (tmp_path / "p.txt").write_text("hi <|endofprompt|>", encoding="utf-8")
    both = ["--encoding", "gpt2,cl100k_base"]
    assert "(or that token)" in cli("parity", "p.txt", *both, status=2).stderr
    out = cli("parity", "p.txt", *both, "--allowed_special", "<|endofprompt|>").stdout.splitlines()
    gpt2_tokens, cl100k_tokens = (len(get_encoding("gpt2").encode_ordinary("hi <|endofprompt|>")),
                                  len(get_encoding("cl100k_base").encode("hi <|endofprompt|>", allowed_special="all")))
    assert out[0].startswith("p.txt: gpt2 vs ") and f"identical; 18 bytes, {gpt2_tokens} tokens;" in out[0]
    assert out[1].startswith("p.txt: cl100k_base vs ") and f"identical; 18 bytes, {cl100k_tokens} tokens;" in out[1]
    assert out[2] == "identical: 2 checks"
    assert "is not a special token of gpt2 or cl100k_base" in cli("parity", "p.txt", *both, "--allowed_special",
                                                                   "<|x|>", status=2).stderr

def test_a_disallowed_token_of_one_encoding_of_several_is_checked_by_the_encodings_that_have_it(cli, tmp_path):
    # --disallowed_special '<|fim_prefix|>' over gpt2 and cl100k_base was refused by gpt2 first, "though it is no
    # special token of gpt2", advising plain text as "the one way it can be encoded": cl100k_base's refusal, which
    # names the special token, is the one a user needs, and gpt2 reads that text as the plain text it is to it
    text = "hello <|fim_prefix|> world, and more words after it"
    (tmp_path / "p.txt").write_text(text, encoding="utf-8")
    both = ["--encodings", "gpt2,cl100k_base", "--disallowed_special", "<|fim_prefix|>"]
    cl100k_said = "The text contains the special token '<|fim_prefix|>', which is disallowed."
    commands = (["stats", "p.txt", *both, "--min_seconds", "0"], ["compare", text, *both],
                ["parity", "p.txt", "--encoding", *both[1:]])
    said = {command[0]: cli(*command, status=2).stderr for command in commands}
    assert {name: cl100k_said in stderr for name, stderr in said.items()} == dict.fromkeys(said, True)
    # a token gpt2 has is still checked by both: refused by gpt2, which comes first
    (tmp_path / "e.txt").write_text("hello <|endoftext|> world, and more words after it", encoding="utf-8")
    assert "e.txt: The text contains the special token '<|endoftext|>'" in cli(
        "stats", "e.txt", "--encodings", "gpt2,cl100k_base", "--disallowed_special", "<|endoftext|>", status=2).stderr
    # the Python face of compare takes the rule as the command does
    from tokenizer import teach

    with pytest.raises(ValueError, match="the special token '<.fim_prefix.>'"):
        teach.compare(text, ["gpt2", "cl100k_base"], allowed_special=set(), disallowed_special=["<|fim_prefix|>"])
    compared = teach.compare("hi <|fim_prefix|>", ["gpt2", "cl100k_base"], allowed_special=set(),
                             disallowed_special=iter(["<|endoftext|>"]))
    assert compared.ids["gpt2"] == get_encoding("gpt2").encode_ordinary("hi <|fim_prefix|>")


def test_explain_refuses_a_pre_token_over_its_limit_before_printing(cli):
    # its work grows with the square of the pre-token's length: 100,000 letters took minutes and gigabytes, after
    # the lines of the pre-tokens before it were printed
    from tokenizer.teach import MAX_EXPLAIN_BYTES

    result = cli("explain", "hi " + "a" * 100_000, status=2)
    assert result.stdout == ""
    assert result.stderr.endswith(f"the pre-token ' aaaaaaaaaaaaaaaaaaa'... is 100,001 bytes; the merge trace replays "
                                  f"BPE step by step for pre-tokens up to {MAX_EXPLAIN_BYTES:,} bytes (its work grows "
                                  "with the square of the length): explain a shorter text, or see its tokens with "
                                  "show\n")
    longest = "a" * (MAX_EXPLAIN_BYTES - 1)
    assert f"pre-token ' {longest}': {MAX_EXPLAIN_BYTES} bytes" in cli("explain", f"hi {longest}").stdout
    assert "special token '<|endoftext|>'" in cli("explain", "<|endoftext|>" * 100).stdout  # special tokens: no limit


def test_stats_prints_nothing_before_it_fails(capsys, monkeypatch, tmp_path):
    (tmp_path / "ok.txt").write_text("fine text", encoding="utf-8")
    (tmp_path / "bad.txt").write_bytes(b"ok \xff")
    status, out, err = run_main(capsys, monkeypatch, "stats", str(tmp_path / "ok.txt"), str(tmp_path / "bad.txt"),
                                "--encodings", "gpt2")
    assert (status, out) == (2, "") and "not valid UTF-8" in err
    status, out, _ = run_main(capsys, monkeypatch, "stats", str(tmp_path / "ok.txt"), "--encodings", "gpt2")
    assert status == 0 and out.startswith("| file | encoding |") and f"| {tmp_path / 'ok.txt'} | gpt2 | 9 | 2 |" in out


def test_stats_names_each_file_as_given_so_that_two_of_one_name_are_told_apart(capsys, monkeypatch, tmp_path):
    for folder, text in (("a", "one"), ("b", "one two three")):  # same file name, other folders
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.txt").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status, out, _ = run_main(capsys, monkeypatch, "stats", "a/notes.txt", "b/notes.txt", "--encodings", "gpt2",
                              "--min_seconds", "0")
    assert status == 0 and "| a/notes.txt | gpt2 | 3 | 1 |" in out and "| b/notes.txt | gpt2 | 13 | 3 |" in out


# ---- issue 42: every mistake told before any work, in one line; one meaning of "bytes" ------------------------


@pytest.mark.parametrize("args", [["stats", "a.txt", "--encodings", ""], ["stats", "a.txt", "--encodings", ","],
                                  ["compare", "hi", "--encodings", ""], ["serve", "--encoding", ","],
                                  ["train", "--input", "", "--vocab_size", "300", "--out", "d"]])
def test_an_empty_list_option_is_a_mistake_not_a_traceback(cli, tmp_path, args):
    (tmp_path / "a.txt").write_text("hi", encoding="utf-8")
    assert "expected a comma list of names" in cli(*args, status=2).stderr


def test_an_empty_encoding_is_a_mistake_not_the_current_folder(cli):
    assert "--encoding '': name an encoding" in cli("encode", "hi", "--encoding", "", status=2).stderr


def test_count_checks_every_input_before_it_prints_any(capsys, monkeypatch, tmp_path):
    for name, data in (("a", b"hello"), ("b", b"world"), ("c", b"x\xff")):
        (tmp_path / name).write_bytes(data)
    status, out, err = run_main(capsys, monkeypatch, "count", *(str(tmp_path / n) for n in "abc"))
    assert (status, out) == (2, "") and "c is not valid UTF-8: byte 1" in err


def test_a_read_that_fails_names_the_file(capsys, monkeypatch):
    if not os.path.exists("/proc/self/mem"):
        pytest.skip("needs Linux's /proc/self/mem (opens, then fails to read)")
    status, out, err = run_main(capsys, monkeypatch, "count", "/proc/self/mem")
    assert (status, out) == (2, "") and "cannot read /proc/self/mem: " in err and "Errno" not in err


def test_dash_text_arguments_and_bytes_that_are_not_utf8_are_told(capsys, monkeypatch):
    status, _, err = run_main(capsys, monkeypatch, "encode", "-x")
    assert status == 2 and f"goes after --: {PROG} encode -- -x" in err
    status, _, err = run_main(capsys, monkeypatch, "encode", "--", "hi", "--encoding", "gpt2")
    assert status == 2 and "everything after -- is the TEXT" in err
    # an argument's bytes b"ok \xff" reach Python as "ok \udcff": refused, as on stdin, never read as U+FFFD
    status, out, err = run_main(capsys, monkeypatch, "encode", "ok \udcff")
    assert (status, out) == (2, "") and "TEXT is not valid UTF-8: byte 3 is b'\\xff'" in err


def test_serve_blames_a_host_that_is_no_address(capsys, monkeypatch):
    status, out, err = run_main(capsys, monkeypatch, "serve", "--host", "256.1.1.1", "--port", "0")
    assert (status, out) == (2, "") and "--host 256.1.1.1: not an address of this machine" in err
    assert "another --port" not in err


def test_an_address_this_machine_lacks_is_blamed_on_the_host_not_the_port():
    import errno

    from tokenizer.command_line import cannot_listen

    lacking = OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address")
    assert cannot_listen(lacking, "192.0.2.1", 8000).startswith("--host 192.0.2.1: not an address of this machine")
    in_use = OSError(errno.EADDRINUSE, "Address already in use")
    assert "pass another --port" in cannot_listen(in_use, "127.0.0.1", 8000)


def test_a_failed_download_exits_1_as_gpt2s_does(capsys, monkeypatch):
    import tokenizer.encoding_argument
    from tokenizer.download import DownloadError

    def offline(name):
        raise DownloadError(f"cannot download {name}'s vocabulary: no network")

    monkeypatch.setattr(tokenizer.encoding_argument, "get_encoding", offline)
    status, out, err = run_main(capsys, monkeypatch, "encode", "hi")
    assert (status, out) == (1, "") and err == f"{PROG}: error: cannot download gpt2's vocabulary: no network\n"


class GoneReader(io.StringIO):
    """A stdout whose reader went away (``| head``): every write is a broken pipe."""

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_gone_away_is_141_in_this_process_too(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", GoneReader())
    from tokenizer.cli import main

    assert main(["encode", "hello"], prog=PROG) == 141
    assert capsys.readouterr().err == ""


def test_train_bpe_draws_no_bars_when_stderr_is_no_terminal(capsys, tmp_path):
    (tmp_path / "t.txt").write_text("low lower lowest newer " * 20, encoding="utf-8")
    train_bpe(tmp_path / "t.txt", 270, num_workers=1)
    assert capsys.readouterr().err == ""  # capsys: stderr is not a terminal


def test_train_on_a_terminal_draws_a_bar_while_it_encodes_the_text_again_for_its_summary(capsys, monkeypatch,
                                                                                          tmp_path):
    # the figures train prints last come from encoding the training text again: minutes on a large corpus, or on
    # text without spaces (one pre-token of 300 KB took 2 minutes), which a person must not wait through in silence
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text("low lower lowest newer " * 20, encoding="utf-8")
    monkeypatch.setattr(tokenizer.cli, "show_progress", lambda: True)
    assert tokenizer.cli.main(["train", "--input", "t.txt", "--vocab_size", "270", "--out", "tok"], prog=PROG) == 0
    stderr = capsys.readouterr().err
    assert "pre-tokenizing" in stderr and "merging" in stderr
    assert "t.txt (tok)" in stderr  # the summary's bar: the file, and the tokenizer it is encoded with


def test_bytes_mean_the_texts_utf8_bytes_in_every_command(cli, tmp_path):
    """count, stats, encode-file and encode-dataset (and its manifest) give one "bytes" for the same documents,
    whether the file is .jsonl or .jsonl.gz: the text's UTF-8 bytes; the file's size is file_bytes."""
    docs = ["naïve \"quoted\" text", "中文 and \\ back", "ok"]
    data = "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    (tmp_path / "d.jsonl").write_bytes(data)
    (tmp_path / "z.jsonl.gz").write_bytes(__import__("gzip").compress(data))
    text_bytes = sum(len(d.encode()) for d in docs)
    for name in ("d.jsonl", "z.jsonl.gz"):
        assert f" {text_bytes:,} bytes, " in cli("count", name).stdout
        assert f"| {text_bytes:,} |" in cli("stats", name, "--encodings", "gpt2").stdout
        file_bytes = (tmp_path / name).stat().st_size
        out = cli("encode-file", name, "--out", f"{name}.bin").stdout
        assert f"from {text_bytes:,} bytes ({file_bytes:,} file bytes)," in out
    cli("encode-dataset", "d.jsonl", "z.jsonl.gz", "--out", "ds")
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert [e["bytes"] for e in manifest["shards"]] == [text_bytes, text_bytes]
    assert manifest["totals"]["file_bytes"] == sum((tmp_path / n).stat().st_size for n in ("d.jsonl", "z.jsonl.gz"))


def test_a_version_1_manifest_is_still_read(tmp_path):
    """A manifest written before "bytes" meant the text: its text shards are kept (their bytes were the text's
    already), its JSON-lines shards redone, and the manifest rewritten in the new version."""
    from tokenizer.jobs.manifest import FORMAT_1
    from tokenizer.jobs.sharded import encode_dataset

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("plain text", encoding="utf-8")
    (tmp_path / "in" / "b.jsonl").write_text(json.dumps({"text": "é"}) + "\n", encoding="utf-8")
    encode_dataset([tmp_path / "in"], tmp_path / "out", progress=False, workers=1)
    path = tmp_path / "out" / "manifest.json"
    old = json.loads(path.read_text())
    old["format"] = FORMAT_1
    for entry in old["shards"]:
        entry["bytes"] = entry.pop("file_bytes")
    path.write_text(json.dumps(old))
    again = encode_dataset([tmp_path / "in"], tmp_path / "out", progress=False, workers=1)
    assert (again["encoded"], again["skipped"]) == (1, 1)
    assert [e["bytes"] for e in again["shards"]] == [len("plain text"), len("é".encode())]


def test_the_input_readers_examples_run():
    import doctest

    from tokenizer import text_input

    result = doctest.testmod(text_input)
    assert result.failed == 0 and result.attempted >= 3


def test_a_slow_encoding_says_it_is_loading_to_a_person_and_a_quick_one_says_nothing(monkeypatch, capsys):
    """Nothing waits more than 2 s in silence: opening an encoding that takes long (a large tokenizer.json the
    first time) says so on a terminal (after command_line.SLOW_AFTER_SECONDS), and nothing when it is quick or
    nobody watches."""
    import time

    from tokenizer import command_line, encoding_argument

    monkeypatch.setattr(command_line, "SLOW_AFTER_SECONDS", 0.05)
    loaded = get_encoding("gpt2")
    monkeypatch.setattr(encoding_argument, "open_encoding", lambda name: time.sleep(0.5) or loaded)
    assert tokenizer.cli.open_encoding("big/tokenizer.json") is loaded
    assert capsys.readouterr().err == ""  # stderr is no terminal here
    monkeypatch.setattr(command_line, "show_progress", lambda: True)
    tokenizer.cli.open_encoding("big/tokenizer.json")
    assert capsys.readouterr().err == "loading big/tokenizer.json ...\n"
    monkeypatch.setattr(encoding_argument, "open_encoding", lambda name: loaded)
    tokenizer.cli.open_encoding("gpt2")
    time.sleep(0.2)  # past the delay: the quick one's notice was cancelled, not merely late
    assert capsys.readouterr().err == ""



def test_encode_file_from_stdin_reports_the_workers_that_ran(cli, tmp_path):
    out = cli("encode-file", "-", "--out", "x.bin", "--workers", "8", stdin=b"hello world").stdout
    assert out.startswith("x.bin: 2 tokens (uint16) from 11 bytes, ") and re.search(r"s, 1 worker, gpt2\)\n$", out), out

# ---- a stdout that cannot print the output ---------------------------------------------------------------


def run_with_stdout_encoding(monkeypatch, tmp_path, encoding: str, body) -> tuple[str, str]:
    """(stdout, stderr) of ``body()`` with the streams Python makes for PYTHONIOENCODING=``encoding``: stdout
    strict, stderr backslashreplace."""
    out, err = io.BytesIO(), io.BytesIO()
    stdout = io.TextIOWrapper(out, encoding=encoding, errors="strict")
    stderr = io.TextIOWrapper(err, encoding=encoding, errors="backslashreplace", line_buffering=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    body()
    stdout.flush()
    stderr.flush()
    return out.getvalue().decode(encoding), err.getvalue().decode(encoding)


CANNOT_PRINT = ("stdout's encoding, ascii, cannot print: set PYTHONIOENCODING=utf-8 to have it printed (or written "
                "into a file) as UTF-8")


@pytest.mark.parametrize("command", [
    ["decode", "7718", "2634"], ["show", "caf\u00e9", "--color", "never"], ["explain", "caf\u00e9"],
    ["compare", "caf\u00e9"], ["count", "caf\u00e9.txt"], ["stats", "caf\u00e9.txt", "--min_seconds", "0"],
    ["encode-file", "caf\u00e9.txt"]])
def test_an_output_stdout_cannot_print_says_to_set_pythonioencoding(monkeypatch, tmp_path, command):
    (tmp_path / "caf\u00e9.txt").write_text("hello world\n", encoding="utf-8")
    statuses = []
    _, stderr = run_with_stdout_encoding(monkeypatch, tmp_path, "ascii",
                                         lambda: statuses.append(tokenizer.cli.main(command, prog=PROG)))
    assert statuses == [2] and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"{PROG}: error: the output holds '\\xe9' (U+00E9), which {CANNOT_PRINT}"), stderr


def test_cannot_print_is_told_only_for_the_output(monkeypatch, tmp_path):
    from tokenizer.command_line import run_guarded

    def lone_surrogate():  # the work's own UnicodeEncodeError (UTF-8) keeps its message, whatever stdout takes
        "\ud800".encode("utf-8")

    for encoding in ("ascii", "utf-8"):
        statuses = []
        _, stderr = run_with_stdout_encoding(monkeypatch, tmp_path, encoding, lambda: statuses.append(
            run_guarded("prog", lone_surrogate, errors=[(ValueError, 2)])))
        assert statuses == [2] and stderr == ("prog: error: 'utf-8' codec can't encode character '\\ud800' in "
                                              "position 0: surrogates not allowed\n")
    statuses = []  # what gpt2 runs too: its continuation, its --score tokens, "wrote DIR"
    _, stderr = run_with_stdout_encoding(monkeypatch, tmp_path, "ascii", lambda: statuses.append(
        run_guarded("gpt2", lambda: print("na\u00efve \u4e2d"), errors=[(ValueError, 2)])))
    assert statuses == [2] and stderr == f"gpt2: error: the output holds '\\xef' (U+00EF), which {CANNOT_PRINT}\n"


def test_a_list_option_takes_a_path_that_holds_a_comma_whole(cli, tmp_path, monkeypatch):
    # --encoding ./my,tok was split at its comma, "./my: no such file or folder", in every command that takes a
    # comma list; gpt2 --serve --encoding took it whole
    get_encoding("gpt2").save(tmp_path / "my,tok")
    (tmp_path / "a,b.txt").write_text("hello world", encoding="utf-8")
    compared = cli("compare", "hello world", "--encodings", "my,tok, cl100k_base").stdout.splitlines()
    assert compared[0].startswith("my,tok       saved") and compared[2].startswith("cl100k_base  GPT-4")
    rows = [line.split(" | ")[1:4] for line in cli("stats", "a,b.txt", "--encodings", "my,tok").stdout.splitlines()
            if line.startswith("| a,b.txt")]
    assert rows == [["my,tok", "11", "2"]]
    assert cli("parity", "a,b.txt", "--encoding", "my,tok").stdout.startswith("a,b.txt: my,tok vs ")
    monkeypatch.chdir(tmp_path)  # the commands that loop forever or train: what their parser makes of it
    parser = tokenizer.cli.build_parser(PROG)
    assert parser.parse_args(["serve", "--encoding", "gpt2,my,tok"]).encoding == ["gpt2", "my,tok"]
    train = parser.parse_args(["train", "--input", "a,b.txt,my,tok", "--vocab_size", "300", "--out", "d"])
    assert train.input == ["a,b.txt", "my,tok"]
    assert parser.parse_args(["stats", "x", "--encodings", " gpt2, ,o200k_base"]).encodings == ["gpt2", "o200k_base"]


@pytest.mark.parametrize("argv", [["encode", "hi"], ["count", "FILE"], ["encode-file", "FILE", "--out", "-"],
                                  ["stats", "FILE", "--min_seconds", "0"], ["compare", "hi"]])
def test_a_closed_stdout_is_one_line_and_exit_2_before_any_work(monkeypatch, tmp_path, argv):
    # `gpt2-tokenizer encode hi >&-` (Python's sys.stdout is then None) did the work, printed nothing, then ended in
    # a traceback: "'NoneType' object has no attribute 'flush'"; told first, as gpt2 tells it
    from tokenizer.cli import main

    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    monkeypatch.setattr(tokenizer.cli, "open_encoding", lambda name: pytest.fail("loaded an encoding"))
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        status = main([str(tmp_path / "a.txt") if word == "FILE" else word for word in argv], prog=PROG)
    except SystemExit as exit_:
        status = exit_.code
    assert status == 2 and err.getvalue() == (f"{PROG} {argv[0]}: error: stdout is closed, and the output is printed "
                                              f"there: give it a file (> out.txt), or /dev/null to drop it "
                                              f"(see {PROG} {argv[0]} --help)\n")


class FullDiskBytes(io.RawIOBase):
    """The file under a stdout on a full disk (``> /dev/full``): every write fails with ENOSPC."""

    def writable(self):
        return True

    def write(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("argv", [["encode", "hi"], ["encode", "BIG"], ["encode-file", "FILE", "--out", "-"],
                                  ["decode", "31373"], ["count", "FILE"], ["compare", "hi"]])
def test_a_stdout_on_a_full_disk_is_named_in_one_line_and_exit_1(monkeypatch, tmp_path, argv):
    # `gpt2-tokenizer encode hi > /dev/full` said "error: No space left on device", naming nothing, with 2, the
    # status of a mistake in what was asked: the machine failed (1, as gpt2 says it), and stdout is the one
    from tokenizer.cli import main

    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    words = {"FILE": str(tmp_path / "a.txt"), "BIG": "hello " * 10_000}  # (BIG: fails in a print, not at the end)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(FullDiskBytes()), encoding="utf-8"))
    monkeypatch.setattr(sys, "stderr", err)
    assert main([words.get(word, word) for word in argv], prog=PROG) == 1
    assert err.getvalue() == f"{PROG}: error: cannot write the output to stdout: No space left on device\n"


def test_a_stdout_on_dev_full_is_named_in_one_line_and_exit_1(tmp_path):
    # the real thing, Linux's device that is always full: the final flush failed
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "tokenizer", "encode", "hi"], cwd=tmp_path, stdout=full,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (proc.returncode, proc.stderr) == (1, "python -m tokenizer: error: cannot write the output to stdout: No "
                                                 "space left on device\n")


@pytest.mark.parametrize("argv, written", [
    (["train", "--input", "a.txt", "--vocab_size", "260", "--out", "tok"], "the tokenizer is saved in tok"),
    (["encode-file", "a.txt", "--out", "a.bin"], "a.bin is written"),
    (["encode-dataset", "a.txt", "--out", "ds"],
     f"the dataset is written in ds (see {os.path.join('ds', 'manifest.json')})"),
    (["decode", "31373", "--out", "hello.txt"], "hello.txt is written"),
])
def test_a_full_stdout_after_the_output_file_is_written_says_the_file_is_there(monkeypatch, tmp_path, argv, written):
    # `gpt2-tokenizer train ... > /dev/full` saved the tokenizer, then said only "cannot write the output to stdout"
    # (its summary, printed at the end, was the output it meant): a user would think the tokenizer lost
    from tokenizer.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("hello world, hello tokens " * 20, encoding="utf-8")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BufferedWriter(FullDiskBytes()), encoding="utf-8"))
    monkeypatch.setattr(sys, "stderr", err)
    assert main(argv, prog=PROG) == 1
    assert err.getvalue() == (f"{PROG}: error: cannot write the summary to stdout: No space left on device; {written} "
                              "all the same\n")
    assert (tmp_path / argv[argv.index("--out") + 1]).exists()
    assert not (tmp_path / "tok.checkpoint").exists()


def comma_token_encoding(folder) -> None:
    """A byte-level encoding saved in ``folder`` whose special tokens hold commas: <|a,b|> beside <|a|>."""
    single_bytes = {bytes([byte]): byte for byte in range(256)}
    Encoding("commas", pat_str=r"\S+|\s+", mergeable_ranks=single_bytes,
             special_tokens={"<|a,b|>": 256, "<|a|>": 257, "<|endoftext|>": 258}).save(folder, format="tiktoken")


def test_the_special_token_flags_repeat_and_take_a_token_that_holds_a_comma_whole(cli, tmp_path):
    """--allowed_special and --disallowed_special split their value at every comma, so a special token holding
    one could not be named ('<|a' is not a special token), and a second flag replaced the first: each occurrence
    is now a list, added to the others', and a run of parts that is one of the special tokens is that token."""
    comma_token_encoding(tmp_path / "tok")
    text = "x<|a,b|>y<|a|>"

    def ids(*flags, status=0):
        return cli("encode", text, "--encoding", "tok", *flags, status=status)

    assert ids("--allowed_special", "<|a,b|>,<|a|>").stdout.split() == ["120", "256", "121", "257"]
    assert ids("--allowed_special", "<|a,b|>", "--allowed-special", "<|a|>").stdout.split() == [
        "120", "256", "121", "257"]
    # the comma token allowed, the other disallowed by name: refused, naming the one that was disallowed
    said = ids("--allowed_special", "<|a,b|>", "--disallowed_special", "<|a|>", status=2).stderr
    assert "special token '<|a|>', which is disallowed" in said
    # disallowed by name, comma and all; the other left as plain text by --disallowed_special none's rule
    said = ids("--allowed_special", "<|a|>", "--disallowed_special", "<|a,b|>", status=2).stderr
    assert "special token '<|a,b|>', which is disallowed" in said
    plain = [str(byte) for byte in b"x<|a,b|>y"]
    assert ids("--allowed_special", "<|a|>", "--disallowed_special", "none").stdout.split() == [*plain, "257"]
    # a part that no token is or holds is named; all and none go alone
    assert "'<|c|>' is not a special token of commas" in ids("--allowed_special", "<|a,b|>,<|c|>", status=2).stderr
    assert ids("--allowed_special", "all", "--allowed-special", "all").stdout.split() == ["120", "256", "121", "257"]
    assert ids("--allowed_special", "all", "--allowed_special", "<|a|>", status=2).stderr.endswith(
        "error: --allowed_special all and --allowed_special '<|a|>': pass all or none alone, or the special tokens "
        "(repeat the flag, or a comma list)\n")
    # the teaching commands read the flags by the same rule (show allows every special token by default)
    shown = cli("show", text, "--encoding", "tok", "--allowed_special", "<|a,b|>", "--allowed_special", "<|a|>",
                "--color", "never").stdout.splitlines()
    assert shown[1] == "120 256 121 257"


def test_trains_special_tokens_repeat_and_read_a_marked_token_with_a_comma_whole(tmp_path):
    """train's --special_tokens "<|a,b|>" made the two tokens '<|a' and 'b|>': a token written like <|...|> is now
    one token, commas and all, and one of another form is given whole by --special_token."""
    parser = tokenizer.cli.build_parser(PROG)

    def special_tokens(*flags):
        return parser.parse_args(["train", "--input", "x", "--vocab_size", "300", "--out", "d", *flags]).special_tokens

    assert special_tokens() == []
    assert special_tokens("--special_tokens", "<|endoftext|>,<|pad|>") == ["<|endoftext|>", "<|pad|>"]
    assert special_tokens("--special_tokens", "<|a,b|>, <|pad|>", "--special-tokens", "[SEP]") == [
        "<|a,b|>", "<|pad|>", "[SEP]"]
    assert special_tokens("--special_tokens", "<|a|>,<|b|>,x,y") == ["<|a|>", "<|b|>", "x", "y"]
    assert special_tokens("--special_token", "[A,B]", "--special_tokens", "<|e|>", "--special_token", "<|x,y|>") == [
        "[A,B]", "<|e|>", "<|x,y|>"]
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as said:
        special_tokens("--special_token", "<|a|>,<|b|>")
    assert "--special_token: expected one special token, got 2 ('<|a|>,<|b|>'): pass --special_tokens" in \
        said.getvalue()


def test_a_long_list_option_costs_a_few_path_checks_per_name_not_one_per_run_of_them(tmp_path, monkeypatch):
    """names_list checked every run of parts as a path: 300 comma-joined names made 44,850 checks (about 1 s).
    A run now grows only while its folder holds an entry that starts with it and a comma, so the checks grow
    with the list's length; what it reads is the same, a path with commas in a folder or below one whole."""
    for folder in ("e5,e6", "sub/e7,e8,e9", "Sub,Case"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    checks = collections.Counter()

    def counted(name, check):
        def call(path=os.curdir):
            checks[name] += 1
            return check(path)
        return call

    monkeypatch.setattr(os.path, "exists", counted("exists", os.path.exists))
    monkeypatch.setattr(os, "listdir", counted("listdir", os.listdir))
    for size in (300, 600):
        names = [f"e{k}" for k in range(size)]
        names[7:10] = ["sub/e7", "e8", "e9"]
        checks.clear()
        read = tokenizer.cli.names_list(",".join(names))
        assert read == ["e0", "e1", "e2", "e3", "e4", "e5,e6", "sub/e7,e8,e9", *names[10:]]
        assert sum(checks.values()) < 20, checks  # (the whole runs: 44,850 path checks for 300)
    assert tokenizer.cli.names_list("Sub,Case,x,sub/e7,e8,e9") == ["Sub,Case", "x", "sub/e7,e8,e9"]
    assert tokenizer.cli.names_list("no/such,folder,sub/e7,e8") == ["no/such", "folder", "sub/e7", "e8"]
    # a folder no path can name, as os.path.exists reads it: no such path (listing it raised ValueError)
    assert tokenizer.cli.names_list("a\0b/c,d") == ["a\0b/c", "d"]
    assert tokenizer.cli.names_list("\ud800/x,y") == ["\ud800/x", "y"]


def test_a_list_option_and_the_playground_read_commas_by_one_rule(tmp_path, monkeypatch):
    """tokenizer/cli.py's joined_paths and tokenizer/serve.py's comma_readings each had a rule of their own for a
    name holding commas; both read command_line.comma_readings now. Overlapping paths: the longest name first."""
    from tokenizer import command_line, serve

    for folder in ("a,b", "b,c", "my,tok"):
        (tmp_path / folder).mkdir()
    monkeypatch.chdir(tmp_path)
    assert tokenizer.cli.names_list("a,b,c") == ["a,b", "c"]  # as the greedy rule before: the longest first
    assert tokenizer.cli.names_list(" gpt2 ,, my,tok,x ") == ["gpt2", "my,tok", "x"]
    assert tokenizer.cli.names_list("x,y") == ["x", "y"]
    assert serve.comma_readings is command_line.comma_readings is tokenizer.cli.comma_readings
