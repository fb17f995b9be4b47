"""The command line: ``python -m tokenizer COMMAND ...`` (built with fire).

    python -m tokenizer encode "hello world"               # 31373 995
    python -m tokenizer decode 31373 995                   # hello world
    python -m tokenizer count FILE [--encoding cl100k_base]
    python -m tokenizer train --input FILE --vocab_size N [--special_tokens "<|endoftext|>"] --out DIR
    python -m tokenizer encode-file INPUT --out OUT.bin [--workers N]
    python -m tokenizer stats FILE...
    python -m tokenizer show "text"  |  explain "text"  |  compare "text"

Each command is a function below; errors a user can cause (unknown encoding, missing file, unknown id) print
one line on stderr and exit with status 2 instead of a traceback.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .registry import get_encoding


class UsageError(Exception):
    """An error in what the user asked for: printed as one line, exit status 2."""


def encode(text, *, encoding: str = "gpt2", allowed_special: str = "none") -> None:
    """Print the ids of TEXT, separated by spaces."""
    enc = get_encoding(encoding)
    allowed = "all" if allowed_special == "all" else set()
    print(" ".join(map(str, enc.encode(str(text), allowed_special=allowed, disallowed_special=()))))


def decode(*tokens, encoding: str = "gpt2") -> None:
    """Print the text of the ids given (as separate arguments or one space-separated string)."""
    ids = []
    for t in tokens:
        for part in str(t).replace(",", " ").split():
            try:
                ids.append(int(part))
            except ValueError:
                raise UsageError(f"decode takes integer token ids, got {part!r}") from None
    print(get_encoding(encoding).decode(ids))


def count(*files, encoding: str = "gpt2") -> None:
    """Print tokens, bytes and bytes/token for each FILE (special-token text counted as plain text)."""
    if not files:
        raise UsageError("count needs at least one FILE")
    enc = get_encoding(encoding)
    for name in files:
        data = _read_bytes(name)
        start = time.perf_counter()
        n_tokens = len(enc.encode_ordinary(data.decode("utf-8", errors="replace")))
        seconds = time.perf_counter() - start
        per_token = len(data) / n_tokens if n_tokens else 0.0
        print(
            f"{name}: {n_tokens:,} tokens, {len(data):,} bytes, {per_token:.3f} bytes/token "
            f"({encoding}, {len(data) / 1e6 / max(seconds, 1e-9):.1f} MB/s)"
        )


def _read_bytes(name) -> bytes:
    path = Path(str(name))
    if not path.is_file():
        raise UsageError(f"no such file: {path}")
    return path.read_bytes()


def train(**kwargs) -> None:
    """Train a BPE tokenizer on a file; see tokenizer/train.py."""
    from .train import cli_train

    cli_train(**kwargs)


def encode_file(*args, **kwargs) -> None:
    """Encode a text file into a flat .bin of token ids; see tokenizer/dataset.py."""
    from .dataset import cli_encode_file

    cli_encode_file(*args, **kwargs)


def stats(*args, **kwargs) -> None:
    """Bytes/token per encoding per file, and throughput; see tokenizer/dataset.py."""
    from .dataset import cli_stats

    cli_stats(*args, **kwargs)


def show(*args, **kwargs) -> None:
    """The text with token boundaries coloured, ids below; see tokenizer/teach.py."""
    from .teach import cli_show

    cli_show(*args, **kwargs)


def explain(*args, **kwargs) -> None:
    """Each pre-token's merges, step by step; see tokenizer/teach.py."""
    from .teach import cli_explain

    cli_explain(*args, **kwargs)


def compare(*args, **kwargs) -> None:
    """Token counts and splits across gpt2, cl100k and o200k; see tokenizer/teach.py."""
    from .teach import cli_compare

    cli_compare(*args, **kwargs)


COMMANDS = {
    "encode": encode,
    "decode": decode,
    "count": count,
    "train": train,
    "encode-file": encode_file,
    "stats": stats,
    "show": show,
    "explain": explain,
    "compare": compare,
}


def main(argv: list[str] | None = None) -> int:
    import fire

    try:
        fire.Fire(COMMANDS, command=argv, name="python -m tokenizer")
    except (UsageError, ValueError, KeyError, FileNotFoundError, OSError) as e:
        message = e.args[0] if isinstance(e, KeyError) and e.args else e
        print(f"error: {message}", file=sys.stderr)
        return 2
    return 0
