"""What both commands (``gpt2-tokenizer`` and ``gpt2``) share about being a command: the parser whose mistakes
are one line, flags spelt with underscores or dashes, the exit statuses, and how a run ends on Ctrl-C, on a
reader that went away (``| head``) or on an error.

    parser = OneLineParser(prog="gpt2", allow_abbrev=False)
    add_flag(parser, "top_k", type=whole_number)        # --top_k, and --top-k kept out of the help text
    return run_guarded(prog, lambda: work(args), errors=[(UsageError, EXIT_MISTAKE)])

The exit statuses, one rule for both commands:

* 0 done; 1 the command line was fine but the work failed: a download, a damaged file, stdout on a full disk
  (``parity``: the ids differ); 2 a mistake in what was asked (a flag, a missing or unreadable input, bad
  input), said before any work where it can be; 130 Ctrl-C; 141 the reader of stdout went away, as for a process
  killed by SIGPIPE.

Every error is one line, ``PROG: error: WHAT; what to do``, never a traceback. Progress bars go to stderr,
and only when a person is watching it (:func:`show_progress`).

What this module does not do: declare any command's flags, or read input (:mod:`tokenizer.text_input`).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import difflib
import errno
import functools
import math
import os
import re
import shlex
import signal
import socket
import sys
import textwrap
import threading

EXIT_OK = 0
EXIT_FAILED = 1  # the work could not be done (a download, a damaged file), or parity found a difference
EXIT_MISTAKE = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130, as a shell reports a process Ctrl-C stopped
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141


class UsageError(Exception):
    """A mistake in what the user asked for: printed as one line, exit status 2."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what to do next: printed after "interrupted; ", exit status 130."""


# a space inside a command that help text quotes (pip install 'numba>=0.59'): the formatter wraps lines only at
# other spaces, then prints it as a plain space, so that the command stays on one line and copies as typed
UNBROKEN_SPACE = "\xa0"
ASCII_WHITESPACE = re.compile(r"[ \t\n\r\f\v]+")  # str.split() would also split at UNBROKEN_SPACE


def unbroken(command: str) -> str:
    """``command`` as help text that the help's line wrapping keeps on one line (:class:`PathFriendlyFormatter`)."""
    return command.replace(" ", UNBROKEN_SPACE)


class PathFriendlyFormatter(argparse.HelpFormatter):
    """Help text wrapped only at spaces, so a path such as ~/.cache/gpt2-numpy stays whole to copy, and never
    inside a command marked :func:`unbroken`; in the description and the epilog, a line that starts with spaces
    is an example command, printed as it is, so that one copied from there holds no line break."""

    def _split_lines(self, text, width):
        lines = textwrap.wrap(ASCII_WHITESPACE.sub(" ", text).strip(), width, break_on_hyphens=False,
                              break_long_words=False)
        return [line.replace(UNBROKEN_SPACE, " ") for line in lines]

    def _fill_text(self, text, width, indent):
        def filled(line):
            return textwrap.fill(ASCII_WHITESPACE.sub(" ", line).strip(), width, initial_indent=indent,
                                 subsequent_indent=indent, break_on_hyphens=False, break_long_words=False)

        lines = (indent + line if line.startswith(" ") else filled(line) for line in text.split("\n"))
        return "\n".join(lines).replace(UNBROKEN_SPACE, " ")


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a mistake reported as one line (what is wrong, where to look) instead of the usage text,
    and help wrapped by :class:`PathFriendlyFormatter` (a subcommand's parser too: argparse gives each its own
    formatter_class, so the default is set here, where both commands' parsers are made)."""

    def __init__(self, *args, formatter_class=PathFriendlyFormatter, **options):
        self.shown_flags = []  # the flags --help lists, for the advice of a misspelt one (set before argparse adds -h)
        # other tools' flags for what one of ours does (--max_new_tokens: --n_tokens_to_generate), named in the
        # advice for one typed here, where the likeness of the names alone would point elsewhere
        self.flags_elsewhere: dict[str, str] = {}
        super().__init__(*args, formatter_class=formatter_class, **options)

    def add_argument(self, *names, **options):
        if options.get("help") is not argparse.SUPPRESS:
            self.shown_flags += [name for name in names if name.startswith("-")]
        return super().add_argument(*names, **options)

    def error(self, message: str):
        self.exit(EXIT_MISTAKE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def show_progress() -> bool:
    """Progress bars (tqdm, on stderr) when a person is watching; logs and pipes get none."""
    return sys.stderr.isatty()


SLOW_AFTER_SECONDS = 1.5  # a wait longer than this says what it is (said_if_slow)
# Off a terminal (a log, CI) a step is announced by its size, never by a timer: a line that comes or not with the
# machine's speed would make logs, and tests that compare stderr exactly, differ from run to run. A step that
# reads, checks, converts or writes at least this many bytes says so at its start. Why a GiB: 1558M's first load
# checks its 6 GB of weights in about 10 s (gpt2_numpy/checkpoints.py), 0.6 GB/s, so a GiB takes about the 2 s
# that nothing waits in silence; 124M's 0.5 GB stays quiet, 355M's 1.4 GB and up speak.
SLOW_BYTES = 1 << 30


@contextlib.contextmanager
def said_if_slow(what: str, *, n_bytes: int = 0):
    """Say ``what ...`` on stderr if the block is still running after SLOW_AFTER_SECONDS, when a person is
    watching (as progress bars): nothing waits more than 2 s in silence, and a quick block says nothing. Off a
    terminal, said at the block's start when it handles ``n_bytes`` >= SLOW_BYTES (said_if_large)."""
    if not show_progress():
        said_if_large(what, n_bytes)
        yield
        return
    timer = threading.Timer(SLOW_AFTER_SECONDS, lambda: say(f"{what} ..."))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def said_if_large(what: str, n_bytes: int) -> None:
    """Off a terminal, ``what ...`` on stderr now if the step about to start handles at least SLOW_BYTES (see
    SLOW_BYTES: decided by size, so a log says the same on every machine); on a terminal, nothing (said_if_slow
    and bar_if_slow speak there, after SLOW_AFTER_SECONDS)."""
    if n_bytes >= SLOW_BYTES and not show_progress():
        say(f"{what} ...")


def say(line: str) -> None:
    """``line`` on stderr, above any progress bar being drawn there (tqdm.write clears it and draws it again
    below), so that a notice from another thread never lands in the middle of a bar."""
    tqdm_module = sys.modules.get("tqdm")  # (no bar is drawn unless tqdm was imported)
    if tqdm_module is None:
        print(line, file=sys.stderr, flush=True)
    else:
        tqdm_module.tqdm.write(line, file=sys.stderr)


def bar_if_slow(iterable=None, **options):
    """A tqdm bar on stderr (``options`` as tqdm's: total, desc, unit...) drawn when a person is watching (as
    progress bars) and only once the work has taken SLOW_AFTER_SECONDS, as said_if_slow speaks: a quick job shows
    none, and the bar is erased when done."""
    from tqdm import tqdm  # imported here: ~0.1 s, and most runs draw no bar

    hidden = options.pop("disable", False)  # a caller's own reason for no bar (its output on the same terminal)
    return tqdm(iterable, disable=hidden or not show_progress(), leave=False, delay=SLOW_AFTER_SECONDS, **options)


class PrintVersion(argparse.Action):
    """``--version``: print :func:`version_line` on stdout and exit 0, as ``--help`` does (argparse's own version
    action would rewrap the line to the terminal's width, cutting the folder's path in two)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line(parser.prog), flush=True)
        parser.exit(EXIT_OK)


def version_line(prog: str) -> str:
    """What ``PROG --version`` says: the version, and the two things a bug report needs beside it: the folder the
    code runs from (an installed copy's site-packages or a checkout) and the Python that runs it."""
    from .version import VERSION

    packages_folder = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return f"{prog} {VERSION} (gpt2-numpy, from {packages_folder}; Python {sys.version.split()[0]})"


def add_version_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=PrintVersion,
                        help="print the version of gpt2-numpy, where it runs from and the Python, then exit")


def add_flag(parser: argparse.ArgumentParser, name: str, **options) -> None:
    """``--name``, and its dashed spelling (``--vocab-size`` for ``--vocab_size``) kept out of the help text."""
    dest = options.pop("dest", name)
    parser.add_argument(f"--{name}", dest=dest, **options)
    if "_" in name:
        hidden = {**options, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
        parser.add_argument(f"--{name.replace('_', '-')}", dest=dest, **hidden)


def unrecognized(unknown: list[str], argv: list[str], *, prog: str, text: str, text_given: bool) -> str:
    """The message for arguments argparse did not take, with the likely reason: a ``text`` (the PROMPT, the
    TEXT) that starts with a dash goes after ``--``; after ``--`` everything is text, so options go before it."""
    message = f"unrecognized arguments: {' '.join(unknown)}"
    if "--" in argv:
        after = argv[argv.index("--") + 1:]
        if any(word in after for word in unknown):
            return (f"{message}; everything after -- is the {text}, one argument: put the options before --, "
                    f"and quote a {text} of several words")
    if not text_given and unknown[0].startswith("-"):  # most likely a text that starts with a dash
        return f"{message}; a {text} that starts with a dash goes after --: {prog} -- {shlex.quote(unknown[0])}"
    return message


def not_an_option(unknown: list[str], argv: list[str], parser: OneLineParser, *, command: str,
                  text_missing: bool = False) -> str | None:
    """The message for the first word of ``unknown`` (what argparse did not take) that is a flag typed before
    any ``--``, naming the nearest flag ``parser`` has: ``show --encodings gpt2 hi`` took gpt2 for the TEXT and
    left "--encodings hi", where the mistake is --encodings. None when no such word is unknown, or when a TEXT is
    ``text_missing`` and no flag is like the word: most likely a TEXT that starts with a dash (:func:`unrecognized`
    says how to give one)."""
    options = argv[:argv.index("--")] if "--" in argv else argv
    flag = next((word for word in unknown if word.startswith("-") and word != "-" and word in options), None)
    if flag is None:
        return None
    name = flag.split("=", 1)[0]
    # a flag cut short (argparse takes no abbreviation here) is the one it starts: --temp is --temperature, which
    # difflib's likeness alone would rank below --stream
    extended = [shown for shown in parser.shown_flags if shown.startswith(name) and len(name) > len("--")]
    ours = parser.flags_elsewhere.get("--" + name.lstrip("-").replace("-", "_"))  # (--max-new-tokens too)
    if ours is not None:
        nearest = [ours]
    elif len(extended) == 1:
        nearest = extended
    else:
        nearest = difflib.get_close_matches(name, parser.shown_flags, n=1, cutoff=0.6)
    if text_missing and not nearest:
        return None
    advice = f"; did you mean {nearest[0]}?" if nearest else ""
    return f"{name} is not an option of {command}{advice}"


class OneValue(argparse.Action):
    """An option that names the one thing a command reads or writes (``--encoding`` where a command takes one, an
    output, a model): argparse's "store", but the option typed again with another value is a mistake, said in one
    line naming both (``two``: what they name, plural: "encodings"), where argparse would silently use the last.

    Why only these, and not every option: a number or a switch typed twice follows the Unix rule that the last
    wins, which an alias or a script relies on to let a typed option override its own (``alias gpt2='gpt2
    --temperature 0.8'``, then ``gpt2 --temperature 0 hi``). Two encodings, outputs or models are never that: where
    other commands take a repeated ``--encoding`` as one more, the user asked for two; two outputs are a command
    line edited halfway; and the last one used is work done on, or a file written into, what the user may not
    have meant. The same value twice is no mistake, and is taken."""

    def __init__(self, option_strings, dest, *, two: str, **options):
        super().__init__(option_strings, dest, **options)
        self.two = two

    def __call__(self, parser, namespace, values, option_string=None):
        typed = vars(namespace).setdefault("typed_once", {})  # dest -> (flag, value) as first typed
        if self.dest in typed and typed[self.dest][1] != values:
            earlier_flag, earlier = typed[self.dest]
            parser.error(f"{earlier_flag} {shlex.quote(str(earlier))} and {option_string} "
                         f"{shlex.quote(str(values))} name two {self.two}, where one is used: pass one of them")
        typed.setdefault(self.dest, (option_string, values))
        setattr(namespace, self.dest, values)


def unknown_arguments(unknown: list[str], argv: list[str], parser: OneLineParser, *, command: str,
                      text: str | None = None, text_given: bool = False) -> str:
    """The one message both commands give for the arguments argparse did not take (``unknown``): a flag typed
    before any ``--`` named with the nearest flag ``parser`` has (:func:`not_an_option`); else, for a command that
    takes a ``text`` (the PROMPT, the TEXT; None for one that takes none), how to give one that starts with a
    dash (:func:`unrecognized`); else argparse's own words. One rule in one place: ``gpt2 hi --top_kk 5`` and
    ``gpt2-tokenizer show --encodings gpt2 hi`` are the same mistake, said the same way."""
    misspelt = not_an_option(unknown, argv, parser, command=command, text_missing=text is not None and not text_given)
    if misspelt is not None:
        return misspelt
    if text is None:
        return f"unrecognized arguments: {' '.join(unknown)}"
    return unrecognized(unknown, argv, prog=parser.prog, text=text, text_given=text_given)


def comma_readings(joined: str, is_name, *, widest: int | None = None, may_go_on=None) -> list[list[str]]:
    """The ways, at most two, to read ``joined`` as names joined by commas when a name may hold commas itself (a
    path, a saved folder's name): a name is a run of the parts between commas, joined again and stripped, that
    ``is_name`` accepts (``widest``: the most parts one name spans, None for any); a blank part is no name
    (``a, b,`` is a and b). The longest name at each part is tried first, so the first reading takes a name that
    holds commas whole. One rule for every list that may hold such names: a command's ``--encodings my,tok,gpt2``
    beside a folder ``my,tok`` (the first reading), the playground's ``encodings=a,b`` (refused if two).
    ``may_go_on(text)``: whether a name can start with ``text`` and a comma (None: any may), for a caller whose
    check of a name costs (a path's): a run of parts stops growing there, so that a long list costs a few checks
    per part instead of one per run of parts (300 parts: 45,000 runs).

    >>> comma_readings("gpt2,my,tok", {"gpt2", "my", "tok", "my,tok"}.__contains__)
    [['gpt2', 'my,tok'], ['gpt2', 'my', 'tok']]
    """
    parts = joined.split(",")
    widest = len(parts) if widest is None else widest
    is_name = functools.cache(is_name)  # (the count and the walks below ask of a name again: a path is a stat)

    @functools.cache  # (the count and the walks below ask again)
    def names_at(start: int) -> list[tuple[int, str]]:
        """``(end, name)`` of each name that can start at part ``start``, longest first ("" for a blank part)."""
        found, text = [], parts[start]
        for end in range(start + 1, min(start + widest, len(parts)) + 1):
            if end > start + 1:
                text += "," + parts[end - 1]
            name = text.strip()
            if (name and is_name(name)) or (not name and end == start + 1):
                found.append((end, name))
            if may_go_on is not None and not may_go_on(text.lstrip()):
                break
        return found[::-1]

    ways = [0] * len(parts) + [1]  # ways[i]: how many readings parts[i:] has, counted up to 2
    for start in reversed(range(len(parts))):
        ways[start] = min(2, sum(ways[end] for end, _ in names_at(start)))
    readings = []
    for which in range(ways[0]):  # the first reading, then the second: walk the parts, choosing a name each step
        reading, start, skip = [], 0, which
        while start < len(parts):
            for end, name in names_at(start):
                if skip < ways[end]:
                    break
                skip -= ways[end]
            reading += [name] if name else []
            start = end
        readings.append(reading)
    return readings


def ascii_digits(value: str) -> bool:
    """Whether ``value`` is a whole number as people type one, in the digits 0-9: int() also reads "1_000", "+5"
    and other scripts' digits ("٤"), and str.isdigit takes "²", which int() then refuses."""
    return value.isascii() and value.isdigit()


# The most digits an option's number is read with: no count, size, index, port or seed needs more, and int()
# refuses numbers of over 4,300 digits with advice (sys.set_int_max_str_digits) no one at a command line can take.
OPTION_DIGITS = 40


def typed_number(value: str, expected: str) -> int:
    """An option's whole number as typed: int() of the digits 0-9 (after a minus, for the option's own check to
    refuse a negative number with its own message), at most OPTION_DIGITS of them; argparse's error saying
    ``expected`` otherwise, a long value shortened."""
    digits = value.removeprefix("-")
    if not ascii_digits(digits):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {shown_typed(value)}")
    if len(digits) > OPTION_DIGITS:
        raise argparse.ArgumentTypeError(f"expected {expected} of at most {OPTION_DIGITS} digits, got "
                                         f"{shown_typed(value)}")
    return int(value)


def shown_typed(value: str) -> str:
    """``value`` quoted for a message, its middle left out when it is long (a line, not a screenful)."""
    if len(value) <= 2 * OPTION_DIGITS:
        return repr(value)
    return f"{value[:10] + '...' + value[-10:]!r} ({len(value):,} characters)"


def whole_number(value: str) -> int:
    """argparse's ``type`` for an option that takes a whole number: :func:`typed_number`."""
    return typed_number(value, "a whole number (digits 0-9)")


# A decimal number as people type one: digits 0-9, at most one point, and an exponent (0.8, .5, 2., 1e-3)
DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def decimal_digits(value: str) -> bool:
    """Whether ``value`` is a decimal number as people type one (DECIMAL; no sign): float() also reads "1_0",
    other scripts' digits ("١"), spaces around it, "+1", "nan" and "infinity", none of which is typed as one."""
    return DECIMAL.fullmatch(value) is not None


def decimal_number(value: str) -> float:
    """argparse's ``type`` for an option that takes a decimal number: float() of decimal_digits only (a minus is
    read, for the option's own check to refuse a negative number with its own message), and finite: nan, inf
    and a number past float's range ("1e999") mean nothing as a temperature or a probability."""
    number = float(value) if decimal_digits(value.removeprefix("-")) else math.nan
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a decimal number (digits 0-9 and a point, e.g. 0.8), got {value!r}")
    return number


def cannot_print(error: BaseException) -> str | None:
    """The one-line message for an error that is the output failing to print, because stdout's encoding (say
    ``PYTHONIOENCODING=ascii``, or a Latin-1 locale) cannot hold a character of it; None for any other error.

    An error of the work itself that a ``UnicodeEncodeError`` could be (a lone surrogate) names UTF-8, which every
    character but those fits: stdout in UTF-8 is never the cause."""
    stream_encoding = getattr(sys.stdout, "encoding", None)
    if not isinstance(error, UnicodeEncodeError) or not stream_encoding:
        return None
    try:
        stream_codec, error_codec = codecs.lookup(stream_encoding).name, codecs.lookup(error.encoding).name
    except LookupError:
        return None
    if stream_codec != error_codec or stream_codec == "utf-8":
        return None
    character = error.object[error.start]
    return (f"the output holds {character!r} (U+{ord(character):04X}), which stdout's encoding, {stream_encoding}, "
            "cannot print: set PYTHONIOENCODING=utf-8 to have it printed (or written into a file) as UTF-8")


def error_message(error: BaseException) -> str:
    """One line for an error: a ``KeyError``'s message without its quotes, an ``OSError`` without ``[Errno N]``
    and with the file it names."""
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    if isinstance(error, OSError) and error.strerror and error.filename is not None:
        return f"{error.filename}: {error.strerror}"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def host_address(value: str) -> str:
    """argparse's ``type`` for a server's ``--host``: the address as typed, refused when empty. An empty host is
    Python's every network (0.0.0.0) to a socket, and most likely a variable that was not set (``--host "$HOST"``):
    a page with no login would then be served to every network this machine is on, unasked."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"expected an address, got {value!r}; pass 127.0.0.1 (this machine only), "
                                         "0.0.0.0 (every network) or one of this machine's own addresses")
    return value


def cannot_listen(error: OSError, host: str, port: int) -> str:
    """Why a server could not start on ``host:port``, blaming the one that is wrong, and what to pass instead."""
    reason = error.strerror or str(error)
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host}: not an address of this machine ({reason}); pass 127.0.0.1 (this machine only), "
                "0.0.0.0 (every network) or one of its own addresses")
    return f"cannot listen on {host}:{port} ({reason}); pass another --port, or --port 0 for any free one"


class StdoutFailed(Exception):
    """stdout could not take the output (a full disk, an I/O error): the work failed, exit status 1, with a message
    that names stdout, where a bare "No space left on device" could be any file's; ``reason`` is that message's
    own words."""

    def __init__(self, reason: str, message: str | None = None):
        super().__init__(message or f"cannot write the output to stdout: {reason}")
        self.reason = reason


@contextlib.contextmanager
def stdout_named():
    """Run the block, its failure to write stdout (an OSError; not a reader gone away, which ends the command
    quietly) raised as :class:`StdoutFailed`. Wrap only writes to stdout: an OSError of anything else is not
    stdout's."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutFailed(error_message(error)) from None


@contextlib.contextmanager
def summary_of(written: str):
    """Run the block that prints a command's summary of the file(s) it wrote, and flush it: stdout that cannot take
    the summary (a full disk) then says so, and ``written`` ("the tokenizer is saved in tok"): a bare "cannot write
    the output to stdout" reads as if the file were lost too."""
    try:
        yield
        sys.stdout.flush()  # (a file's stdout is block-buffered: a print alone fails at exit, with no block around)
    except StdoutFailed as failure:
        raise StdoutFailed(failure.reason, f"cannot write the summary to stdout: {failure.reason}; {written} all "
                           "the same") from None


# A command started with stdout closed (>&-): Python leaves no stream to print to, and every command prints there
STDOUT_CLOSED = "stdout is closed, and the output is printed there: give it a file (> out.txt), or /dev/null to drop it"


class WatchedStdout:
    """A text stream (sys.stdout) whose writes and flushes that fail are :class:`StdoutFailed`; everything else
    is the stream's. A print anywhere in a command then fails naming stdout (see :func:`watched_stdout`)."""

    def __init__(self, stream):
        self.stream = stream

    def __getattr__(self, name):
        return getattr(self.stream, name)

    def write(self, text):
        with stdout_named():
            return self.stream.write(text)

    def writelines(self, lines):
        with stdout_named():
            self.stream.writelines(lines)

    def flush(self):
        with stdout_named():
            self.stream.flush()


@contextlib.contextmanager
def watched_stdout():
    """sys.stdout as a :class:`WatchedStdout` for the block (none when stdout is closed), then as it was."""
    stream = sys.stdout
    if stream is not None:
        sys.stdout = WatchedStdout(stream)
    try:
        yield
    finally:
        if stream is not None and isinstance(sys.stdout, WatchedStdout) and sys.stdout.stream is stream:
            sys.stdout = stream


def run_guarded(prog: str, body, *, errors: list[tuple[type, int]], wording=lambda message: message) -> int:
    """``body()`` (its exit status, None for 0), ended the way every command ends: Ctrl-C is one line and 130
    (with what to do next, for :class:`Interrupted`); a reader that went away ends it quietly with 141; an
    error of a class in ``errors`` (``(class, status)`` pairs, the first that matches; a status may be a
    function of the error) is one line, ``wording(message)``, and that status. Anything else is a
    bug, and keeps its traceback. stdout that cannot take the output (:class:`StdoutFailed`; a full disk) is one
    line and 1."""
    try:
        status = body()
        sys.stdout.flush()  # here, so that a reader gone away is seen here, not at exit
    except KeyboardInterrupt as e:
        said = f"; {e}" if isinstance(e, Interrupted) else ""
        print(f"{prog}: interrupted{said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Stop quietly, as Unix tools do, with the status of a process killed by SIGPIPE (141 in a shell), which
        # no command gives otherwise. Python ignores SIGPIPE, so it is said with the status; stdout goes to
        # /dev/null so the exit's flush raises nothing more.
        with contextlib.suppress(OSError, ValueError):  # a stdout without a file (a test's) needs nothing
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except StdoutFailed as e:  # the machine's failure, not a mistake in what was asked
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as e:
        unprintable = cannot_print(e)
        if unprintable:  # the output, not the input, is at fault: say how to get it
            print(f"{prog}: error: {unprintable}", file=sys.stderr)
            return EXIT_MISTAKE
        status = next((code for kind, code in errors if isinstance(e, kind)), None)
        if status is None:
            raise
        print(f"{prog}: error: {wording(error_message(e))}", file=sys.stderr)
        return status(e) if callable(status) else status
    return status or EXIT_OK
