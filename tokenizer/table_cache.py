"""The tables of batch BPE and the array path, kept on disk: built once per vocabulary, loaded by every later
process.

:func:`tokenizer.batch_bpe.build_pair_table` cuts every token of a vocabulary at every position, which takes
a noticeable moment for the large vocabularies; a fresh process that meets new text would pay it on its
first call. So the table is saved under the user's cache folder (:func:`tokenizer.user_cache.cache_dir`,
which ``$TOKENIZER_CACHE_DIR`` overrides), named by the SHA-256 of the vocabulary it was built from (every token's
bytes, id and merge priority), and loaded from there next time:

    >>> from tokenizer import get_encoding
    >>> enc = get_encoding("gpt2")
    >>> from tokenizer.batch_bpe import pairs_of
    >>> table = load_or_build(enc.merge_ranks, enc.token_ids)
    >>> len(pairs_of(table))  # every (left id, right id) whose bytes join into a GPT-2 token
    108299

The same file holds the vocabulary's :class:`tokenizer.piece_arrays.PieceTable` (every token by its bytes),
which the array path looks pieces up in: :func:`load_or_build_tables` gives both.

A file is written whole to a temporary name and then renamed, so a reader never sees half of one. A file that
cannot be read, fails its zip checksums, or was built from another vocabulary (its stored digest differs) is
ignored and replaced. A cache folder that cannot be written only costs the saving: the table is still built.

This module does not decide when batch BPE runs (:mod:`tokenizer.encoding` does) nor what the table holds
(:mod:`tokenizer.batch_bpe` does).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from contextlib import suppress
from itertools import compress, repeat
from operator import is_not
from pathlib import Path
from typing import Mapping

import numpy as np

from .batch_bpe import PairTable, build_pair_table
from .piece_arrays import PieceTable
from .user_cache import cache_dir

# Bump when PairTable's or PieceTable's fields or their meaning change: older files then match no digest.
FORMAT_VERSION = 2

_ARRAY_FIELDS = (
    "slot_keys", "slot_ranks", "slot_merged", "byte_ids", "byte_pair_ranks", "byte_pair_merged", "boundary_rank"
)
_NUMBER_FIELDS = ("slot_bits", "n_ids", "no_merge")


def vocabulary_digest(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> str:
    """SHA-256 (hex) of everything the pair table is built from: each token's bytes, id and merge priority."""
    tokens = list(token_ids)
    digest = hashlib.sha256(f"pair-table v{FORMAT_VERSION} {len(tokens)}\n".encode())
    digest.update(np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens)).tobytes())
    digest.update(b"".join(tokens))
    digest.update(np.fromiter(token_ids.values(), dtype=np.int64, count=len(tokens)).tobytes())
    # The priorities, aligned with the tokens. For tiktoken's files a token's priority is its id: said in a few
    # bytes (and quickly, when the two tables are one dict), so that both ways of telling it share one file.
    ranks = None if merge_ranks is token_ids else list(map(merge_ranks.get, tokens))
    if ranks is None or ranks == list(token_ids.values()):
        digest.update(b"priorities are the ids")
        return digest.hexdigest()
    # Otherwise: which tokens have one, then their values.
    has_rank = bytes(map(is_not, ranks, repeat(None)))
    digest.update(has_rank)
    ranks = list(compress(ranks, has_rank))
    try:
        digest.update(np.array(ranks, dtype=np.int64).tobytes())
    except OverflowError:  # priorities beyond 64 bits: written as text
        digest.update(repr(ranks).encode())
    return digest.hexdigest()


def table_path(digest: str) -> Path:
    return cache_dir() / "pair-tables" / f"{digest}.npz"


def load_or_build(merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]) -> PairTable | None:
    """The pair table of this vocabulary: read from the cache folder if a good copy is there, else built
    (:func:`tokenizer.batch_bpe.build_pair_table`) and saved. None when the vocabulary cannot have one."""
    tables = load_or_build_tables(merge_ranks, token_ids)
    return tables and tables[0]


def load_or_build_tables(
    merge_ranks: Mapping[bytes, int], token_ids: Mapping[bytes, int]
) -> tuple[PairTable, PieceTable] | None:
    """``(pair table, token table)`` of this vocabulary, as :func:`load_or_build`; the token table maps every
    token's bytes to its id. None when the vocabulary cannot have a pair table."""
    digest = vocabulary_digest(merge_ranks, token_ids)
    path = table_path(digest)
    tables = read_tables(path, digest)
    if tables is None:
        table = build_pair_table(merge_ranks, token_ids)
        if table is None:
            return None
        try:
            tables = table, PieceTable(token_ids)
        except ValueError:  # two tokens with one 64-bit key (never seen): there is no array path then
            return None
        write_tables(path, digest, *tables)
    return tables


def read_tables(path: Path, digest: str) -> tuple[PairTable, PieceTable] | None:
    """The tables saved at ``path`` if the file is whole and was built from the vocabulary ``digest``; else None."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            if str(saved["digest"]) != digest:
                return None
            arrays = {name: saved[name] for name in _ARRAY_FIELDS}
            numbers = dict(zip(_NUMBER_FIELDS, map(int, saved["numbers"])))
            tokens = PieceTable.from_arrays({name[len("tokens_"):]: saved[name] for name in saved.files
                                             if name.startswith("tokens_")})
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # missing, unreadable, truncated or from an older format: built again
    return PairTable(**numbers, **arrays), tokens


def write_tables(path: Path, digest: str, table: PairTable, tokens: PieceTable) -> None:
    """Save the tables at ``path`` atomically (a temporary file renamed); give up quietly if the folder cannot
    be written: the cache only saves time."""
    arrays = {name: getattr(table, name) for name in _ARRAY_FIELDS}
    arrays.update({f"tokens_{name}": array for name, array in tokens.arrays.items()})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", suffix=".npz", delete=False)
    except OSError:
        return
    try:
        with f:
            np.savez(f, digest=np.array(digest), numbers=np.array([getattr(table, name) for name in _NUMBER_FIELDS]), **arrays)
        os.replace(f.name, path)
    except OSError:
        pass  # a full disk, say: the table stays in memory only
    finally:
        with suppress(OSError):
            Path(f.name).unlink(missing_ok=True)  # left over only if the rename did not happen
