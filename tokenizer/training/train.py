"""Train a byte-level BPE tokenizer from text files (CS336 assignment 1 semantics).

    vocab, merges = train_bpe("corpus.txt", 10_000, ["<|endoftext|>"])
    vocab, merges = train_bpe(["data/*.txt", "more.jsonl.gz"], 32_000, checkpoint="run.state")

The result is ``(vocab, merges)``: ``vocab`` maps ids to token bytes — ids 0..255 are the single bytes, then
one id per merge in the order the merges were learned, then the special tokens — and ``merges`` lists the
learned pairs ``(left, right)`` in that same order.

What is counted, exactly:

* Every input file is separate, and so is every document of a ``.jsonl``, ``.jsonl.gz`` or ``.parquet`` file
  (one record each, the text in its ``text_field``): nothing is counted across two of them.
* The text is cut at special tokens first (the longest one wins where two overlap); special tokens are hard
  boundaries and are never counted nor merged into anything.
* Each piece between special tokens is cut into pre-tokens with the regular expression ``pattern`` (GPT-2's by
  default). A pair of adjacent tokens is only ever counted inside one pre-token.
* Every step merges the most frequent pair; among pairs with the same count the lexicographically greater
  pair of byte strings wins, comparing ``(left_bytes, right_bytes)`` tuples. Inside a pre-token a merge
  replaces occurrences left to right without overlap (``a a a`` with the pair ``(a, a)`` becomes ``aa a``).
* Training stops at ``vocab_size`` entries, or earlier when no pair is left.

How it runs, in two phases, each in a module of its own:

1. Counting pre-tokens (:mod:`tokenizer.training.counting`): each file is cut into chunks of about
   ``chunk_size`` bytes at safe cuts (:mod:`tokenizer.training.chunks`), so the counts do not depend on the
   chunking; ``num_workers`` processes count the chunks and the counters are added up. Memory grows with the
   number of distinct pre-tokens, not with the size of the corpus.
2. Merging (:func:`tokenizer.training.fast_merges.learn_merges`): the merges of
   :func:`tokenizer.training.reference.learn_merges_reference` (the algorithm written plainly: read it first),
   learned incrementally on flat arrays (:mod:`tokenizer.training.merge_tables`) by a NumPy loop, or for a
   large job by the same loop compiled with numba (:mod:`tokenizer.training.train_kernel`, the ``train``
   extra). Tests check all three agree.

With ``checkpoint=FOLDER`` the counts and the merges so far are kept in a folder
(:mod:`tokenizer.training.checkpoint`), so that a run that was stopped can go on with ``resume=True``
(``python -m tokenizer train --resume``) and end with the same merges.

Inputs are found and read by :mod:`tokenizer.jobs.inputs`, as every file command finds and reads them. Text is
decoded as strict UTF-8 (training should not learn U+FFFD): invalid bytes raise :class:`ValueError` naming the
file and the byte offset. Line endings are not translated (``"\\r\\n"`` stays two characters).

This module learns merges only: :meth:`Encoding.from_vocab_merges` turns them into an encoder, and
:meth:`Encoding.save` writes them out.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable

from .checkpoint import checkpoint_settings, load_checkpoint, save_merges, start_checkpoint
from .chunks import find_chunk_boundaries
from .compiled_loop_loader import LOADER
from .counting import DEFAULT_CHUNK_SIZE, count_pretokens
from .fast_merges import learn_merges, wants_compiled_loop
from .reference import Merges, learn_merges_reference
from ..jobs.inputs import find_inputs, input_name, refuse_stdin
from ..patterns import WHITESPACE_CLASS as WHITESPACE  # this module's name for it: a class's contents
from ..pretokenize import GPT2_PATTERN

# train_bpe, and the names of the modules it drives that callers import from here. (The compiled loop's
# threshold is fast_merges.COMPILED_LOOP_MIN_WORK alone: a copy here would do nothing when set.)
__all__ = [
    "DEFAULT_CHUNK_SIZE", "LOADER", "Merges", "Vocab", "WHITESPACE", "count_pretokens", "find_chunk_boundaries",
    "learn_merges", "learn_merges_reference", "train_bpe",
]

Vocab = dict[int, bytes]


def train_bpe(
    inputs: str | os.PathLike | Iterable[str | os.PathLike],
    vocab_size: int,
    special_tokens: Iterable[str] | None = (),
    *,
    pattern: str = GPT2_PATTERN,
    text_field: str = "text",
    num_workers: int | None = None,
    progress: bool | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    checkpoint_every: float = 60.0,
    engine: str = "local",
    address: str | None = None,
) -> tuple[Vocab, Merges]:
    """Learn ``vocab_size - 256 - len(special_tokens)`` merges (or fewer) from UTF-8 text files.

    ``inputs`` names files, folders and globs (``"data/*.txt"``), or a list of them, found and read by
    :mod:`tokenizer.jobs.inputs` as every file command finds and reads them: a ``.jsonl``, ``.jsonl.gz`` or
    ``.parquet`` file holds one document per record (its ``text_field``); any other file is plain text, strict
    UTF-8 (training should not learn U+FFFD). Each file and each document is separate,
    as if a special token stood between them: no pair is counted across two of them. Standard input is not
    read here (the inputs are read in parallel, and again to resume): copy it to a file first.

    ``special_tokens`` are strings; each gets an id after the merges, in the order given (duplicates are dropped;
    None is none, as for :class:`tokenizer.Tokenizer`). ``pattern`` is the pre-tokenization regex (``regex``
    package syntax). ``num_workers`` processes count pre-tokens (default: ``os.cpu_count()``); ``chunk_size`` is
    the target size in bytes of the pieces of the files they get. ``progress`` shows tqdm bars (default: when
    stderr is a terminal, so a log or a notebook's captured stderr gets none; ``True`` or ``False`` decides). The
    result does not depend on ``num_workers`` or ``chunk_size``.

    ``checkpoint`` is a folder where the training state is kept: the pre-token counts once counted, and the
    merges so far every ``checkpoint_every`` seconds, each file replaced atomically. With ``resume=True`` a run
    starts from that state (same inputs, sizes, pattern, special tokens and text field, or ``ValueError``; a state
    file there but unreadable is an ``OSError`` that names it,
    :class:`~tokenizer.training.checkpoint.UnreadableState`) and ends with the merges an uninterrupted run gives.

    ``engine="ray"`` counts the pre-tokens as tasks on a Ray cluster (``address``, or a local one started for
    the count), see :func:`count_pretokens`; the merges are learned here either way, and are the same.

    Raises ``ValueError`` when ``vocab_size`` is below the minimum (256 + number of special tokens), when the
    input is empty, not valid UTF-8 or a bad record (the message names the file and line);
    ``FileNotFoundError`` when a file does not exist or a glob matches nothing.
    """
    specials = _check_special_tokens(special_tokens)
    minimum = 256 + len(specials)
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool):
        raise TypeError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    if vocab_size < minimum:
        raise ValueError(
            f"vocab_size={vocab_size} is too small: the minimum is {minimum} "
            f"(256 single bytes + {len(specials)} special token(s))"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    found = find_inputs(inputs)
    refuse_stdin(found, "training reads its inputs in parallel, and again to resume")
    paths = [os.fspath(p) for p in found]
    if not any(os.path.getsize(p) for p in paths):
        # (named as given: standard input, which the train command copies to a temporary file, as stdin)
        which = repr(input_name(paths[0])) if len(paths) == 1 else f"all {len(paths)} inputs"
        raise ValueError(f"training file is empty: {which} (nothing to learn merges from)")

    if progress is None:
        progress = sys.stderr.isatty()
    num_merges = vocab_size - minimum
    # A file's size bounds the bytes of its distinct pre-tokens (a compressed file's need not: learn_merges
    # starts the compiled loop's way in for it once the counts say so).
    large = wants_compiled_loop(sum(map(os.path.getsize, paths)) * num_merges)
    if large:
        LOADER.start_compiling()  # before the workers are forked; a process of its own, if it has to compile
    settings = checkpoint_settings(paths, specials, pattern, text_field)
    if resume:
        if checkpoint is None:
            raise ValueError("resume=True needs the checkpoint folder of the run to resume")
        counts, replay = load_checkpoint(os.fspath(checkpoint), settings)
    else:
        counts = count_pretokens(
            paths, specials, pattern=pattern, text_field=text_field, num_workers=num_workers, progress=progress,
            chunk_size=chunk_size, engine=engine, address=address,
            while_counting=LOADER.start_loading if large else lambda: None,  # after the workers are forked
        )
        replay = []
        if checkpoint is not None:
            start_checkpoint(os.fspath(checkpoint), settings, counts)
    save = None if checkpoint is None else functools.partial(save_merges, os.fspath(checkpoint))
    merges = learn_merges(counts, num_merges, progress=progress, replay=replay, save=save,
                          save_every=checkpoint_every, loader=LOADER)

    vocab: Vocab = {i: bytes([i]) for i in range(256)}
    for left, right in merges:
        vocab[len(vocab)] = left + right
    for s in specials:
        vocab[len(vocab)] = s.encode("utf-8")
    return vocab, merges


def _check_special_tokens(special_tokens: Iterable[str] | None) -> list[str]:
    if special_tokens is None:  # none, as tokenizer.Tokenizer reads None
        return []
    if isinstance(special_tokens, (str, bytes)):
        raise TypeError("special_tokens must be a list of strings, not a single string")
    out: list[str] = []
    for s in special_tokens:
        if not isinstance(s, str):
            raise TypeError(f"special tokens must be str, got {type(s).__name__}: {s!r}")
        if not s:
            raise ValueError("a special token cannot be the empty string")
        if is_single_byte(s):  # said before the training, not by Encoding.from_vocab_merges after it
            raise ValueError(f"special token {s!r} is one byte, {s.encode()!r}, which ordinary text needs as its "
                             "own token (a special token's bytes are never one): use two or more characters, "
                             "such as <|...|>")
        if s not in out:
            out.append(s)
    return out


def is_single_byte(special_token: str) -> bool:
    """Whether ``special_token`` is one byte in UTF-8 (one ASCII character). Such a token cannot be special: its
    bytes would be that byte's own token, which a special token's never are (Encoding.from_vocab_merges gives
    special tokens ids of their own), and byte-level BPE needs all 256 single bytes to encode any text."""
    return len(special_token) == 1 and special_token.isascii()
