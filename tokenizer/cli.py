"""The command line: ``python -m tokenizer COMMAND ...``, or ``gpt2-tokenizer COMMAND ...`` once installed.

    python -m tokenizer encode "hello world"                  # 31373 995
    python -m tokenizer decode 31373 995                      # hello world   (also "31373,995", "[31373, 995]")
    python -m tokenizer encode - < a.txt | python -m tokenizer decode - > b.txt   # b.txt is a.txt, byte for byte
    python -m tokenizer decode --ids train.bin --start 1000 --count 200   # a .bin's ids, as text
    echo -n "hello world" | python -m tokenizer encode -      # - reads the text (decode -: the ids) from stdin
    python -m tokenizer count FILE...                         # tokens, bytes/token, MB/s
    python -m tokenizer encode-file data.txt --out data.bin [--workers N]
    python -m tokenizer encode-dataset 'owt/*.jsonl.gz' --out DIR [--engine local|ray] [--workers N]
    python -m tokenizer stats FILE... [--encodings gpt2,cl100k_base,o200k_base | --encoding NAME]
    python -m tokenizer show | explain | compare "Not all heroes wear capes."
    python -m tokenizer train --input 'data/*.txt' --vocab_size N --out DIR [--special_tokens "<|endoftext|>"]
    python -m tokenizer parity INPUT... [--encoding gpt2,PATH] [--against tiktoken|hf|PATH] [--ids FILE.bin]
    python -m tokenizer serve [--port 8000] [--encoding PATH]   # the playground (gpt2 --serve: with GPT-2)

Every command follows the same rules:

* **Text arguments reach the code exactly as typed**: ``encode "Hello, world"``, ``encode 1e3``,
  ``encode "'quoted'"``. Text that starts with a dash goes after ``--``: ``encode -- "-x"``. ``decode`` writes
  the text exactly as its ids spell it (only on a terminal is a newline added after it), so a text encoded and
  decoded again is the same bytes.
* **Special tokens: the API's rule.** Text that spells a special token (``<|endoftext|>``) is an error unless
  ``--allowed_special all|TOKEN,...`` makes it the special token or ``--disallowed_special none|TOKEN,...``
  lets it be plain text: :meth:`Encoding.encode`'s ``allowed_special`` and ``disallowed_special`` (each flag
  repeats; a special token that holds a comma is read whole). ``show``,
  ``explain`` and ``compare``, teaching tools, show it as its id unless told otherwise, as
  :mod:`tokenizer.teach`'s functions do (:data:`tokenizer.teach.TEACHING_SPECIAL_RULE`).
* **Inputs** are files, folders, quoted globs or ``-`` (standard input), found and read by
  :mod:`tokenizer.jobs.inputs` for every file command: ``.jsonl``, ``.jsonl.gz`` and ``.parquet`` hold one
  document per record (``--text_field``), any other file is text; a pipe (``<(zcat a.gz)``) is read once, as
  standard input is; bad input is named by file and line.
* **Files are UTF-8**: invalid bytes are an error naming the byte offset, unless ``--errors replace`` (U+FFFD).
  Files are read in chunks, with a progress bar in bytes (kB, MB), so memory does not grow with the file.
* **Outputs** follow one rule (:mod:`tokenizer.outputs`), checked before any work: an empty path, a device or
  FIFO, a folder where a file goes (or the reverse) or a place that cannot be written is a mistake; an existing
  output is replaced only with ``--force``; a symlink is written through; ``encode-file --out -`` writes the ids
  to standard output. What is written appears whole or not at all.
* ``--encoding`` is a registered name (``gpt2``, ``cl100k_base``, ...) or a path: a Hugging Face
  ``tokenizer.json``, its folder, or the folder of a saved tokenizer (``train --out DIR``)
  (:mod:`tokenizer.encoding_argument`), in every command (``stats`` and ``compare`` also take several, as
  ``--encodings``); list options take comma lists (a path that exists is one item, commas
  and all); flags are spelt ``--vocab_size`` or
  ``--vocab-size``.
* A mistake (unknown flag, missing argument, missing file, unknown id) is one line on stderr and exit status 2,
  before any work; Ctrl-C is one line and exit status 130, and leaves no partial output file (``train`` names the
  folder its state is kept in, for ``--resume``). ``parity`` exits with 1 when the ids differ, so other projects can
  run it in their CI; a download that fails exits with 1 too, as does stdout that cannot take the output (a full
  disk) (:mod:`tokenizer.command_line`: the rule of both commands). A TEXT argument, like stdin, must be UTF-8.
  A reader that goes away (``| head``) ends a command quietly, with the status of a process killed by SIGPIPE
  (141).

Why argparse and not fire: fire parses every argument as a Python literal when it can, so ``"Hello, world"``
arrives as the tuple ``('Hello', 'world')``, ``1e3`` as the float ``1000.0``, ``'quoted'`` without its quotes
and ``31373,995`` as a tuple, and no setting turns that off for every input. argparse hands over the strings
as typed, and each command's flags are declared, so ``--help`` works and a misspelt flag stops before any work.

What this module does not do: tokenize. Each command parses its arguments, calls the library
(:mod:`tokenizer.jobs.dataset`, :mod:`tokenizer.jobs.sharded`, :mod:`tokenizer.teach`, :mod:`tokenizer.training.train`,
:mod:`tokenizer.jobs.parity`, :mod:`tokenizer.serve`, :class:`Encoding`) and prints.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import resource
import shlex
import shutil
import sys
import time
import unicodedata
from pathlib import Path

import numpy as np

from . import encoding_argument, outputs, serve, teach
from .command_line import (EXIT_FAILED, EXIT_MISTAKE, STDOUT_CLOSED, Interrupted, OneLineParser, OneValue,
                           UsageError, add_flag, add_version_flag, ascii_digits, bar_if_slow, comma_readings,
                           cannot_listen, decimal_digits, error_message, host_address, run_guarded, said_if_slow, say,
                           show_progress, shown_typed, summary_of, typed_number, unbroken, unknown_arguments,
                           watched_stdout, whole_number)
from .download import ChecksumError, DownloadError
from .text_input import argument_text, read_stdin_text
from .jobs import dataset, id_files, inputs, manifest, parity, sharded
from .jobs.engines import ENGINES, RayAddressError
from .encoding import Encoding
from .encoding_argument import WHAT_TO_PASS
from .special_advice import SpecialSpelling, refusal_of, rule_for
from .loading import load_encoding
from .saving import SAVE_FORMATS, check_tokenizer_folder, replaced_tokenizer_files, save_encoding
from .registry import is_registered, list_encoding_names, shown_names
from .training.checkpoint import STATE_FILES, DamagedState, SettingsChanged, UnreadableState
from .training.train import is_single_byte, train_bpe
from .vocab_files import is_gpt2_special_token


# ---- argument types ---------------------------------------------------------------------------------------


def special_tokens_list(value: str) -> list[str]:
    """train's ``--special_tokens``: a comma list, in which a token written like ``<|...|>`` is one token, commas
    and all (``<|a,b|>,<|pad|>`` is two); a token of another form that holds a comma is given by --special_token,
    which takes its value whole (no encoding exists yet to tell the comma rule which tokens there are)."""
    return comma_readings(value, lambda name: "," not in name or is_marked_token(name))[0]


def is_marked_token(name: str) -> bool:
    """Whether ``name`` is one token written like ``<|...|>``: ``<|a|>,<|b|>`` is two of them."""
    inside = name[2:-2]
    return name.startswith("<|") and name.endswith("|>") and "|>" not in inside and "<|" not in inside


def one_special_token(value: str) -> str:
    """train's ``--special_token``: one token, taken whole; several tokens like ``<|...|>`` joined by commas are
    the list option's (--special_tokens), not one token."""
    several = special_tokens_list(value)
    if len(several) > 1 and all(map(is_marked_token, several)):
        raise argparse.ArgumentTypeError(f"expected one special token, got {len(several)} ({value!r}): pass "
                                         "--special_tokens for a comma list, or repeat --special_token")
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a special token, got ''")
    return value


def names_list(value: str) -> list[str]:
    """A comma list that must name something (``--encodings ''`` is a mistake, not an empty table), in which a
    file or folder that exists is one name, commas and all: ``--encodings my,tok,gpt2`` beside a folder called
    ``my,tok`` is that folder and gpt2, not the three names ``my``, ``tok`` and ``gpt2`` (``gpt2 --serve
    --encoding my,tok`` takes the path whole too)."""
    # a part alone is a name; parts joined again at their commas are one only as a path that exists
    names = comma_readings(value, lambda name: "," not in name or os.path.exists(name),
                           may_go_on=PathStarts().may_go_on)[0]
    if not names:
        raise argparse.ArgumentTypeError(f"expected a comma list of names, got {value!r}")
    return names


class PathStarts:
    """Whether a path that exists may start with a text and a comma: its folder holds an entry whose name starts so.
    Each folder is listed once; names are compared casefolded and decomposed (NFD), as loosely as any file system
    compares them (macOS's ignores case and composition), so that a path that exists is never missed."""

    def __init__(self):
        self.listed = {}  # folder -> its entries' names, loosened (None: it cannot be listed, so any may exist)

    def may_go_on(self, text: str) -> bool:
        folder, start = os.path.split(text)
        folder = folder or os.curdir
        if folder not in self.listed:
            self.listed[folder] = self.entries(folder)
        entries, wanted = self.listed[folder], loosened(start + ",")
        return entries is None or any(entry.startswith(wanted) for entry in entries)

    @staticmethod
    def entries(folder: str) -> list[str] | None:
        try:
            return [loosened(name) for name in os.listdir(folder) if "," in name]
        except (FileNotFoundError, NotADirectoryError, ValueError):  # nothing exists under it (ValueError: a NUL,
            return []  # or a character no file name can hold, which os.path.exists reads as no such path too)
        except OSError:  # not readable (or a loop): the paths themselves are checked, as stat can reach them
            return None


def loosened(name: str) -> str:
    """``name`` as a file system that ignores case and composition compares it (a comma ends no composition, so
    the loosened text before a comma is the loosened start of the name)."""
    return unicodedata.normalize("NFD", name.casefold())


def positive_int(value: str) -> int:
    number = typed_number(value, "a positive whole number")
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {value!r}")
    return number


def index_number(value: str) -> int:
    """A position in an array: a whole number from 0, in the digits 0-9."""
    number = typed_number(value, "a whole number from 0")
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0, got {value!r}")
    return number


def seconds(value: str) -> float:
    number = float(value) if decimal_digits(value) else -1.0  # (as typed: not "1_0", "nan" or "١")
    if not 0 <= number < float("inf"):  # (1e999 is inf)
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, got {value!r}")
    return number


def port_number(value: str) -> int:
    if not ascii_digits(value) or len(value) > 5 or int(value) > 65535:  # (int() refuses over 4,300 digits)
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535 (0: any free port), got "
                                         f"{shown_typed(value)}")
    return int(value)


def color_choice(value: str) -> bool | None:
    choices = {"auto": None, "always": True, "never": False, "true": True, "false": False}
    if value.lower() not in choices:
        raise argparse.ArgumentTypeError(f"expected auto, always or never, got {value!r}")
    return choices[value.lower()]


def open_encoding(name_or_path: str) -> Encoding:
    """``--encoding``: a registered name, or a path (a ``tokenizer.json``, its folder, a saved tokenizer's folder):
    :func:`tokenizer.encoding_argument.open_encoding`'s rule."""
    if not name_or_path:
        raise UsageError(f"--encoding '': name an encoding: {WHAT_TO_PASS}")
    with said_if_slow(f"loading {name_or_path}"):  # a large tokenizer.json takes seconds the first time
        return encoding_argument.open_encoding(name_or_path)


def special_rule(encs: Encoding | list[Encoding], allowed: str | list[str],
                 disallowed: str | list[str]) -> tuple[object, object]:
    """``--allowed_special`` and ``--disallowed_special`` -> the ``allowed_special``, ``disallowed_special``
    arguments of :meth:`Encoding.encode`, each checked against the special tokens of ``encs``: one encoding, or
    the several a command sets side by side, where a token that some of them have means nothing to the others
    (as ``encode`` ignores an allowed name that is none of its special tokens), so that the advice of a refused
    token, to name it in a flag, works whichever of them refused it. Each is a default (a str) or what each
    occurrence of the flag was given (a list: a repeated flag adds to the list)."""
    encs = [encs] if isinstance(encs, Encoding) else encs
    return _special_set(encs, allowed, "--allowed_special"), _special_set(encs, disallowed, "--disallowed_special")


def rule_of(enc: Encoding, allowed, disallowed) -> tuple[object, object]:
    """The rule of :func:`special_rule` (checked against several encodings) that ``enc`` is given: a token that
    only another encoding has means nothing to this one, which would refuse its text as none of its own, allowed
    or disallowed (:func:`tokenizer.special_advice.rule_for`)."""
    return rule_for(enc.special_tokens_set, allowed, disallowed)


def _special_set(encs: list[Encoding], given: str | list[str], flag: str):
    values = [given] if isinstance(given, str) else given
    words = [value for value in values if value in ("all", "none")]
    other = next((value for value in values if words and value != words[0]), None)
    if other is not None:  # (all twice is all)
        raise UsageError(f"{flag} {words[0]} and {flag} {other!r}: pass all or none alone, or the special tokens "
                         "(repeat the flag, or a comma list)")
    if words:
        return "all" if words[0] == "all" else set()
    known = set().union(*(enc.special_tokens_set for enc in encs))
    tokens = set()
    for value in values:
        # a token that holds a comma is read whole, as it is one of the special tokens: the comma rule of the lists
        readings = comma_readings(value, known.__contains__)
        if not readings:
            names = list(dict.fromkeys(enc.name for enc in encs))
            whose = "its" if len(names) == 1 else "their"
            raise UsageError(
                f"{flag} {value!r}: {unknown_part(value, known)!r} is not a special token of {' or '.join(names)} "
                f"({whose} special tokens: {', '.join(sorted(known)) or 'none'}); pass all, none or a comma list of "
                f"{whose} special tokens"
            )
        tokens.update(readings[0])  # (the first reading takes a token that holds a comma whole)
    return tokens


def unknown_part(value: str, known: set[str]) -> str:
    """The first name between the commas of ``value`` that no special token in ``known`` is or holds."""
    pieces = {piece.strip() for token in known for piece in token.split(",")}
    parts = [part.strip() for part in value.split(",") if part.strip()]
    return next((part for part in parts if part not in known and part not in pieces), value.strip())


def shown_name(enc: Encoding) -> str:
    """The name an output gives ``enc``: a saved tokenizer whose folder is named like a registered encoding
    (cl100k_base/) is "cl100k_base (saved)", as stats and the playground say (:func:`shown_names`)."""
    return shown_names([enc])[0]


def find_inputs(names: list[str]) -> list[Path]:
    """INPUT arguments -> the input files (:func:`tokenizer.jobs.inputs.find_inputs`: files, folders, globs,
    ``-``); a package that reading them needs (pyarrow) and is missing is a mistake, told before any work."""
    try:
        return inputs.find_inputs(names)
    except ImportError as e:
        raise UsageError(str(e)) from None


# ---- the commands -----------------------------------------------------------------------------------------


def text_argument(args, command: str) -> str:
    """The TEXT argument, as typed (in UTF-8, as stdin must be); ``-`` reads stdin (``echo -n - | ... -`` for a
    lone dash), as UTF-8, exactly as read (newlines and a final one included)."""
    return read_stdin_text(f"{command} -: stdin") if args.text == "-" else argument_text(args.text, "TEXT")


def encode(args) -> None:
    text = text_argument(args, "encode")
    enc = open_encoding(args.encoding)
    allowed, disallowed = special_rule(enc, args.allowed_special, args.disallowed_special)
    print(" ".join(map(str, enc.encode(text, allowed_special=allowed, disallowed_special=disallowed))))


# An id is at most a few billion; a number of more digits than this is past every vocabulary. Such a number is
# told as an out-of-range id, shortened, without int(), which refuses numbers of over 4,300 digits (and would
# advise a Python call that no one at a command line can make).
ID_DIGITS = 40


class TooLongId(str):
    """A number typed as an id (its digits, a minus included) too long to be one: more than ID_DIGITS digits."""

    def shown(self) -> str:
        return f"{self[:10]}...{self[-10:]} ({len(self.removeprefix('-')):,} digits)"


def parse_ids(words: list[str]) -> list[int]:
    """Token ids as typed: separate arguments, comma or space lists, JSON lists (``"[15496, 11, 995]"``, as
    Python prints a list of ids) or NumPy's (``"[15496    11   995]"``, as it prints an array of them, a .bin's
    read with np.memmap). A number too long to be any id is kept as a :class:`TooLongId`, which
    :func:`check_id_range` refuses once the encoding is known."""
    ids = []
    for word in words:
        if word.lstrip().startswith("["):
            try:
                items = json.loads(word, parse_int=id_number)
            except ValueError:
                inner = word.strip()[1:-1]
                if not word.rstrip().endswith("]") or any(c in inner for c in '[]"'):
                    raise UsageError(f"decode: {word.strip()[:40]!r} is not a JSON list of token ids") from None
                word = inner  # NumPy's print of an array: the ids between brackets, apart but without commas
            else:
                if not isinstance(items, list) or any(type(i) not in (int, TooLongId) for i in items):
                    raise UsageError(f"decode: {word.strip()[:40]!r} must be a list of integer token ids") from None
                ids += items
                continue
        for part in word.replace(",", " ").split():
            # int() also reads "1_000", "+5" and other scripts' digits ("١٢"), which no one means as an id; a minus
            # is read, so that "-5" gets the vocabulary's own message (ids run from 0 to ...)
            if not ascii_digits(part.removeprefix("-")):
                raise UsageError(f"decode: {part!r} (id {len(ids) + 1}) is not a token id: write ids in the "
                                 "digits 0-9")
            ids.append(id_number(part))
    return ids


def id_number(digits: str) -> int | TooLongId:
    """``digits`` (0-9, maybe after a minus) as a number, or as a :class:`TooLongId` past ID_DIGITS digits."""
    return TooLongId(digits) if len(digits.removeprefix("-")) > ID_DIGITS else int(digits)


def check_id_range(ids: list, enc: Encoding) -> None:
    """A :class:`TooLongId` among ``ids`` is refused as :meth:`Encoding.decode` refuses any id out of range."""
    for token in ids:
        if isinstance(token, TooLongId):
            raise UsageError(f"token id {token.shown()} is not in the vocabulary of {enc.name!r} (ids run from 0 "
                             f"to {enc.max_token_value})")


def decode(args) -> None:
    if args.ids_file is not None:
        if args.ids:
            args.parser.error("--ids FILE.bin decodes the ids in that file: pass no ids with it")
        return decode_ids_file(args)
    if not args.ids:
        args.parser.error("the following arguments are required: ID (or --ids FILE.bin)")
    # (parity's wording for its --dtype)
    for flag, what in (("dtype", "the type of the ids in"), ("start", "an index in"), ("count", "how many ids of")):
        if getattr(args, flag) is not None:
            args.parser.error(f"--{flag} is {what} --ids FILE.bin: pass it with --ids")
    words = args.ids
    if "-" in words:
        if words != ["-"]:
            raise UsageError("decode -: reads the ids from stdin; pass no other ids with it")
        words = [read_stdin_text("decode -: stdin")]
    ids = parse_ids(words)
    out = decode_destination(args)
    enc = open_encoding(args.encoding)
    check_id_range(ids, enc)
    # the ids' own bytes, as decode --ids writes them: not Encoding.decode, which for a tokenizer.json whose
    # "decoder" is null gives, as HF does, the tokens' strings joined by spaces ("hello Ġw Ã¶r ld")
    written = write_text([enc.decode_bytes(ids).decode("utf-8", errors="replace")], out)
    say_written(args.out, out, f"{parity.plural(len(ids), 'id')} decoded into {written:,} bytes of text "
                               f"({shown_name(enc)})")


# decode --ids reads and writes this many ids at a time: about 10 MB as Python ints, however large the .bin
DECODE_WINDOW_IDS = 1 << 18


def decode_ids_file(args) -> None:
    """``decode --ids FILE.bin``: the text of a file of ids (or of ``--start``/``--count``'s slice of it), written
    a window at a time, so that memory does not grow with the file."""
    if inputs.is_stdin(args.ids_file):
        raise UsageError("--ids -: a .bin is read from a file, whose size tells how many ids it holds; save the ids "
                         "to a file, or pipe ids written as text to decode -")
    path = Path(args.ids_file)
    out = decode_destination(args, input_path=path)
    id_files.check_ids_file(path, verb="decode")  # before the vocabulary, which may have to be downloaded
    enc = open_encoding(args.encoding)
    dtype = args.dtype
    written_by = manifest.written_settings(path)  # an encode-dataset shard: its manifest says what wrote it
    if written_by is not None and written_by.get("dtype") not in ("uint16", "uint32"):
        written_by = None  # not a manifest this project wrote: nothing in it is trusted
    if written_by is not None:
        if written_by.get("encoding_sha256") != manifest.encoding_fingerprint(enc):
            said = f"--ids {path}: its folder's {manifest.MANIFEST_NAME} says it was written with"
            if written_by.get("encoding") == enc.name:  # a tokenizer changed in place: its name is no advice
                raise UsageError(f"{said} {manifest.another_encoding(enc)}: pass the --encoding it was "
                                 "written with")
            raise UsageError(f"{said} {written_by.get('encoding')}, not {shown_name(enc)}: pass that --encoding")
        if dtype is not None and dtype != written_by.get("dtype"):
            raise UsageError(f"--dtype {dtype}: {path}'s folder's {manifest.MANIFEST_NAME} says its ids are "
                             f"{written_by.get('dtype')}: drop --dtype")
        dtype = written_by.get("dtype")
    dtype = np.dtype(dtype).newbyteorder("<") if dtype else dataset.id_dtype(enc.n_vocab)
    with id_files.IdsFile(path, dtype, verb="decode") as ids_file:
        start = args.start or 0
        if start > ids_file.total or (start == ids_file.total and start):
            raise UsageError(f"--start {start:,}: {path} holds {parity.plural(ids_file.total, 'id')} ({dtype.name}), "
                             f"indexed from 0 to {max(ids_file.total - 1, 0):,}")
        ids_file.advance(start)
        n_ids = ids_file.left if args.count is None else min(args.count, ids_file.left)
        if written_by is None:
            note_other_dtype(ids_file.peek(1024), path, dtype, start)
        # a bar on stderr when a person watches it (bar_if_slow), unless the text goes to that same terminal
        to_terminal = out == outputs.STDOUT and sys.stdout.isatty()
        with bar_if_slow(total=n_ids, unit="id", unit_scale=True, desc=f"decoding {path.name}",
                         disable=to_terminal) as bar:
            pieces = decoded_pieces(ids_file, n_ids, enc, dtype, bar)
            written = write_text(pieces, out)
    say_written(args.out, out, f"{parity.plural(n_ids, 'id')} ({dtype.name}) of {path} from index {start:,} "
                               f"decoded into {written:,} bytes of text ({shown_name(enc)})")


def decoded_pieces(ids_file, n_ids: int, enc: Encoding, dtype: np.dtype, bar):
    """The text of the next ``n_ids`` ids of ``ids_file``, a window at a time: what ``enc.decode`` of them all
    gives (a character cut between two windows is joined, not replaced)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while n_ids:
        ids = ids_file.peek(min(n_ids, DECODE_WINDOW_IDS))
        try:
            data = enc.decode_bytes(ids)
        except KeyError:
            raise UsageError(unknown_id_in_file(ids_file, ids, enc, dtype)) from None
        ids_file.advance(len(ids))
        n_ids -= len(ids)
        bar.update(len(ids))
        yield utf8.decode(data, final=not n_ids)
    yield utf8.decode(b"", final=True)


def unknown_id_in_file(ids_file, ids: list[int], enc: Encoding, dtype: np.dtype) -> str:
    """Which id of the window ``ids`` (read at ``ids_file``'s position) the vocabulary lacks, and what may be wrong."""
    index, token = next((k, t) for k, t in enumerate(ids) if not is_token(enc, t))
    other = id_files.other_dtype(dtype)
    maybe = (f"was it written as {other.name}? pass --dtype {other.name}; or "
             if ids_file.total * dtype.itemsize % other.itemsize == 0 else "")
    return (f"--ids {ids_file.path} index {ids_file.pos + index:,}: token id {token} is not in the vocabulary of "
            f"{enc.name!r} (ids run from 0 to {enc.max_token_value}); {maybe}was it written with another "
            "encoding? pass its --encoding")


def is_token(enc: Encoding, token: int) -> bool:
    try:
        enc.decode_single_token_bytes(token)
    except KeyError:
        return False
    return True


def note_other_dtype(first_ids: list[int], path: Path, dtype: np.dtype, start: int) -> None:
    """A note on stderr when the ids of ``path`` from index ``start`` look like uint32 ids read as uint16 (every
    other one 0, which decodes as "!"): a uint32 file of a small vocabulary's ids reads so, every id in range, and
    nothing else would tell."""
    if dtype.itemsize != 2 or len(first_ids) < 16:
        return
    evens, odds = any(first_ids[::2]), any(first_ids[1::2])
    if evens != odds:  # one of the two all 0, the other not
        say(f"note: in {path}, every other one of the {len(first_ids):,} ids from index {start:,} is 0: was it "
            "written as uint32? pass --dtype uint32")


def decode_destination(args, input_path: Path | None = None):
    """``decode --out``, checked before any work (:mod:`tokenizer.outputs`): standard output by default; never
    the ``--ids`` file it reads, even with ``--force``."""
    if args.out is None or args.out == outputs.STDOUT:
        return outputs.STDOUT
    target = outputs.check_file(args.out, overwrite=args.force, flag="--out", stdout_ok=True)
    if input_path is not None and target.exists() and input_path.exists() and os.path.samefile(target, input_path):
        raise UsageError(f"--out {args.out} is the --ids file it would read; name another --out")
    return target


def write_text(pieces, out) -> int:
    """Write the text ``pieces`` to ``out``: a file (UTF-8, exactly, whole or not at all:
    :func:`tokenizer.outputs.replaced_file`) or standard output (in its encoding, as it comes; on a terminal, a
    newline after a text that does not end with one, so that the prompt starts on its own line). Returns the
    UTF-8 bytes of the text."""
    n_bytes, last = 0, "\n"
    if out == outputs.STDOUT:
        for text in pieces:
            sys.stdout.write(text)
            n_bytes += len(text.encode("utf-8"))
            last = text[-1:] or last
        if sys.stdout.isatty() and last != "\n":  # only for the eye: a pipe or a file gets the text exactly
            sys.stdout.write("\n")
        return n_bytes
    with outputs.replaced_file(out) as f:
        for text in pieces:
            data = text.encode("utf-8")
            f.write(data)
            n_bytes += len(data)
    return n_bytes


def say_written(given: str | None, out, what: str) -> None:
    """The summary of a decode into a file (``--out`` as ``given``), on stdout, free then; nothing when the text
    itself went to stdout."""
    if out != outputs.STDOUT:
        with summary_of(f"{given} is written"):
            print(f"{given}: {what}")


def count(args) -> None:
    paths = find_inputs(args.files)
    enc = open_encoding(args.encoding)
    allowed, disallowed = special_rule(enc, args.allowed_special, args.disallowed_special)
    lines = []  # printed once every input is read: a bad one (not UTF-8, a bad record) leaves no half answer
    for path in paths:  # standard input is read as it comes, once
        s = dataset.file_stats(path, enc, allowed_special=allowed, disallowed_special=disallowed,
                               errors=args.errors, text_field=args.text_field, progress=show_progress())
        lines.append(f"{s['file']}: {s['tokens']:,} tokens, {text_bytes(s)}, {s['bytes_per_token']:.3f} "
                     f"bytes/token ({shown_name(enc)}, {s['mb_per_s']:.1f} MB/s)")
    print("\n".join(lines))


def encode_file(args) -> None:
    if args.out is None and inputs.is_stdin(args.input):
        raise UsageError("encode-file - reads standard input: name the output with --out FILE.bin")
    out = args.out if args.out is not None else str(Path(args.input).with_suffix(".bin"))
    flag = "--out" if args.out is not None else "the output"
    # the destination before the vocabulary, which may have to be downloaded (encode_file checks it again)
    outputs.check_file(out, overwrite=args.force, flag=flag, stdout_ok=True)
    enc = open_encoding(args.encoding)
    allowed, disallowed = special_rule(enc, args.allowed_special, args.disallowed_special)
    s = dataset.encode_file(args.input, out, encoding=enc, workers=args.workers, allowed_special=allowed,
                            disallowed_special=disallowed, errors=args.errors, text_field=args.text_field,
                            progress=show_progress(), overwrite=args.force, flag=flag)
    summary = (f"{s['out']}: {s['tokens']:,} tokens ({s['dtype']}) from {text_bytes(s)}, "
               f"{s['bytes_per_token']:.3f} bytes/token, {s['mb_per_s']:.2f} MB/s "
               f"({s['seconds']:.1f} s, {s['workers']} worker{'s' if s['workers'] > 1 else ''}, {shown_name(enc)})")
    # the summary is the command's result, unless the ids themselves went to stdout (--out -)
    if out == outputs.STDOUT:
        print(summary, file=sys.stderr)
        return
    with summary_of(f"{s['out']} is written"):
        print(summary)


def text_bytes(figures: dict) -> str:
    """"N bytes" of text (UTF-8: what every bytes/token is of), the file's size where it differs, and how many of
    them were not UTF-8 (``--errors replace``): read, and counted, but encoded as U+FFFD."""
    stored, replaced = figures.get("file_bytes"), figures.get("replaced_bytes")
    # "of them" right after the text's bytes: after the file's it would say the compressed bytes of a .gz held them
    notes = [f"{replaced:,} of them not UTF-8, each run read as U+FFFD"] if replaced else []
    if stored not in (None, figures["bytes"]):
        notes.append(f"{stored:,} file bytes")
    return f"{figures['bytes']:,} bytes" + (f" ({'; '.join(notes)})" if notes else "")


def encode_dataset(args) -> None:
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is the Ray cluster to use: pass it with --engine ray")
    # the destination before the vocabulary, which may have to be downloaded (encode_dataset checks it again)
    sharded.check_out_dir(args.out, overwrite=args.force, flag="--out")
    enc = open_encoding(args.encoding)
    try:
        m = sharded.encode_dataset(args.inputs, args.out, encoding=enc, text_field=args.text_field,
                                   errors=args.errors, engine=args.engine, address=args.address, workers=args.workers,
                                   progress=show_progress(), overwrite=args.force, flag="--out")
    except ImportError as e:  # --engine ray without Ray, or .parquet without pyarrow
        raise UsageError(str(e)) from None
    except RayAddressError as e:
        raise UsageError(e.said("--address")) from None
    with summary_of(f"the dataset is written in {args.out} (see {Path(args.out) / 'manifest.json'})"):
        say_dataset(args, m, enc)


def say_dataset(args, m: dict, enc: Encoding) -> None:
    """encode-dataset's summary of the manifest ``m`` it wrote."""
    t = m["totals"]
    removed = m["removed"]
    if removed:
        shown = ", ".join(removed[:3]) + (f" and {len(removed) - 3} more" if len(removed) > 3 else "")
        print(f"{args.out}: removed {parity.plural(len(removed), '.bin file')} that the earlier manifest listed for "
              f"inputs not given this time ({shown})")
    print(
        f"{args.out}: {parity.plural(t['tokens'], 'token')} ({m['settings']['dtype']}) in "
        f"{parity.plural(t['shards'], 'shard')} from {text_bytes(t)}, {parity.plural(t['documents'], 'document')}; "
        f"encoded {m['encoded']}, already complete {m['skipped']} ({m['seconds']:.1f} s, {args.engine} engine, "
        f"{shown_name(enc)}); see {Path(args.out) / 'manifest.json'}"
    )


# stats times each encoding over at least this long, after a warm-up pass: one pass over a small file lasts a
# fraction of a second and carries the process's first-encode costs, so its figure swings several-fold between runs.
STATS_MIN_SECONDS = 1.0


def stats(args) -> None:
    chosen = chosen_encodings(args)  # (a mistake in them is said before the inputs are looked for)
    paths = find_inputs(args.files)
    encs = [open_encoding(name) for name in chosen]
    allowed, disallowed = special_rule(encs, args.allowed_special, args.disallowed_special)
    # a saved tokenizer's name is its folder's, which may be a registered encoding's: each row names its own
    names = shown_names(encs)
    rows = []  # the table is printed whole once every file is read: an error leaves no half table behind
    replaced = {}  # input name -> its bytes not UTF-8 (--errors replace), said under the table
    with inputs.stdin_as_file(paths) as readable:  # each encoding reads each input again
        for path in readable:
            for enc, name in zip(encs, names):
                own_allowed, own_disallowed = rule_of(enc, allowed, disallowed)
                s = dataset.file_stats(path, enc, allowed_special=own_allowed, disallowed_special=own_disallowed,
                                       errors=args.errors, text_field=args.text_field, progress=show_progress(),
                                       min_seconds=args.min_seconds)
                if s["replaced_bytes"]:  # the same bytes under every encoding: said once
                    replaced.setdefault(inputs.input_name(path), s["replaced_bytes"])
                rows.append(  # the file as given (stdin, a pipe's name): two of one name in two folders differ
                    f"| {inputs.input_name(path)} | {name} | {s['bytes']:,} | {s['tokens']:,} | "
                    f"{s['bytes_per_token']:.3f} | {s['mb_per_s']:.2f} | "
                    f"{dataset.format_duration(s['pile_seconds']) if s['bytes'] else '-'} |"
                )
    print("| file | encoding | bytes | tokens | bytes/token | MB/s (1 process) | the Pile (825 GB) at that speed |")
    print("|---|---|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    for given, n_replaced in replaced.items():
        verb = "is" if n_replaced == 1 else "are"
        print(f"{given}: {n_replaced:,} of its bytes {verb} not UTF-8, each run read as U+FFFD (--errors replace)")
    timing = (f"each speed timed over at least {args.min_seconds:g} s of encoding, after a warm-up pass"
              if args.min_seconds else "each speed timed over one pass")
    print(f"\nThe Pile projection is for one process ({timing}); encode-file --workers N divides it by up to N.")


def show(args) -> None:
    enc = open_encoding(args.encoding)
    allowed, disallowed = special_rule(enc, args.allowed_special, args.disallowed_special)
    color = args.color
    if color is None:  # auto: colours on a terminal, unless NO_COLOR is set (no-color.org)
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    print(teach.render_show(text_argument(args, "show"), enc, color, allowed_special=allowed,
                            disallowed_special=disallowed, shown_as=shown_name(enc)))


def explain(args) -> None:
    enc = open_encoding(args.encoding)
    allowed, disallowed = special_rule(enc, args.allowed_special, args.disallowed_special)
    text = text_argument(args, "explain")
    for line in teach.explain_lines(text, enc, allowed_special=allowed, disallowed_special=disallowed,
                                    shown_as=shown_name(enc)):
        print(line)


def compare(args) -> None:
    labels = dict(teach.COMPARED)
    encs = [open_encoding(name) for name in chosen_encodings(args)]
    allowed, disallowed = special_rule(encs, args.allowed_special, args.disallowed_special)
    # a saved tokenizer's name is its folder's, which may be a registered encoding's: label it for what it is
    chosen = [(enc, labels.get(enc.name, "") if is_registered(enc) else "saved") for enc in encs]
    text = text_argument(args, "compare")
    for line in teach.compare_lines(text, chosen, allowed_special=allowed, disallowed_special=disallowed):
        print(line)


def train(args) -> None:
    found = find_inputs(args.input)
    if args.resume and inputs.STDIN in found:
        raise UsageError("--resume reads the inputs again, and standard input cannot be read twice: save it to a "
                         "file and train on the file")
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is the Ray cluster to use: pass it with --engine ray")
    one_byte = next((token for token in args.special_tokens if is_single_byte(token)), None)
    if one_byte is not None:  # train_bpe's own check says it in Python's terms
        raise UsageError(f"--special_tokens {one_byte}: a special token of one byte would take that byte's own "
                         "token, which ordinary text needs (byte-level BPE encodes any text with the 256 bytes): "
                         "name it with two or more characters, e.g. <|...|>")
    no_merges = 256 + len(set(args.special_tokens))  # the vocab_size that leaves no room for a merge
    if args.vocab_size < no_merges:  # train_bpe's own check says it in Python's terms (vocab_size=200)
        raise UsageError(f"--vocab_size {args.vocab_size} is too small: the 256 bytes and "
                         f"{teach.counted(no_merges - 256, 'special token')} take {no_merges} ids; pass a larger "
                         "--vocab_size (each id above those is one merge)")
    if args.format == "gpt2" and args.vocab_size == no_merges:
        raise UsageError(f"--vocab_size {args.vocab_size} leaves no merges (256 bytes + "
                         f"{teach.counted(no_merges - 256, 'special token')}), and the gpt2 format's vocab.bpe is "
                         "its merges: pass a larger --vocab_size, or --format hf or tiktoken")
    checkpoint = check_train_outputs(args, found)
    source = inputs.input_name(found[0]) if len(found) == 1 else f"{len(found)} files"
    with inputs.stdin_as_file(found) as paths:  # read in parallel, then again for the figures below
        train_on(paths, source, args, checkpoint)


def check_train_outputs(args, found: list[Path]) -> Path:
    """``--out DIR`` and ``DIR.checkpoint`` (where the state is kept until the tokenizer is saved), checked
    before any work (:mod:`tokenizer.outputs`), and against the input files ``found``; returns the checkpoint
    folder."""
    checkpoint = state_folder(args.out)
    unmarked = [token for token in args.special_tokens if not is_gpt2_special_token(token)]
    if args.format == "gpt2" and unmarked:  # saving would refuse it, but only once the training is done
        raise UsageError(f"--special_tokens {unmarked[0]}: the gpt2 format tells special tokens only by their form "
                         "<|...|>, so it would load back as ordinary text: pass --format hf or tiktoken, or name it "
                         "like <|...|>")
    refuse_replacing_train_inputs(found, args.out, args.format, checkpoint)
    check_tokenizer_folder(args.out, overwrite=args.force or args.resume, flag="--out")
    outputs.check_folder(checkpoint, overwrite=True, flag=f"--out {args.out}: its state folder")
    foreign = [p.name for p in checkpoint.iterdir() if not is_state_file(p.name)] if checkpoint.is_dir() else []
    if foreign:  # the folder is removed once the tokenizer is saved: never with files of the user's in it
        raise UsageError(f"{checkpoint}, where train keeps its state, holds other files "
                         f"({', '.join(sorted(foreign))}); move them, or name another --out")
    # a folder (or a pipe) with a state file's name can be neither read nor replaced: --resume and --force both fail
    odd = sorted(p for p in checkpoint.iterdir() if not p.is_file()) if checkpoint.is_dir() else []
    if odd:
        kind = "a folder" if odd[0].is_dir() else "not a file"
        raise UsageError(f"{odd[0]} is {kind}, where train keeps a file of its training state: move it out of "
                         f"{checkpoint}, or name another --out")
    if args.resume and not is_resumable(checkpoint):
        raise UsageError(f"--resume: no training state in {checkpoint} (drop --resume to start from the beginning)")
    if is_resumable(checkpoint) and not (args.resume or args.force):
        raise UsageError(f"{checkpoint} holds the training state of a run that stopped: pass --resume to continue "
                         "it, or --force to start over")
    return checkpoint


def state_folder(out: str) -> Path:
    """Where train keeps the state of a run that saves into ``out`` until the tokenizer is saved: beside that
    folder, named after it, ``tok`` (or ``tok/``) -> ``tok.checkpoint``. An ``out`` written with dots (``.``,
    ``..``, ``tok/..``) has no name to build on (``.`` made ``..checkpoint``, a hidden folder in it): the folder's
    absolute path names it. The root folder has nothing beside it, and is refused."""
    if not out:  # Path("") is the current folder (tokenizer.outputs refuses it for the same reason)
        raise UsageError("--out '': an empty path; name a folder")
    given = Path(out)
    if given.name in ("", ".."):
        given = Path(os.path.abspath(out))
        if not given.name:
            raise UsageError(f"--out {out}: train keeps its state in a folder beside --out, and the root folder has "
                             "none beside it: name a folder inside it")
    return given.with_name(f"{given.name}.checkpoint")


def refuse_replacing_train_inputs(found: list[Path], out: str, format: str, checkpoint: Path) -> None:  # noqa: A002
    """A mistake when an input is a file train would replace or remove in ``out`` (``--force`` replaces a saved
    tokenizer, whatever its format), or lies in the state folder removed at the end: the input would be lost."""
    folder = Path(out).resolve()
    replaced = {folder / name for name in replaced_tokenizer_files(folder, format)}
    state = checkpoint.resolve()
    for path in found:
        if inputs.is_stdin(path):
            continue
        # the file read (through any link), and the folder entry named (a link replaced is a link lost)
        for where in (path.resolve(), path.parent.resolve() / path.name):
            if where in replaced:
                raise UsageError(f"--out {out}: saving the tokenizer would replace the input {path} "
                                 f"({where.name}); name another --out, or move the input out of {out}")
            if where.is_relative_to(state):
                raise UsageError(f"--input {path} is in {checkpoint}, the folder where train keeps its state and "
                                 "removes once the tokenizer is saved: move the input, or name another --out")


def is_state_file(name: str) -> bool:
    """A file of a training state folder: the trainer's state, this command's clock, or a part of either."""
    return name.removesuffix(".partial") in (*STATE_FILES, RunClock.FILE)


def is_resumable(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` holds a training state to resume (its settings are written last)."""
    return (checkpoint / "settings.json").is_file()


def train_on(paths: list[Path], source: str, args, checkpoint: Path) -> None:
    specials = list(dict.fromkeys(args.special_tokens))  # in the order given, duplicates dropped
    kept = f"the training state is kept in {checkpoint}: run the same command with --resume to continue"
    made = outputs.make_folders(checkpoint.parent)
    fresh = not checkpoint.exists()
    clock = RunClock(checkpoint, resume=args.resume)
    trained = False
    try:
        vocab, merges = train_bpe(paths, args.vocab_size, specials, text_field=args.text_field,
                                  num_workers=args.num_workers, progress=show_progress(), checkpoint=checkpoint,
                                  resume=args.resume, checkpoint_every=args.checkpoint_every, engine=args.engine,
                                  address=args.address)
        seconds = time.perf_counter() - clock.start
        if args.format == "gpt2" and not merges:  # a text without one pair to merge (seconds' work: not kept)
            shutil.rmtree(checkpoint, ignore_errors=True)
            raise UsageError(f"--out {args.out}: the training text holds no pair of bytes to merge, so there are no "
                             "merges, and the gpt2 format's vocab.bpe is its merges: pass --format hf or tiktoken")
        trained = True
        enc = Encoding.from_vocab_merges(vocab, merges, specials, name=Path(args.out).resolve().name)
        save_encoding(enc, args.out, args.format, overwrite=True, flag="--out")  # checked by check_train_outputs
    except BaseException as e:
        if is_resumable(checkpoint):  # the counts are kept: the run can go on from there, and is told so
            if isinstance(e, KeyboardInterrupt):
                raise Interrupted(kept) from None
            if isinstance(e, UnreadableState):  # --resume would fail the same way again until it can be read
                raise UsageError(f"--resume: {checkpoint / e.file}, a file of the training state, cannot be read "
                                 f"({e.reason}): make it readable (chmod u+r) and run the same command again, or "
                                 "pass --force instead of --resume to start over") from None
            if isinstance(e, OSError):  # e.g. a full disk: the same command again would fail the same way
                raise UsageError(f"{error_message(e)}; the training state is kept in {checkpoint}: once that is "
                                 "fixed, run the same command with --resume to continue") from None
            if isinstance(e, SettingsChanged):  # "start without resume" alone would be refused: that takes --force
                raise UsageError(f"--resume: the training state in {checkpoint} was made with other "
                                 f"{', '.join(e.changed)}: resume with the same ones, or pass --force instead of "
                                 "--resume to start over") from None
            if isinstance(e, DamagedState):
                raise UsageError(f"--resume: the training state in {checkpoint} is damaged: {e.file} cannot be read "
                                 f"({e.reason}); pass --force instead of --resume to start over") from None
            if trained and isinstance(e, ValueError):  # the tokenizer could not be made or saved: keep the merges
                raise UsageError(f"{e}; the training state is kept in {checkpoint}, with every merge: once that is "
                                 "fixed, run the command again with --resume to save the tokenizer without training "
                                 "again, or with --force to start over") from None
        elif fresh:  # no state kept: nothing left of this run
            shutil.rmtree(checkpoint, ignore_errors=True)
            outputs.remove_folders(made)
        else:
            clock.forget()
        if isinstance(e, ImportError):  # --engine ray without Ray
            raise UsageError(str(e)) from None
        if isinstance(e, RayAddressError):
            raise UsageError(e.said("--address")) from None
        raise
    try:
        shutil.rmtree(checkpoint)
        with summary_of(f"the tokenizer is saved in {args.out}"):
            print_training_summary(paths, source, args, vocab, merges, enc, seconds, clock)
    except KeyboardInterrupt:  # e.g. while the training text is encoded again for the summary
        shutil.rmtree(checkpoint, ignore_errors=True)
        raise Interrupted(f"the tokenizer is saved in {args.out}; only the summary was cut short") from None


def print_training_summary(paths: list[Path], source: str, args, vocab, merges, enc: Encoding, seconds: float,
                           clock: RunClock) -> None:
    # Peak resident memory (Linux reports KiB) of this process, and of the local counting workers, its children.
    # Ray's workers are not this process's children (its children are Ray's own servers, for a local cluster):
    # their memory is not measured here, and the line says so.
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    measured = "this process; the Ray workers' is not measured"
    if args.engine == "local":
        peak_kib = max(peak_kib, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        measured = "largest of this process and one worker"
    specials = sorted(enc.special_tokens_set)
    special_bytes = {s.encode("utf-8") for s in specials}
    longest = max((t for t in vocab.values() if t not in special_bytes), key=len)
    n_tokens = n_bytes = 0
    # The training text is encoded again for the figures below, with a bar on a terminal: on a large corpus, or one
    # of long pre-tokens (text without spaces), that takes longer than the training itself.
    for path in paths:
        s = dataset.file_stats(path, enc, allowed_special="all", text_field=args.text_field, progress=show_progress())
        n_tokens += s["tokens"]
        n_bytes += s["bytes"]
    took = f"{seconds:.1f} s"
    if clock.earlier is not None:  # a resumed run: the time of the runs before it counts too
        took += f" ({clock.earlier + seconds:.1f} s in all, with the run{'s' if clock.runs > 1 else ''} it resumed)"
    merges_said = f"{len(merges):,} merge{'' if len(merges) == 1 else 's'}"  # "1 merge": a vocab_size of 257
    print(f"trained {merges_said} ({len(vocab):,} tokens) from {source} in {took}; "
          f"saved in the {args.format} format in {args.out}")
    print(f"peak memory: {peak_kib / 1024:.0f} MB ({measured})")
    if merges:
        print(longest_token_line(longest, specials))
    else:  # (no room for a merge, or no pair to merge) any byte would be "the longest": b'\x00' was named
        print("longest token: 1 byte (no merges learned: every token but the special ones is a single byte)")
    print(f"on the training text: {n_tokens:,} tokens, {n_bytes / max(n_tokens, 1):.3f} bytes/token")


LONGEST_SHOWN = 100  # bytes of the longest token that train prints


def longest_token_line(longest: bytes, specials: list[str]) -> str:
    """What train says of the longest token it learned: special tokens are added whole, not learned, so they
    are left out, and the line says so (CS336's ``max(vocab.values(), key=len)`` would give one of them).

    >>> longest_token_line(b" accomplishment", ["<|endoftext|>"])
    "longest token: b' accomplishment' (15 bytes; special tokens left out: '<|endoftext|>' is 13 bytes)"

    A token longer than :data:`LONGEST_SHOWN` bytes is shown by its start (text without spaces, or a file of one
    repeated letter, makes tokens of thousands or millions of bytes: a line of them would fill the terminal):

    >>> line = longest_token_line(b"ab" * 500_000, [])
    >>> len(line), line[:20], line[-46:]
    (160, "longest token: b'aba", "bab'... (1,000,000 bytes, the first 100 shown)")
    """
    if len(longest) > LONGEST_SHOWN:
        start = longest[:LONGEST_SHOWN]
        said = f"longest token: {start!r}... ({len(longest):,} bytes, the first {LONGEST_SHOWN} shown"
    else:
        said = f"longest token: {longest!r} ({teach.counted(len(longest), 'byte')}"
    if not specials:
        return said + ")"
    special = max(specials, key=lambda token: len(token.encode("utf-8")))
    return said + f"; special tokens left out: {special!r} is {teach.counted(len(special.encode('utf-8')), 'byte')})"


class RunClock:
    """How long training took over all its runs, a resumed one included.

    Each run notes in ``DIR.checkpoint/cli_clock.json`` when it started and what the runs before it took. The
    run after counts a killed run's time up to its last saved merges (the file's modification time): the work
    after that is lost and done again, so it is counted once, in the run that does it.
    """

    FILE = "cli_clock.json"

    def __init__(self, checkpoint: Path, *, resume: bool):
        self.start = time.perf_counter()
        self.path = checkpoint / self.FILE
        self.earlier: float | None = None  # seconds of the runs before this one (None: this is the first)
        self.runs = 0
        if resume:
            try:
                noted = json.loads(self.path.read_text(encoding="utf-8"))
                last_save = (checkpoint / "merges.json").stat().st_mtime
                self.earlier = noted["earlier"] + max(0.0, last_save - noted["started"])
                self.runs = noted["runs"] + 1
            except (OSError, ValueError, KeyError, TypeError):
                self.earlier, self.runs = None, 0  # no note (an older run): only this run's time is known
        earlier, runs = self.earlier or 0.0, self.runs
        try:
            checkpoint.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps({"started": time.time(), "earlier": earlier, "runs": runs}),
                                 encoding="utf-8")
        except OSError:
            pass  # the time is a nicety: never a reason to fail

    def forget(self) -> None:
        """Interrupted before any state was kept: leave no folder that holds only this note."""
        self.path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.path.parent.rmdir()


def check_parity(args) -> int:
    if not args.inputs and args.fuzz is None:
        args.parser.error("the following arguments are required: INPUT (or --fuzz N)")
    if args.ids is not None:
        if args.fuzz is not None:
            args.parser.error("--ids checks a file of ids against this project's encoding: drop --fuzz")
        if args.encoding and len(args.encoding) > 1:
            args.parser.error("--ids checks one encoding (the one that wrote the ids): pass one --encoding")
    elif args.dtype is not None:
        args.parser.error("--dtype is the type of the ids in --ids FILE.bin: pass it with --ids")
    found = find_inputs(args.inputs) if args.inputs else []
    with inputs.stdin_as_file(found) as paths:  # each encoding reads each input again (a copy: named as its input)
        reports = parity_reports(args, paths)
    differ = sum(not r.identical for r in reports)
    if args.json:
        print(json.dumps({"identical": not differ, "checks": [r.to_dict() for r in reports]}, indent=2))
    else:
        for report in reports:
            print("\n".join(parity.report_lines(report)))
        checks = parity.plural(len(reports), "check")
        print(f"different: {differ} of {checks}" if differ else f"identical: {checks}")
    return 1 if differ else 0


def parity_reports(args, paths: list[Path]) -> list:
    """The checks ``parity`` asked for: each input with each encoding against the other side, then the fuzz; with
    ``--ids``, the file of ids against our encoding of the inputs, then (given ``--against``) our encoding against
    that side, which together check the ids against it."""
    names = args.encoding or (["gpt2"] if args.ids else list(parity.DEFAULT_ENCODINGS))
    encs = [open_encoding(name) for name in names]
    # each token checked against all the encodings together, as stats and compare check them: a refused token's
    # advice ("--allowed_special all (or that token)") then works whichever encoding refused it
    allowed, disallowed = special_rule(encs, *parity_flags(args))
    rules = [rule_of(enc, allowed, disallowed) for enc in encs]
    # --errors not given: with --ids of an encode-dataset shard, its manifest's (check_ids reads it there too), so that
    # --against reads the inputs as the ids were written
    errors = args.errors or (parity.written_errors(manifest.written_settings(Path(args.ids))) if args.ids else None)
    options = dict(errors=errors or "strict", max_report=args.max_report, progress=show_progress())
    # every other side loaded (or refused) before any work; with --ids, only one that --against names
    others = parity_sides(args.against, names, encs) if args.ids is None or args.against is not None else []
    reports = []
    if args.ids is not None:
        (allowed, disallowed), = rules
        reports += parity.check_ids(paths, args.ids, encs[0], dtype=args.dtype, allowed_special=allowed,
                                    disallowed_special=disallowed, text_field=args.text_field,
                                    **{**options, "errors": args.errors})
    for enc, (other, label), (allowed, disallowed) in zip(encs, others, rules):
        for path in paths:
            # with --ids, encoded as encode-file wrote the ids (a document with encode_ordinary), which together
            # with the check of the ids checks them against the other side
            reports.append(parity.check_file(path, enc, other, other_name=label, allowed_special=allowed,
                                             disallowed_special=disallowed, text_field=args.text_field,
                                             as_written=args.ids is not None, **options))
        if args.fuzz:  # the strings hold special-token text: checked both ways, as the parity tests do
            for how, allowed_special in (("special tokens as ids", "all"), ("special tokens as text", set())):
                name = f"fuzz ({args.fuzz:,} texts, seed {args.seed}, {how})"
                reports.append(parity.check_texts(parity.fuzz_texts(args.fuzz, args.seed), enc, other,
                                                  other_name=label, input_name=name,
                                                  allowed_special=allowed_special, disallowed_special=(),
                                                  max_report=args.max_report, progress=options["progress"]))
    return reports


def parity_flags(args) -> tuple[str | list[str], str | list[str]]:
    """``--allowed_special`` and ``--disallowed_special`` as parity reads the text: as given; else, with ``--ids``
    an encode-dataset shard, the rule its manifest records that its text was encoded with; else the defaults."""
    recorded = manifest.written_settings(Path(args.ids)) if args.ids is not None else None
    flags = []
    for name in ("allowed_special", "disallowed_special"):
        given = getattr(args, name)
        if given is None and recorded is not None and isinstance(recorded.get(name), str):
            given = recorded[name]
        # parity's flags default to None (a rule a manifest records is told from one typed): the help's default
        flags.append(given if given is not None else flag_spelling(teach.SPECIAL_RULES["disallowed"][name]))
    return flags[0], flags[1]


def serve_playground(args) -> None:
    if args.model is not None or args.models_dir is not None:  # the tokenizer never loads the model
        raise UsageError(f"the next-token panel is started by the model's command: gpt2 --serve --model "
                         f"{args.model or '124M'} (takes --port, --host and --encoding too)")
    encs = [open_encoding(name) for name in args.encoding or ["gpt2"]]
    try:
        server = serve.PlaygroundServer(serve.Playground(encs), args.host, args.port)
    except OSError as e:
        raise UsageError(cannot_listen(e, args.host, args.port)) from None
    with server:
        print(f"the tokenizer playground is at {server.url} (Ctrl-C stops it)", flush=True)
        server.serve_forever()


def parity_sides(against: str | None, names: list[str], encs: list[Encoding]) -> list[tuple[object, str]]:
    """The other side of each encoding's checks, and its label: ``--against tiktoken`` (the default): tiktoken's
    encoding of that name, or its engine on our tables; ``hf``: Hugging Face ``tokenizers`` reading the
    ``tokenizer.json`` the ``--encoding`` names; a path: the tokenizer saved there, read by this project."""
    if against in (None, "tiktoken"):
        return [tiktoken_side(enc) for enc in encs]
    if against == "hf":
        files = []
        for name in names:
            try:
                files.append(encoding_argument.tokenizer_json(name))
            except ValueError as e:
                raise UsageError(f"--against hf checks a Hugging Face tokenizer.json: --encoding {e}") from None
        try:
            return [parity.hf_counterpart(file) for file in files]
        except ImportError as e:
            raise UsageError(str(e)) from None
    if not Path(against).exists():
        raise UsageError(f"--against {against}: no such file or folder; pass tiktoken, hf, or a saved tokenizer "
                         "(a tokenizer.json, its folder, or a folder saved by train --out)")
    other = load_encoding(against)
    return [(other, against)] * len(encs)


def tiktoken_side(enc: Encoding):
    """tiktoken's encoding of ``enc``'s name (or its engine on ``enc``'s tables), and its label."""
    try:
        return parity.tiktoken_counterpart(enc)
    except ImportError as e:
        raise UsageError(str(e)) from None


# ---- the parser -------------------------------------------------------------------------------------------


# the encodings stats and compare put side by side unless told otherwise: the teaching comparison's
COMPARED_ENCODINGS = [name for name, _ in teach.COMPARED]


def add_encoding(p, *, several: bool = False) -> None:
    """``--encoding NAME|PATH``; with ``several``, also ``--encodings E1,E2`` (see :func:`chosen_encodings`)."""
    if several:
        # both repeatable (as parity's --encoding), so that a second one adds to the first instead of replacing it
        add_flag(p, "encodings", type=names_list, action="extend", default=None, metavar="E1,E2",
                 help="encodings (names, tokenizer.json files or saved folders), repeat or comma list "
                 f"(default: {','.join(COMPARED_ENCODINGS)}); --encoding NAME|PATH for one")
        add_flag(p, "encoding", action="append", default=None, metavar="NAME|PATH",
                 help="one encoding, as every command takes it: a registered name or a path (a tokenizer.json, its "
                 "folder, or a folder saved by train --out); the same as --encodings with that one (repeat it for "
                 "several)")
    else:
        add_flag(p, "encoding", default="gpt2", metavar="NAME|PATH", action=OneValue, two="encodings",
                       help=f"a registered encoding ({', '.join(list_encoding_names())}; default gpt2) "
                       "or a path: a tokenizer.json, its folder, or a folder saved by train --out")


def chosen_encodings(args) -> list[str]:
    """The encodings of a command that takes several (stats, compare): ``--encodings``' lists, or those
    ``--encoding`` names, one each, as every command takes it (a user who typed it there meant it here too);
    both is a mistake, for which of them was meant cannot be told."""
    if args.encoding is not None and args.encodings is not None:
        args.parser.error(f"--encoding {','.join(args.encoding)} and --encodings {','.join(args.encodings)}: pass "
                          "one of them (--encoding for one encoding, --encodings for a comma list)")
    return args.encoding or args.encodings or list(COMPARED_ENCODINGS)


# show, explain and compare are teaching tools: special-token text is shown as its one id, as tokenizer.teach's
# functions show it (one rule, teach.TEACHING_SPECIAL_RULE); the commands that encode keep tiktoken's rule
TEACHING = teach.SPECIAL_RULES[teach.TEACHING_SPECIAL_RULE]


def add_specials(p, rule: dict | None = None) -> None:
    """``--allowed_special`` and ``--disallowed_special``; their defaults are ``rule`` (``Encoding.encode``'s
    two arguments, as in :data:`tokenizer.teach.SPECIAL_RULES`), tiktoken's (refused) without one."""
    rule = rule or teach.SPECIAL_RULES["disallowed"]
    allowed, disallowed = (flag_spelling(rule[name]) for name in ("allowed_special", "disallowed_special"))
    add_flag(p, "allowed_special", default=allowed, action=Occurrences, metavar="all|none|TOKEN,...",
             help=f"special tokens to encode as their ids, repeat or comma list (a token that holds a comma is "
             f"read whole; default {allowed})")
    add_flag(p, "disallowed_special", default=disallowed, action=Occurrences, metavar="all|none|TOKEN,...",
             help=f"special tokens whose text is an error, repeat or comma list (default {disallowed}"
             f"{' but the allowed ones' if disallowed == 'all' else ''}); "
             "none: any other special-token text is encoded as plain text")


class Occurrences(argparse.Action):
    """A flag that may be repeated, each occurrence one more value: the list of the values typed, in place of the
    default (a str: --allowed_special all), which argparse's "append" would keep at the list's head."""

    def __call__(self, parser, namespace, values, option_string=None):
        typed = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*(typed if isinstance(typed, list) else []), values])


def flag_spelling(tokens) -> str:
    """``allowed_special``/``disallowed_special`` as the flags write them: ``all``, ``none`` or a comma list."""
    return tokens if tokens == "all" else ",".join(sorted(tokens)) or "none"


def add_errors(p, default: str | None = "strict") -> None:
    """``--errors``; ``default=None``: parity's, where the manifest of an encode-dataset shard says it."""
    said = "default strict" if default else "default strict; with --ids of an encode-dataset shard, its manifest's"
    add_flag(p, "errors", choices=["strict", "replace"], default=default,
             help=f"invalid UTF-8 in a file: strict stops with the byte offset, replace turns it into U+FFFD ({said})")


INPUTS_HELP = ("files, folders and quoted globs ('data/*.txt'), or - for standard input: .jsonl, .jsonl.gz and "
               ".parquet hold one document per record (see --text_field), any other file is UTF-8 text")


def add_text_field(p) -> None:
    add_flag(p, "text_field", default="text", metavar="NAME",
             help="the field (.jsonl) or column (.parquet) holding each document's text (default text)")


def build_parser(prog: str) -> OneLineParser:
    parser = OneLineParser(prog=prog, allow_abbrev=False,
                    description="Encode, decode, count, train and look inside byte-level BPE tokenizers: GPT-2's, "
                    "GPT-4's (cl100k_base), GPT-4o's (o200k_base) or your own.",
                    epilog=f"{prog} COMMAND --help shows each command's options. Flags may also be spelt with "
                    "dashes: --vocab-size for --vocab_size.")
    add_version_flag(parser)
    # COMMAND is required, but checked in main: argparse would report it missing before an unknown option typed
    # in its place ("gpt2-tokenizer -V" should name -V)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)

    def command(name: str, run, summary: str, usage: str, *, needs=()) -> OneLineParser:
        # Required arguments are checked after parsing (see main), not by argparse, which would report a
        # missing one before a misspelt flag: "train --vocab_sise 300" should name --vocab_sise.
        p = commands.add_parser(name, help=summary, description=summary, allow_abbrev=False,
                                usage=f"{prog} {name} {usage}")
        p.set_defaults(run=run, needs=needs, parser=p)
        return p

    p = command("encode", encode, "Print the ids of TEXT, separated by spaces.", "TEXT [options]",
                needs=[("text", "TEXT")])
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text, as typed (after -- if it starts with a dash); "
                   "- reads it from stdin, as UTF-8, exactly (a final newline included)")
    add_encoding(p)
    add_specials(p)

    p = command("decode", decode, "Print the text of token ids (separate arguments, a comma/space list, a JSON "
                "list, - for stdin, or --ids FILE.bin, a file of ids as encode-file writes it). The text is written "
                "exactly as the ids spell it, so encode then decode gives back the text byte for byte (also with "
                "a tokenizer.json whose \"decoder\" is null, where HF's decode and Encoding.decode give the tokens' "
                "strings joined by spaces); only on a terminal is a newline added after a text that does not end with "
                "one.",
                "ID [ID ...] [options]  (or --ids FILE.bin)")
    p.add_argument("ids", nargs="*", metavar="ID", help='token ids: "31373 995", 31373,995, 31373 995, a JSON '
                   'list "[31373, 995]" or a NumPy array as printed, "[31373   995]"; - reads them from stdin')
    add_flag(p, "ids", dest="ids_file", metavar="FILE.bin", action=OneValue, two="files of ids",
             help="instead, decode this file of ids (nanoGPT's layout, as encode-file and encode-dataset write it: "
             "flat little-endian uint16, or uint32 for vocabularies over 65,536), a window at a time")
    add_flag(p, "dtype", choices=["uint16", "uint32"],
             help="the type of the ids in --ids (default: as encode-dataset's manifest.json beside it says, else "
             "uint16 up to 65,536 ids, else uint32)")
    add_flag(p, "start", type=index_number, metavar="INDEX",
             help="with --ids: the index of the first id to decode, from 0 (default 0; parity --ids names indexes)")
    add_flag(p, "count", type=positive_int, metavar="N", help="with --ids: decode at most N ids (default: all)")
    add_flag(p, "out", metavar="FILE", action=OneValue, two="outputs",
             help="write the text into FILE (UTF-8, exactly; whole or not at all) "
             "instead of standard output")
    add_flag(p, "force", action="store_true", help="replace the --out file if it exists (without it, decode "
             "refuses to write over one)")
    add_encoding(p)

    p = command("count", count, "Print tokens, bytes and bytes/token of each FILE (read in chunks).",
                "FILE [FILE ...] [options]", needs=[("files", "FILE")])
    p.add_argument("files", nargs="*", metavar="FILE", help=INPUTS_HELP)
    add_encoding(p)
    add_specials(p)
    add_errors(p)
    add_text_field(p)

    p = command("encode-file", encode_file,
                "Encode a UTF-8 text file into a flat array of ids (uint16, or uint32 for vocabularies over "
                "65,536), as nanoGPT's np.memmap reads it; no output file is left behind on any error.",
                "INPUT [--out OUT.bin] [options]", needs=[("input", "INPUT")])
    p.add_argument("input", nargs="?", metavar="INPUT",
                   help="one file: UTF-8 text, or .jsonl, .jsonl.gz or .parquet, whose documents each become "
                   "encode_ordinary(text) + <|endoftext|>; or - for standard input (with --out)")
    add_flag(p, "out", metavar="OUT.bin", action=OneValue, two="outputs",
             help="the output file (default: INPUT with .bin); - writes the ids to "
             "standard output")
    add_flag(p, "force", action="store_true", help="replace the output file if it exists (without it, "
             "encode-file refuses to write over one)")
    add_encoding(p)
    add_flag(p, "workers", type=positive_int, metavar="N", help="worker processes (default: all CPUs)")
    add_specials(p)
    add_errors(p)
    add_text_field(p)

    p = command("encode-dataset", encode_dataset,
                "Encode a dataset of shards (.txt, .jsonl, .jsonl.gz, .parquet) into one .bin per shard (nanoGPT's "
                "layout; each JSON/parquet document is encode_ordinary(text) + <|endoftext|>) and DIR/manifest.json; "
                "re-running redoes only shards not proved complete, and removes the .bin files of inputs no "
                "longer given.",
                "INPUT [INPUT ...] --out DIR [options]", needs=[("inputs", "INPUT"), ("out", "--out")])
    p.add_argument("inputs", nargs="*", metavar="INPUT", help="shard files, folders of them or quoted globs")
    add_flag(p, "out", metavar="DIR", action=OneValue, two="outputs",
             help="the output folder (created if missing); required")
    add_flag(p, "force", action="store_true", help="write into a folder that holds other files and no "
             "manifest (without it, encode-dataset refuses)")
    add_encoding(p)
    add_errors(p)
    add_text_field(p)
    add_flag(p, "engine", choices=ENGINES, default="local",
             help="local: worker processes on this machine (default); ray: tasks on a Ray cluster")
    add_flag(p, "address", metavar="ADDR", help="with --engine ray: the cluster to use (e.g. auto); without "
             "it a local Ray cluster is started for the job and stopped after")
    add_flag(p, "workers", type=positive_int, metavar="N",
             help="shards encoded at once (default: all CPUs, or all of the Ray cluster's)")

    p = command("stats", stats, "A table of bytes/token and single-process speed per encoding per FILE.",
                "FILE [FILE ...] [options]", needs=[("files", "FILE")])
    p.add_argument("files", nargs="*", metavar="FILE", help=INPUTS_HELP)
    add_encoding(p, several=True)
    add_flag(p, "min_seconds", type=seconds, default=STATS_MIN_SECONDS, metavar="S",
             help=f"time each encoding over at least S seconds, encoding the file again as often as needed after "
             f"a warm-up pass, so the speed is a steady figure (default {STATS_MIN_SECONDS:g}; 0: time the one "
             "counting pass)")
    add_specials(p)
    add_errors(p)
    add_text_field(p)

    p = command("show", show, "TEXT with its token boundaries marked (colours on a terminal, | when piped), "
                "the ids below.", "TEXT [options]", needs=[("text", "TEXT")])
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text, as typed (after -- if it starts with a dash); "
                   "- reads it from stdin, as UTF-8, exactly (a final newline included)")
    add_encoding(p)
    add_flag(p, "color", type=color_choice, default=None, metavar="auto|always|never",
                   help="colours: auto (default: on a terminal, unless NO_COLOR is set), always or never")
    add_specials(p, TEACHING)

    p = command("explain", explain, "Each pre-token of TEXT and its BPE merges, step by step.", "TEXT [options]",
                needs=[("text", "TEXT")])
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text, as typed (after -- if it starts with a dash); "
                   "- reads it from stdin, as UTF-8, exactly (a final newline included)")
    add_encoding(p)
    add_specials(p, TEACHING)

    p = command("compare", compare, "Token counts and splits of TEXT under several encodings.", "TEXT [options]",
                needs=[("text", "TEXT")])
    p.add_argument("text", nargs="?", metavar="TEXT", help="the text, as typed (after -- if it starts with a dash); "
                   "- reads it from stdin, as UTF-8, exactly (a final newline included)")
    add_encoding(p, several=True)
    add_specials(p, TEACHING)

    p = command("train", train, "Train a byte-level BPE tokenizer on UTF-8 text files and save it.",
                "--input FILE|DIR|GLOB|-[,...] --vocab_size N --out DIR [options]",
                needs=[("input", "--input"), ("vocab_size", "--vocab_size"), ("out", "--out")])
    add_flag(p, "input", type=names_list, action="extend", metavar="INPUT",
             help=f"the training text, repeat or comma list: {INPUTS_HELP}; each file and document is "
                  "separate; required")
    add_text_field(p)
    add_flag(p, "resume", action="store_true",
             help="continue a run that stopped (the same inputs and options) from the state kept beside DIR, "
                  "in DIR.checkpoint (for --out ., in ../NAME.checkpoint, NAME the current folder's); it ends with "
                  "the merges of an uninterrupted run")
    add_flag(p, "force", action="store_true", help="replace the tokenizer already saved in DIR (without it, "
             "train refuses to write over one)")
    add_flag(p, "checkpoint_every", type=seconds, default=60.0, metavar="SECONDS",
             help="how often the merges so far are saved to DIR.checkpoint (default 60)")
    add_flag(p, "vocab_size", type=positive_int, metavar="N",
                   help="256 bytes + merges + special tokens; required")
    add_flag(p, "out", metavar="DIR", action=OneValue, two="outputs",
             help="the folder to save the tokenizer in; required")
    add_flag(p, "special_tokens", type=special_tokens_list, action="extend", default=[], metavar="T1,T2",
             help='special tokens, repeat or comma list, e.g. "<|endoftext|>,<|pad|>" (a token written like '
             '<|a,b|> is read whole; give one of another form that holds a comma with --special_token)')
    add_flag(p, "special_token", dest="special_tokens", type=one_special_token, action="append",
             metavar="TOKEN", help="one special token, taken whole, commas and all (e.g. [A,B]); repeat it for "
             "several")
    add_flag(p, "format", choices=SAVE_FORMATS, default="gpt2", help="file format (default gpt2)")
    add_flag(p, "num_workers", type=positive_int, metavar="K",
                   help="processes counting pre-tokens (default: all CPUs)")
    add_flag(p, "engine", choices=ENGINES, default="local",
             help="where pre-tokens are counted: local worker processes (default), or ray: tasks on a Ray "
             "cluster, counts added in a tree; the merges are learned here either way, and are the same")
    add_flag(p, "address", metavar="ADDR", help="with --engine ray: the cluster to use (e.g. auto); without it "
             "a local Ray cluster is started for the count and stopped after")

    p = command("parity", check_parity,
                "Check that this project's ids equal tiktoken's (or another tokenizer's, or a .bin dataset's) on "
                "your files, and show each difference: where, the pre-token, both sides' ids and pieces. "
                "Exit status 0: identical, 1: different, 2: a mistake.",
                "INPUT [INPUT ...] [options]  (or --fuzz N without INPUT)")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help=INPUTS_HELP)
    add_flag(p, "encoding", type=names_list, action="extend", metavar="NAME|PATH",
             help="encodings to check, registered names or paths (a tokenizer.json, its folder, a saved "
             "tokenizer's folder); repeat or comma list "
             f"(default: {','.join(parity.DEFAULT_ENCODINGS)}; with --ids, gpt2)")
    add_flag(p, "encodings", dest="encoding", type=names_list, action="extend", metavar="E1,E2",
             help="the same as --encoding (as stats and compare spell their list)")
    add_flag(p, "against", metavar="tiktoken|hf|PATH", action=OneValue, two="other sides",
             help="the other side: tiktoken (default; for a saved tokenizer tiktoken does not know, tiktoken's "
             "engine with its tables); hf: Hugging Face tokenizers reading the tokenizer.json that --encoding "
             f"names ({unbroken('pip install tokenizers')}); or a saved tokenizer (a tokenizer.json, its folder, "
             "a train --out folder) read by this project")
    add_flag(p, "ids", metavar="FILE.bin", action=OneValue, two="files of ids",
             help="instead, check this file of ids (nanoGPT's layout, as encode-file writes it: a text encoded "
             "whole, each .jsonl or .parquet document as encode_ordinary(text) + <|endoftext|>) against "
             "this project's encoding of the INPUTs, one after another; with --against, that encoding against "
             "the other side too, each input encoded as the ids were (--against hf: the ids against HF "
             "tokenizers). --allowed_special and --disallowed_special are a text file's rule, as encode-file's; an "
             "encode-dataset shard's is the one its manifest records, unless they are given")
    add_flag(p, "dtype", choices=["uint16", "uint32"],
             help="the type of the ids in --ids (default: uint16 up to 65,536 ids, else uint32)")
    add_flag(p, "json", action="store_true", help="print the report as JSON")
    add_text_field(p)
    add_flag(p, "max_report", type=positive_int, default=10, metavar="N",
             help="differences shown per input and encoding (default 10; all are counted)")
    add_flag(p, "fuzz", type=positive_int, metavar="N", help="also check N generated strings (mixed scripts, "
             "whitespace runs, contractions, surrogates, special-token fragments), each twice: special tokens "
             "as their ids and as plain text")
    add_flag(p, "seed", type=whole_number, default=0, metavar="S", help="the seed of --fuzz (default 0): same seed, "
             "same strings")
    add_specials(p)
    p.set_defaults(allowed_special=None, disallowed_special=None)  # told apart from typed ones: parity_flags
    add_errors(p, default=None)  # told apart from a typed one too: parity_reports

    p = command("serve", serve_playground,
                "Serve the tokenizer playground, a web page (and JSON API) that shows tokens in colour, their ids "
                "and bytes, the merges that built each and encodings side by side "
                f"({unbroken('gpt2 --serve --model 124M')} adds GPT-2's next token).", "[--port 8000] [options]")
    add_flag(p, "host", type=host_address, default="127.0.0.1",
             help="the address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every network this "
             "machine is on, e.g. a classroom's; the playground has no login)")
    add_flag(p, "port", type=port_number, default=8000, help="the port (default 8000; 0: any free port)")
    add_flag(p, "encoding", type=names_list, action="extend", metavar="NAME|PATH",
             help="the page's first encoding, and saved tokenizers (a tokenizer.json, its folder, a saved "
             "tokenizer's folder) to offer besides the registered "
             "encodings; repeat or comma list (default gpt2)")
    add_flag(p, "encodings", dest="encoding", type=names_list, action="extend", metavar="E1,E2",
             help="the same as --encoding (as stats and compare spell their list)")
    add_flag(p, "model", help=argparse.SUPPRESS)  # moved to gpt2 --serve: says so, then exits 2
    add_flag(p, "models_dir", help=argparse.SUPPRESS)
    parser.command_names = list(commands.choices)  # (for main's advice on options typed before the COMMAND)
    return parser


def options_before_command(argv: list[str], parser: OneLineParser) -> str | None:
    """The mistake of a command's options typed before the COMMAND (``--encoding gpt2 encode hi``), which argparse
    reports as an unknown command ("invalid choice: 'gpt2'"), said with the line as it should be; None when the
    first word is not such an option or no COMMAND follows."""
    first = argv[0] if argv else ""
    if not first.startswith("-") or first == "-" or first.split("=")[0] in ("-h", "--help", "--version", "--"):
        return None
    at = next((k for k, word in enumerate(argv) if word in parser.command_names), None)
    if at is None:
        return None
    command, options = argv[at:], argv[:at]
    end = command.index("--") if "--" in command else len(command)  # after --, every word is the TEXT
    reordered = " ".join(shlex.quote(word) for word in [*command[:end], *options, *command[end:]])
    return f"{' '.join(options)}: a command's options go after the COMMAND: {parser.prog} {reordered}"


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Run one command; returns the exit status (:mod:`tokenizer.command_line`'s rule: 0; 1 when parity finds a
    difference or a download failed; 2 for a mistake; 130 for Ctrl-C; 141 when the reader of stdout went away,
    as for a process killed by SIGPIPE)."""
    prog = prog or Path(sys.argv[0]).name
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(prog)
    misplaced = options_before_command(argv, parser)
    if misplaced:
        parser.error(misplaced)
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}; give a COMMAND first" if unknown
                     else "the following arguments are required: COMMAND")
    if unknown:  # reported by the command's parser, whose --help lists what it takes
        takes_text = "text" in vars(args)
        args.parser.error(unknown_arguments(unknown, argv, args.parser, command=args.command,
                                            text="TEXT" if takes_text else None,
                                            text_given=getattr(args, "text", None) is not None))
    missing = [label for dest, label in args.needs if getattr(args, dest) in (None, [])]
    if missing:
        args.parser.error(f"the following arguments are required: {', '.join(missing)}")
    if sys.stdout is None:  # started with stdout closed (>&-): every command prints there (a result, a summary)
        args.parser.error(STDOUT_CLOSED)
    # a download that failed, or a vocabulary file that fails its checksum: the command line was fine
    errors = [(DownloadError, EXIT_FAILED), (ChecksumError, EXIT_FAILED),
              (UsageError, EXIT_MISTAKE), (ValueError, EXIT_MISTAKE), (KeyError, EXIT_MISTAKE), (OSError, EXIT_MISTAKE)]
    with watched_stdout():  # stdout that cannot take the output (a full disk): one line naming it, exit 1
        return run_guarded(prog, lambda: run_command(args), errors=errors)


# How the commands write encode's two special-token options, for the advice of a refused special token: what to
# change is the library's to say (tokenizer.special_advice), how to write it the command line's.
FLAG_SPELLING = SpecialSpelling(
    allowed="--allowed_special", disallowed="--disallowed_special", allow_it="--allowed_special all (or that token)",
    allow_none="--allowed_special none", refuse_none="--disallowed_special none",
    refuse_all_but_it="",  # no flag says "every special token but this one" short of listing them
)


def run_command(args):
    """``args.run(args)``, with a refused special token's advice in flags rather than Python arguments."""
    try:
        return args.run(args)
    except ValueError as e:
        refusal = refusal_of(e)
        if refusal is None:
            raise
        raise UsageError(refusal.advice(FLAG_SPELLING)) from None
