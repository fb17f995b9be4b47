"""The shell lines of README.md and the walkthroughs (docs/0N-*.md) run, and print what they say they print.

tests/test_docs.py runs the pages' Python; this runs their command lines, each block in a fresh temporary folder
holding the inputs its lines name, with this checkout's code: ``gpt2-tokenizer`` is ``python -m tokenizer``,
``gpt2`` is ``python -m gpt2_numpy`` (and ``python`` is the interpreter running the tests), through bash, so that
pipes and redirections mean what they mean in a terminal. The first ``gpt2`` downloads a tiny random 124M from a
local server (``$OPENAIPUBLIC_URL``) into an empty ``$GPT2_MODELS_DIR``.

Which blocks are commands to run:

- a fenced ```bash block, and an indented (four-space) block: each line is a command (a trailing backslash
  joins the next line; an unquoted `` # `` starts a comment, which is prose for the reader);
- an untagged fenced block whose first line starts with ``$ ``: a session, whose command runs and whose output
  is the rest of the block, compared exactly but for what varies from run to run (a speed: ``1.5 MB/s``);
- any other untagged fenced block is an illustration (a usage synopsis, a benchmark's output) and is not run;
- in a walkthrough, a command in a sentence (``python -m tokenizer explain "lowest newest"``: the command with an
  option or a quoted text) runs too, as a block of its own.

Lines that install (``pip``, ``python -m venv``), run the test suite or a benchmark (``python -m pytest``,
``python bench/...``) are illustrations too: they take minutes, build things or need the network.

A command line may be written as a synopsis: ``[...]`` is an option it may take (run with it, taking the first of
``a|b`` alternatives), except ``[--resume]``, which only continues a stopped run; ``FILE`` and ``FILE...`` stand
for a text file, ``NAME`` for an encoding's name, ``N`` and ``K`` for a small number (``--vocab_size N`` for a
vocabulary a small text can fill), and ``DIR`` for a folder named so (a saved tokenizer). A command that serves
(``serve``, ``--serve``) runs on a free port until its page answers, then gets Ctrl-C.

Where the doc says what a command prints (:data:`OUTPUT_IN_COMMENT`: its comment begins with the output) or
what it makes (:data:`SAME_FILES`), that is checked. The whole runs in about 40 s on two cores (the fuzz
parity line alone about 10 s, ``stats`` about 4 s): exhaustive tier.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SHARED, corpus_text

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("[0-9][0-9]-*.md"))]
FENCED = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INDENTED_LINE = re.compile(r"^    (\S.*)$")
# a command in a walkthrough's sentence: the command, then an option or a quoted text (a bare `python -m tokenizer
# explain` in a table names the command; README's sentences name commands with placeholders: TEXT, IDS)
INLINE_COMMAND = re.compile(r"`((?:python -m tokenizer|gpt2-tokenizer|gpt2) [^`]*?(?:--|\")[^`]*)`")
ILLUSTRATION = re.compile(r"^(pip |python -m (venv|pytest)\b|\w+=\S* python -m pytest\b|python bench/)")
SEPARATOR = "\n<|endoftext|>\n"

# commands whose comment begins with what they print (up to a ';' or two spaces)
OUTPUT_IN_COMMENT = ('gpt2-tokenizer encode "Hello, world"', "gpt2-tokenizer decode 15496 11 995")
# commands after which two files must be byte for byte the same
SAME_FILES = {"gpt2-tokenizer encode - < a.txt | gpt2-tokenizer decode - > b.txt": ("a.txt", "b.txt")}
# sessions whose output shows a difference: parity's status for "different" is 1
EXPECTED_STATUS = {"gpt2-tokenizer parity en_docs_1mb.txt --ids damaged.bin --allowed_special all": 1}
# README's quote of the line a first download ends with, after the folder: "saved GPT-2 124M in FOLDER (N bytes)..."
README_SAVED_LINE_END = re.search(r"`saved GPT-2 124M in ~/\S+ (\(N bytes\)[^`]*)`",
                                  (REPO / "README.md").read_text(encoding="utf-8")).group(1)
PLACEHOLDERS = [(r"--vocab_size N\b", "--vocab_size 400"), (r"\bN\b", "2"), (r"\bK\b", "2"),
                (r"\bFILE(\.\.\.)?(?![\w.])", "plain.txt"), (r"\bNAME\b", "gpt2")]


def shell_blocks(page: Path) -> list[tuple[int, str, list[str]]]:
    """(line number, kind, lines) of each block of ``page`` that holds commands: "bash", "indented", "session"."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCED.finditer(text):
        line = text.count("\n", 0, match.start(2)) + 1
        body = match.group(2).splitlines()
        if match.group(1) == "bash":
            blocks.append((line, "bash", body))
        elif match.group(1) == "" and body and body[0].startswith("$ "):
            blocks.append((line, "session", body))
    # indented blocks, outside the fenced ones: blank out the fences (keeping line numbers) first
    outside = FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text).split("\n")
    number = 0
    while number < len(outside):
        if INDENTED_LINE.match(outside[number]) and (number == 0 or not outside[number - 1].strip()):
            start, body = number + 1, []
            while number < len(outside) and INDENTED_LINE.match(outside[number]):
                body.append(outside[number][4:])
                number += 1
            blocks.append((start, "indented", body))
        number += 1
    if page.name != "README.md":  # a walkthrough's commands in its sentences, each a block of one line
        for number, line in enumerate(outside, 1):
            blocks.extend((number, "inline", [command]) for command in INLINE_COMMAND.findall(line))
    return sorted(blocks)


def without_comment(line: str) -> tuple[str, str]:
    """(command, comment) of a shell line: the comment starts at an unquoted '#' after a space."""
    quote = None
    for at, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or line[at - 1].isspace()):
            return line[:at].rstrip(), line[at + 1 :].strip()
    return line.rstrip(), ""


def block_commands(lines: list[str]) -> list[tuple[str, str]]:
    """(command, comment) of each command of a bash or indented block, backslash continuations joined."""
    commands, pending = [], ""
    for line in lines:
        command, comment = without_comment(line)
        if command.endswith("\\"):
            pending += command[:-1]
            continue
        commands.append((pending + command, comment))
        pending = ""
    return [(command.strip(), comment) for command, comment in commands if command.strip()]


def concrete(command: str) -> str:
    """A synopsis line as a command to run (the module docstring's rule)."""
    command = re.sub(r"\s*\[--resume\]", "", command)
    command = re.sub(r"(\"[^\"]*\"|'[^']*')|\[((?:[^\]\"']|\"[^\"]*\"|'[^']*')*)\]",  # quoted: text, kept
                     lambda found: found.group(1) or found.group(2), command)
    parts = re.split(r"(\"[^\"]*\"|'[^']*')", command)  # odd parts are quoted: text, never alternatives
    command = "".join(part if quoted else re.sub(r"(?<![\w<|.-])([\w.-]+)(?:\|[\w.-]+)+(?![\w>|])", r"\1", part)
                      for quoted, part in zip(itertools.cycle((False, True)), parts))
    for placeholder, value in PLACEHOLDERS:
        command = re.sub(placeholder, value, command)
    return command


# ---- the inputs the commands name, made when a command names one the folder lacks ----------------------------

def plain_text(size: int) -> str:
    """Fortunes without their separators: text that spells no special token."""
    return corpus_text("en_docs.txt", 3 * size).replace(SEPARATOR, "\n\n")[:size]


def documents_text(size: int) -> str:
    """TinyStories' layout: documents separated by <|endoftext|> on a line of its own."""
    text = corpus_text("en_docs.txt", size)
    return text[: text.rindex(SEPARATOR) + len(SEPARATOR)]


def documents() -> list[str]:
    return [doc for doc in plain_text(30_000).split("\n\n") if doc.strip()][:200]


def write_jsonl(path: Path) -> None:
    path.write_text("".join(json.dumps({"text": doc}) + "\n" for doc in documents()), encoding="utf-8")


def saved_tokenizer(path: Path, format: str = "gpt2") -> None:
    import tokenizer

    source = path.parent / f"{path.name}-training.txt"
    source.write_text(plain_text(10_000), encoding="utf-8")
    vocab, merges = tokenizer.train_bpe(source, 400, ["<|endoftext|>"], progress=False)
    source.unlink()
    tokenizer.Encoding.from_vocab_merges(vocab, merges, ["<|endoftext|>"], name=path.name).save(path, format=format)


def ids_file(path: Path, text_file: Path, encoding_name: str) -> None:
    """``text_file`` as encode-file writes it, with ``encoding_name`` (a registered name or a folder)."""
    import tokenizer

    folder = path.parent / encoding_name
    encoding = tokenizer.load(folder) if folder.exists() else tokenizer.get_encoding(encoding_name)
    ids = encoding.encode(text_file.read_text(encoding="utf-8"), allowed_special="all")
    np.asarray(ids, dtype=np.uint16 if encoding.n_vocab <= 65_536 else np.uint32).tofile(path)


def damaged_ids(path: Path) -> None:
    """en_docs_1mb.txt's ids with the one change README's session describes: id 100,000 made ' the' (262)."""
    ids_file(path, path.parent / "en_docs_1mb.txt", "gpt2")
    ids = np.fromfile(path, dtype=np.uint16)
    ids[100_000] = 262
    ids.tofile(path)


def documents_ids(path: Path) -> None:
    """docs.jsonl as encode-dataset writes it: each document's ordinary ids, then <|endoftext|>."""
    import tokenizer

    gpt2 = tokenizer.get_encoding("gpt2")
    ids = [i for doc in documents() for i in gpt2.encode_ordinary(doc) + [gpt2.eot_token]]
    np.asarray(ids, dtype=np.uint16).tofile(path)


def llama3_folder(path: Path) -> None:
    path.mkdir()
    shutil.copy(SHARED / "encodings" / "hf" / "llama3" / "tokenizer.json", path)


def text_folder(path: Path) -> None:
    path.mkdir()
    text = plain_text(40_000)
    (path / "one.txt").write_text(text[:20_000], encoding="utf-8")
    (path / "two.txt").write_text(text[20_000:], encoding="utf-8")


def encoding_of(command: str) -> str:
    found = re.search(r"--encoding (\S+)", command)
    return found.group(1) if found else "gpt2"


INPUTS = {  # name -> how to make it in a folder, given the command that reads it
    "plain.txt": lambda path, command: path.write_text(plain_text(30_000), encoding="utf-8"),
    "a.txt": lambda path, command: path.write_text(plain_text(30_000), encoding="utf-8"),
    "notes.txt": lambda path, command: path.write_text(plain_text(20_000), encoding="utf-8"),
    "corpus.txt": lambda path, command: path.write_text(plain_text(10_000), encoding="utf-8"),
    "data.txt": lambda path, command: path.write_text(documents_text(30_000), encoding="utf-8"),
    "train.txt": lambda path, command: path.write_text(documents_text(30_000), encoding="utf-8"),
    "held_out.txt": lambda path, command: path.write_text(documents_text(30_000), encoding="utf-8"),
    "en_docs_1mb.txt": lambda path, command: path.write_bytes((SHARED / "corpus" / "en_docs.txt").read_bytes()[
        :1_000_000]),
    "data": lambda path, command: text_folder(path),
    "docs.jsonl": lambda path, command: write_jsonl(path),
    "more.jsonl.gz": lambda path, command: (write_jsonl(path.with_suffix("")),
                                            path.write_bytes(gzip.compress(path.with_suffix("").read_bytes()))),
    "train.bin": lambda path, command: ids_file(path, path.parent / "train.txt", encoding_of(command)),
    "docs.bin": lambda path, command: documents_ids(path),
    "damaged.bin": lambda path, command: damaged_ids(path),
    "llama3": lambda path, command: llama3_folder(path),
    "DIR": lambda path, command: saved_tokenizer(path),
    "fortunes-1k": lambda path, command: saved_tokenizer(path),  # docs/05's tokenizer, saved by its code
    "my_tokenizer": lambda path, command: saved_tokenizer(path),
    "mytok": lambda path, command: saved_tokenizer(path),
    "other_tok": lambda path, command: saved_tokenizer(path, format="hf"),
}
# what each name was made for: a .bin of ids is made again when a command reads it with another encoding
REMADE_PER_ENCODING = ("train.bin",)


def make_inputs(folder: Path, command: str, made: dict) -> None:
    """Make each input ``command`` names that ``folder`` lacks (a name after --out is the command's output)."""
    for name, make in INPUTS.items():
        named = re.search(rf"(?<![\w.-])(--out )?{re.escape(name)}(?![\w.-])", command)
        if not named or named.group(1):
            continue
        if name in REMADE_PER_ENCODING and made.get(name) not in (None, encoding_of(command)):
            (folder / name).unlink()
        if not (folder / name).exists():
            if name == "train.bin":
                make_inputs(folder, "train.txt", made)
            make(folder / name, command)
            made[name] = encoding_of(command)


# ---- running -------------------------------------------------------------------------------------------------

BASH_PRELUDE = ('python() { "$PYTHON" "$@"; }\n'
                'gpt2-tokenizer() { "$PYTHON" -m tokenizer "$@"; }\n'
                'gpt2() { "$PYTHON" -m gpt2_numpy "$@"; }\n'
                "set -o pipefail\n")


def run_command(command: str, folder: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", BASH_PRELUDE + command], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve_until_the_page_answers(command: str, folder: Path, env: dict) -> None:
    """Run a serving command on a free port, fetch its page, then Ctrl-C it: it must stop at once."""
    port = free_port()
    argv = shlex.split(re.sub(r"\s*--port \d+", "", command)) + ["--port", str(port)]
    program = {"gpt2-tokenizer": [sys.executable, "-m", "tokenizer"], "gpt2": [sys.executable, "-m", "gpt2_numpy"],
               "python": [sys.executable]}[argv[0]]
    server = subprocess.Popen(program + argv[1:], cwd=folder, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline, page = time.monotonic() + 60, None
        while page is None and time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    page = answer.read().decode()
            except OSError:
                time.sleep(0.2)
        assert page and "<html" in page, f"{command}: no page on port {port}: {server.poll()}"
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert server.returncode in (0, 130), f"{command}: exit {server.returncode}\n{out}\n{err}"


def varying(output: str) -> str:
    """``output`` with what varies from run to run (a speed) written as N."""
    return re.sub(r"\d+(\.\d+)? MB/s", "N MB/s", output)


@pytest.fixture(scope="module")
def command_env(tmp_path_factory):
    """The commands' environment: this checkout's code, and an empty models folder whose first ``gpt2`` downloads
    a tiny random 124M from a local server standing in for OpenAI's ($OPENAIPUBLIC_URL), as README's first run
    downloads the real one."""
    from conftest_download import FileServer
    from tiny_checkpoint import write_tiny_checkpoint

    release = tmp_path_factory.mktemp("release") / "124M"
    write_tiny_checkpoint(release, n_ctx=64, n_embd=32, n_head=2, seed=7)
    server = FileServer()
    server.files = {f"/gpt-2/models/124M/{path.name}": path.read_bytes() for path in release.iterdir()
                    if not path.name.endswith(".crc32c-ok.json")}  # the stamp a first load leaves, not released
    server.files.setdefault("/gpt-2/models/124M/model.ckpt.meta", b"a graph nothing here reads\n")
    yield {**os.environ, "PYTHONPATH": str(REPO), "PYTHON": sys.executable,
           "GPT2_MODELS_DIR": str(tmp_path_factory.mktemp("models")), "OPENAIPUBLIC_URL": server.url,
           "GPT2_COMPILED_MATVEC": "0"}
    server.close()


def runs_something(kind: str, lines: list[str]) -> bool:
    return kind == "session" or any(not ILLUSTRATION.match(command) for command, _ in block_commands(lines))


# the blocks with a command to run (a block of installs alone is left out: it would pass having run nothing)
BLOCKS = [(page, line, kind, lines) for page in PAGES for line, kind, lines in shell_blocks(page)
          if runs_something(kind, lines)]


def test_the_pages_shell_blocks_are_found():
    """The rule finds what the pages hold: README's command blocks and its parity session, walkthrough 01's and
    05's command lines (a rule that found nothing would pass every block)."""
    found = {(page.name, kind) for page, _, kind, _ in BLOCKS}
    assert {("README.md", "bash"), ("README.md", "session"), ("01-characters-to-bpe.md", "indented"),
            ("05-training-cs336.md", "indented"), ("01-characters-to-bpe.md", "inline"),
            ("04-three-spellings-of-bpe.md", "inline")} <= found
    run = [concrete(command) for _, _, kind, lines in BLOCKS if kind != "session"
           for command, _ in block_commands(lines) if not ILLUSTRATION.match(command)]
    assert len(run) >= 30
    for command in run:  # every placeholder filled: a capitalised word left would be a file of that name
        assert not re.search(r"\b(?!DIR\b)[A-Z]{1,5}\b(?!=)", command), command
        assert not re.search(r"[\[\]]", re.sub(r"\"[^\"]*\"|'[^']*'", "", command)), command  # no [option] left
    for named in (*OUTPUT_IN_COMMENT, *SAME_FILES, *EXPECTED_STATUS):  # each check meets its line
        assert any(command.startswith(named) for command in run) or any(
            named in "\n".join(lines) for _, _, kind, lines in BLOCKS if kind == "session"), named


@pytest.mark.exhaustive  # some 40 s: every command line of the pages, each in a process of its own
@pytest.mark.parametrize("page, line, kind, lines", BLOCKS, ids=[f"{p.name}:{n}" for p, n, _, _ in BLOCKS])
def test_the_pages_command_lines_run(page, line, kind, lines, command_env, tmp_path):
    made: dict = {}
    if kind == "session":
        command, expected = lines[0][2:], "\n".join(lines[1:])
        make_inputs(tmp_path, command, made)
        result = run_command(command, tmp_path, command_env)
        where = f"{page.name}:{line}: {command}"
        assert result.returncode == EXPECTED_STATUS.get(command, 0), f"{where}\n{result.stdout}\n{result.stderr}"
        assert varying(result.stdout.rstrip("\n")) == varying(expected), f"{where}: prints\n{result.stdout}"
        return
    for command, comment in block_commands(lines):
        if ILLUSTRATION.match(command):
            continue
        runnable = concrete(command)
        where = f"{page.name}:{line}: {runnable}"
        make_inputs(tmp_path, runnable, made)
        if re.search(r"(^|\s)(serve|--serve)(\s|$)", runnable):
            serve_until_the_page_answers(runnable, tmp_path, command_env)
            continue
        first_download = not (Path(command_env["GPT2_MODELS_DIR"]) / "124M").exists()
        result = run_command(runnable, tmp_path, command_env)
        assert result.returncode == 0, f"{where}: exit {result.returncode}\n{result.stdout[-2000:]}\n" \
                                       f"{result.stderr[-2000:]}"
        if first_download and re.match(r"gpt2 (?!-)", runnable):  # README: "The first run downloads ..."
            saved = f"saved GPT-2 124M in {command_env['GPT2_MODELS_DIR']}{os.sep}124M ("
            (line_said,) = [said for said in result.stderr.splitlines() if said.startswith(saved)] or [None]
            assert line_said, f"{where}: downloaded nothing\n{result.stderr}"
            assert re.sub(r"\([\d,]+ bytes\)", "(N bytes)", line_said[len(saved) - 1 :]) == README_SAVED_LINE_END
        if command.startswith(OUTPUT_IN_COMMENT):
            claimed = re.split(r";|  ", comment)[0].strip()
            assert result.stdout.strip() == claimed, f"{where}: prints {result.stdout!r}, its comment says {claimed!r}"
        for named, (first, second) in SAME_FILES.items():
            if command.startswith(named):
                assert (tmp_path / first).read_bytes() == (tmp_path / second).read_bytes(), where


def test_the_training_walkthroughs_command_lines_read_what_its_code_made_above_them():
    """docs/05's command lines named `--encoding DIR`, a folder only a later block saved (as fortunes-1k), and its
    encode-file wrote --out held_out.bin, which the block above had written: a learner running the page in order
    met a missing folder, then "already exists". Each file a command line reads is one the page's code wrote into
    `folder` above it (or a command before it wrote), and each file it writes is a new one."""
    page = REPO / "docs" / "05-training-cs336.md"
    text = page.read_text(encoding="utf-8")
    code_blocks = [(text.count("\n", 0, found.start(1)) + 1, found.group(1))
                   for found in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]
    commands = [(line, command) for shown, line, kind, lines in BLOCKS if shown == page and kind == "indented"
                for command, _ in block_commands(lines)]
    assert len(commands) >= 3
    written_by_commands: set[str] = set()
    for line, command in commands:
        code_above = "".join(code for start, code in code_blocks if start < line)
        made_above = set(re.findall(r'folder / "([^"]+)"', code_above)) | written_by_commands
        out = re.search(r"--out (\S+)", command)
        read = [name for name in re.split(r"[\s,]+", command) if name in INPUTS or name.endswith((".txt", ".bin"))]
        for name in read:
            if out and name == out.group(1):
                assert name not in made_above, f"{page.name}:{line}: --out {name} replaces a file made above it"
            else:
                assert name in made_above, f"{page.name}:{line}: {command} reads {name}, which nothing above made"
        written_by_commands |= {out.group(1)} if out else set()


@pytest.mark.parametrize("synopsis, command", [
    ('gpt2-tokenizer encode "Hello, world" [--encoding NAME|PATH]',
     'gpt2-tokenizer encode "Hello, world" --encoding gpt2'),
    ('train --input FILE --vocab_size N --out DIR [--special_tokens "<|endoftext|>,<|pad|>"] [--format gpt2|hf]',
     'train --input plain.txt --vocab_size 400 --out DIR --special_tokens "<|endoftext|>,<|pad|>" --format gpt2'),
    ("count FILE... [--workers N] [--resume]", "count plain.txt --workers 2"),
    ("echo -n 'a|b' | gpt2-tokenizer encode -", "echo -n 'a|b' | gpt2-tokenizer encode -"),  # a pipe stays one
    ('gpt2-tokenizer decode "[15496, 11]" [--out b.txt]', 'gpt2-tokenizer decode "[15496, 11]" --out b.txt'),
])
def test_a_synopsis_becomes_the_command_the_docstring_says(synopsis, command):
    assert concrete(synopsis) == command


def test_a_comment_starts_at_an_unquoted_hash_and_a_backslash_joins_lines():
    lines = ['encode "a # b" --x 1   # prose', "train --input f \\", "    --out DIR  # more", "", "# alone"]
    assert block_commands(lines) == [('encode "a # b" --x 1', "prose"), ("train --input f     --out DIR", "more")]


def test_only_a_speed_may_differ_from_a_sessions_output():
    assert varying("ours 1.5 MB/s") == varying("ours 12 MB/s")
    assert varying("263,052 tokens") != varying("263,053 tokens")
