"""Both command lines under argv that hypothesis draws: real and nonsense flags, empty strings, ``-``, paths to a
device, a FIFO, a symlink, folders, missing files, empty and invalid UTF-8 files, arguments that are not UTF-8.

Whatever the argv, a command must end with a status a user can act on (0, 1, 2, 130 or 141), never a traceback,
say an error in at most two lines, never hang, and change no file but the outputs it was named (``--out``,
``--save_hf``, ``encode-file``'s default ``INPUT.bin``, the models folder a download fills). The commands run in
this process (``tokenizer.cli.main``, ``gpt2_numpy.cli.main``), in a folder of their own holding every kind of
path; the flags are read from the commands' own parsers, so a new flag is fuzzed without a change here.

What it does not run: the playground's server (``serve``, ``gpt2 --serve``), which serves until stopped, and
Ray (``--engine ray`` starts a cluster). The everyday tier draws a small sample; the exhaustive tier
(``FUZZ_EXAMPLES``) draws more.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FUZZ_EXAMPLES, corpus_text
from gpt2_numpy import checkpoints
from gpt2_numpy.cli import command_line_parser
from gpt2_numpy.cli import main as gpt2_main
from gpt2_numpy.encoder import get_encoder
from tokenizer.cli import build_parser
from tokenizer.cli import main as tokenizer_main

EXAMPLES = max(FUZZ_EXAMPLES // 10, 20)
EXIT_STATUSES = {0, 1, 2, 130, 141}
NOT_FUZZED = {"serve", "--serve", "--help", "-h", "--version", "--engine", "--address"}  # a server runs until
# stopped; --help and --version only print; --engine ray would start a Ray cluster
NOT_UTF8 = os.fsdecode(b"caf\xe9")  # how Python hands over an argument that is not UTF-8: a lone surrogate
SECONDS_ALLOWED = 60


class Hung(BaseException):
    """Raised by the alarm when a command has run too long (a BaseException: no command may catch it)."""


def tiny_params(rng, n_vocab=50257, n_ctx=8, n_embd=8):
    def normal(*shape):
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def dense(nx, nf):
        return {"w": normal(nx, nf), "b": normal(nf)}

    def norm():
        return {"g": np.ones(n_embd, np.float32), "b": normal(n_embd)}

    block = {"ln_1": norm(), "attn": {"c_attn": dense(n_embd, 3 * n_embd), "c_proj": dense(n_embd, n_embd)},
             "ln_2": norm(), "mlp": {"c_fc": dense(n_embd, 4 * n_embd), "c_proj": dense(4 * n_embd, n_embd)}}
    return {"wte": normal(n_vocab, n_embd), "wpe": normal(n_ctx, n_embd), "blocks": [block], "ln_f": norm()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return make_world(tmp_path_factory.mktemp("world"))


def make_world(root: Path) -> Path:
    """root, filled with every kind of path a command may be handed."""
    (root / "text.txt").write_text(corpus_text("en_docs.txt", 3000), encoding="utf-8")
    (root / "empty.txt").write_bytes(b"")
    (root / "bad.txt").write_bytes(b"caf\xe9 au lait\n")
    (root / "docs.jsonl").write_text('{"text": "Hello there"}\n{"text": "General Kenobi"}\n', encoding="utf-8")
    (root / "ids.bin").write_bytes(np.array([15496, 11, 995], dtype=np.uint16).tobytes())
    (root / "folder").mkdir()
    (root / "folder" / "a.txt").write_text("Not all heroes wear capes.\n", encoding="utf-8")
    (root / "emptydir").mkdir()
    (root / "link.txt").symlink_to(root / "text.txt")
    os.mkfifo(root / "fifo")
    try:  # a device of its own, as /dev/null is (root only: the suite runs as root in CI)
        os.mknod(root / "nulldev", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pass
    hparams = {"n_vocab": 50257, "n_ctx": 8, "n_embd": 8, "n_head": 2, "n_layer": 1}
    checkpoints.save_hf(root / "model", get_encoder("124M", root / "models"), hparams,
                        tiny_params(np.random.default_rng(0)))
    (root / "models").mkdir(exist_ok=True)
    return root


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under root: its kind, and for a file its size, modification time and (small files) bytes."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                seen[str(path.relative_to(root))] = ("file", info.st_size, info.st_mtime_ns)
            else:
                seen[str(path.relative_to(root))] = (stat.S_IFMT(info.st_mode),)
    return seen


def tree_of(parser: argparse.ArgumentParser) -> tuple[list[argparse.Action], dict[str, argparse.ArgumentParser]]:
    """(the options of parser, its subcommands' parsers by name), read from argparse's own tables."""
    options, commands = [], {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            commands.update(action.choices)
        elif action.option_strings and not set(action.option_strings) & NOT_FUZZED:
            options.append(action)
    return options, commands


PATHS = ["text.txt", "empty.txt", "bad.txt", "docs.jsonl", "ids.bin", "folder", "emptydir", "link.txt", "nulldev",
         "missing.txt", "missing/", "model", "models", "-"]
TEXTS = ["Hello, world", "<|endoftext|>", "", "-x", "15496 11 995", "[15496, 11]", "999999", NOT_UTF8, "--"]
WORDS = ["", "all", "none", "gpt2", "cl100k_base", "nope", "a,b", ",", "<|endoftext|>", "124M", "tiktoken",
         "256.1.1.1", "text", NOT_UTF8]
NUMBERS = ["0", "1", "2", "3", "-1", "x", "1e3", "2000", ""]
OUTPUT_FLAGS = {"--out", "--save_hf", "--save-hf", "--models_dir", "--models-dir"}
OUTPUT_VALUES = ["out.bin", "outdir", "fifo", "nulldev", "link.txt", "folder", "emptydir", "", "text.txt",
                 "missing/out.bin"]


def option_strategy(action: argparse.Action):
    """[flag] or [flag, value]: values of the kind the flag takes, and some of the wrong kind."""
    flag = st.sampled_from(action.option_strings)
    if action.nargs == 0:  # store_true
        return flag.map(lambda f: [f])
    if set(action.option_strings) & OUTPUT_FLAGS:
        values = st.sampled_from(OUTPUT_VALUES)
    elif action.choices:
        values = st.sampled_from([*map(str, action.choices), "nope", ""])
    elif action.type in (int, float) or getattr(action.type, "__name__", "").endswith(("int", "number")):
        values = st.sampled_from(NUMBERS)
    else:
        values = st.sampled_from(PATHS + WORDS)
    return st.tuples(flag, values).map(list)


def argv_strategy(options: list[argparse.Action]):
    """Positionals (paths and texts) and options in any order, now and then a misspelt flag or a bare --."""
    positional = st.sampled_from(PATHS + TEXTS).map(lambda v: [v])
    stray = st.sampled_from([["--nope"], ["--"], ["-"], ["--out"]])
    parts = st.one_of(*(option_strategy(a) for a in options), positional, stray)
    return st.lists(parts, max_size=2).map(lambda ps: [word for part in ps for word in part])


INPUT = st.sampled_from(["text.txt", "text.txt", "docs.jsonl", "folder", "link.txt"] + PATHS)
TEXT = st.sampled_from(["Hello, world", "Not all heroes wear capes."] + TEXTS)
OUT = st.sampled_from(OUTPUT_VALUES)
# A command line that works, for each command: what is drawn beside it makes it go wrong, now and then.
WORKING = {
    "encode": st.tuples(TEXT), "show": st.tuples(TEXT), "explain": st.tuples(TEXT), "compare": st.tuples(TEXT),
    "decode": st.tuples(st.sampled_from(["15496 11 995", "15496,11", "[995]", "-1", "x", "99999999"])),
    "count": st.tuples(INPUT), "stats": st.tuples(INPUT), "parity": st.tuples(INPUT), "encode-file": st.tuples(INPUT),
    "encode-dataset": st.tuples(INPUT, st.just("--out"), OUT),
    "train": st.tuples(st.just("--input"), INPUT, st.just("--vocab_size"), st.sampled_from(["260", "300", "1"]),
                       st.just("--out"), OUT),
}
TOKENIZER_OPTIONS, TOKENIZER_COMMANDS = tree_of(build_parser("gpt2-tokenizer"))
COMMAND_ARGV = st.sampled_from(sorted(WORKING)).flatmap(
    lambda name: st.tuples(WORKING[name], argv_strategy(tree_of(TOKENIZER_COMMANDS[name])[0])).map(
        lambda drawn: [name, *drawn[0], *drawn[1]]))
GPT2_WORKING = st.tuples(TEXT, st.sampled_from([["--model", "model"], ["--model", "124M"], []]),
                         st.sampled_from([["--n_tokens_to_generate", "2"], []]))
GPT2_ARGV = st.tuples(GPT2_WORKING, argv_strategy(tree_of(command_line_parser("gpt2"))[0])).map(
    lambda drawn: [drawn[0][0], *drawn[0][1], *drawn[0][2], *drawn[1]])


def named_outputs(argv: list[str]) -> list[str]:
    """The paths argv names as outputs: they, and what lies under them, may change."""
    outputs = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word in OUTPUT_FLAGS]
    outputs += [str(Path(word).with_suffix(".bin")) for word in argv if word and not word.startswith("-")]
    if "bf16" in argv:  # --dtype bf16 caches its converted weights beside the checkpoint (README, 16-bit weights)
        outputs += [f"{argv[i + 1]}/{name}" for i, word in enumerate(argv[:-1]) if word == "--model"
                    for name in ("model.ckpt.bf16", "model.safetensors.bf16")]
    return [o for o in outputs if o] + ["models"]  # a download fills the models folder it was pointed at


def run(main, argv: list[str], world: Path, stdin: bytes, prog: str) -> tuple[int, str]:
    """main(argv) in world, as a process would run it: its exit status and its stderr."""
    err = io.BytesIO()
    stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", line_buffering=True)
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    saved = os.getcwd(), sys.stdin, sys.stdout, sys.stderr
    os.chdir(world)
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = stdout, stderr

    def hung(*_):
        raise Hung(f"{prog} {argv} ran for more than {SECONDS_ALLOWED} s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(SECONDS_ALLOWED)
    try:
        try:
            status = main(argv, prog=prog)
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        stderr.flush()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(saved[0])
        sys.stdin, sys.stdout, sys.stderr = saved[1:]
    return status, err.getvalue().decode("utf-8")


def check(main, prog: str, argv: list[str], stdin: bytes, world: Path) -> None:
    before = snapshot(world)
    try:
        status, stderr = run(main, argv, world, stdin, prog)
    finally:
        after = snapshot(world)
        if after != before:  # the world made anew for the next example: an output written may be an input next
            shutil.rmtree(world)
            world.mkdir()
            make_world(world)
    allowed = named_outputs(argv)
    # an output's folders may be made for it, as mkdir -p would
    parents = {str(parent) for out in allowed for parent in Path(out).parents}
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name)
                     and not (name not in before and name in parents)
                     and not any(name == out or name.startswith(out.rstrip("/") + "/") for out in allowed))
    assert status in EXIT_STATUSES, f"{prog} {argv}: exit status {status}\n{stderr}"
    assert "Traceback" not in stderr, f"{prog} {argv}:\n{stderr}"
    if status != 0:
        assert len(stderr.strip().splitlines()) <= 2, f"{prog} {argv}: more than two lines\n{stderr}"
    assert not changed, f"{prog} {argv} changed {changed}, which it was not asked to write"


STDIN = st.sampled_from([b"", b"Hello, world\n", b"15496 11 995", b"caf\xe9\n"])
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@SETTINGS
@given(argv=COMMAND_ARGV, stdin=STDIN)
def test_gpt2_tokenizer_under_any_argv(world, argv, stdin, monkeypatch):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")  # nothing listens there: a download fails at once
    check(tokenizer_main, "gpt2-tokenizer", argv, stdin, world)


@SETTINGS
@given(argv=GPT2_ARGV, stdin=STDIN)
def test_gpt2_under_any_argv(world, argv, stdin, monkeypatch):
    monkeypatch.setenv("OPENAIPUBLIC_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPT2_MODELS_DIR", str(world / "models"))
    check(gpt2_main, "gpt2", argv, stdin, world)


def test_the_fuzzed_argv_reach_every_command_and_kind_of_path(world):
    """The strategies can draw what the docstring promises (a fuzz test over nothing would pass)."""
    assert set(WORKING) == set(TOKENIZER_COMMANDS) - NOT_FUZZED
    gpt2_options = {flag for action in tree_of(command_line_parser("gpt2"))[0] for flag in action.option_strings}
    assert {"--save_hf", "--score", "--model", "--n_tokens_to_generate", "--stream"} <= gpt2_options
    assert {"fifo", "nulldev", "link.txt", "folder", ""} <= set(OUTPUT_VALUES) and NOT_UTF8 in TEXTS + WORDS
    kinds = {name: stat.S_IFMT((world / name).lstat().st_mode) for name in ("fifo", "link.txt", "folder")}
    assert kinds == {"fifo": stat.S_IFIFO, "link.txt": stat.S_IFLNK, "folder": stat.S_IFDIR}
    assert os.geteuid() != 0 or stat.S_ISCHR((world / "nulldev").lstat().st_mode)  # CI runs as root: a device


def test_a_command_that_breaks_a_rule_fails_the_check(world, monkeypatch):
    """check() itself can fail: a traceback, a file changed that was not named, and too many lines."""
    def raises(argv, prog):
        raise RuntimeError("deep inside")

    def writes(argv, prog):
        Path("text.txt").write_text("gone", encoding="utf-8")
        return 0

    def chatty(argv, prog):
        print("one\ntwo\nthree", file=sys.stderr)
        return 2

    with pytest.raises(RuntimeError):
        check(raises, "x", [], b"", world)
    backup = (world / "text.txt").read_bytes()
    try:
        with pytest.raises(AssertionError, match="changed"):
            check(writes, "x", [], b"", world)
    finally:
        (world / "text.txt").write_bytes(backup)
    with pytest.raises(AssertionError, match="two lines"):
        check(chatty, "x", [], b"", world)
