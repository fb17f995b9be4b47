"""Encode a dataset of many shards into nanoGPT ``.bin`` files and a manifest, resumably, locally or on Ray.

    encode_dataset(["owt/*.jsonl.gz"], "owt_bin", encoding="gpt2")               # worker processes here
    encode_dataset(["fineweb/"], "fw_bin", engine="ray", address="auto")         # tasks on a Ray cluster

Each input shard (:mod:`tokenizer.jobs.shards`) becomes one output file ``DIR/<shard name>.bin``: flat
little-endian ids, ``uint16`` when every id fits and ``uint32`` otherwise (:func:`tokenizer.jobs.dataset.id_dtype`),
as nanoGPT reads them with ``np.memmap``. What the ids are:

* ``.jsonl`` / ``.jsonl.gz`` / ``.parquet``: every document is ``encode_ordinary(text) + [eot_token]``
  (nanoGPT's layout: special-token text inside a document is plain text; each document ends with
  ``<|endoftext|>``).
* ``.txt``: the file's ids as ``encode-file`` gives them (special tokens in the text become their ids; the
  file is read in chunks cut where cutting does not change the ids, :func:`tokenizer.jobs.dataset.iter_chunks`).
  Its documents are the stretches between ``<|endoftext|>`` that hold more than whitespace (:class:`TextDocuments`).

One shard is one task, so an output depends on its input alone: the same inputs give byte-identical outputs
whatever the engine (:mod:`tokenizer.jobs.engines`), the number of workers or the order in which tasks finish. A
task writes its output to a temporary file and renames it when complete, so a ``.bin`` in ``DIR`` is never
partial; the driver then records it in ``DIR/manifest.json`` (:mod:`tokenizer.jobs.manifest`). Running again into
the same ``DIR`` redoes only the shards the manifest does not prove complete.

What this module does not do: split one shard across several tasks (a dataset's shards are the parallelism;
one huge ``.txt`` file is ``encode-file``'s job), or shuffle, deduplicate or filter documents.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
import uuid
from pathlib import Path

import numpy as np

from .dataset import id_dtype, iter_chunks
from ..encoding import Encoding
from .engines import ProgressBar, open_engine
from .manifest import encoding_fingerprint, input_identity, is_complete, read_manifest, write_manifest
from ..registry import get_encoding
from .shards import find_shards, import_pyarrow_parquet, read_documents, shard_format, shard_stem

WRITE_BYTES = 1 << 22  # ids are written out in pieces of about this size, so memory stays bounded


class ShardEncoder:
    """The task: encode one shard into its ``.bin`` file; returns the shard's manifest entry (without the
    input's identity, which the driver adds). Holds the encoding, so it reaches each worker once."""

    def __init__(self, encoding: Encoding, text_field: str):
        self.encoding = encoding
        self.text_field = text_field

    def __call__(self, task: tuple[str, str], report) -> dict:
        input_path, out_path = Path(task[0]), Path(task[1])
        enc = self.encoding
        dtype = id_dtype(enc.n_vocab)
        tmp = out_path.with_name(f".{out_path.name}.{uuid.uuid4().hex}.partial")
        sha, n_tokens, n_documents = hashlib.sha256(), 0, 0
        eot = enc.eot_token if "<|endoftext|>" in enc.special_tokens_set else None
        try:
            with open(tmp, "wb") as out:
                for ids, done, documents in self._ids(input_path, eot):
                    data = np.asarray(ids, dtype=dtype).tobytes()
                    out.write(data)
                    sha.update(data)
                    n_tokens += len(ids)
                    n_documents += documents
                    report(done)
            os.replace(tmp, out_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return {"output": out_path.name, "dtype": dtype.name, "documents": n_documents, "tokens": n_tokens,
                "bytes": input_path.stat().st_size, "sha256": sha.hexdigest()}

    def _ids(self, path: Path, eot: int | None):
        """``(ids, bytes of the input done, documents ended)`` pieces of the shard's output, in order."""
        enc = self.encoding
        if shard_format(path) == "text":  # encode-file's way: whole-file ids, special tokens as their ids
            offset = 0
            documents = TextDocuments("<|endoftext|>" if eot is not None else None)
            with open(path, "rb") as f:
                for data in iter_chunks(f, enc.special_tokens_set, pattern=enc.pat_str):
                    text = decode_text_shard(data, offset, path)
                    offset += len(data)
                    yield enc.encode(text, allowed_special="all"), offset, documents.count(text)
            yield [], offset, documents.count_end()
            return
        if eot is None:
            raise ValueError(f"encoding {enc.name!r} has no <|endoftext|> token to end each document of {path} "
                             "with; use an encoding that has one (train it with --special_tokens '<|endoftext|>')")
        pending: list[int] = []
        n_pending = 0  # documents in pending
        for documents, done in read_documents(path, self.text_field):
            for ids in enc.encode_ordinary_batch(documents, num_threads=1):
                pending += ids
                pending.append(eot)
            n_pending += len(documents)
            if len(pending) >= WRITE_BYTES // 4:
                yield pending, done, n_pending
                pending, n_pending = [], 0
            else:
                yield [], done, 0
        yield pending, path.stat().st_size, n_pending


class TextDocuments:
    """Counts the documents of a ``.txt`` shard fed chunk by chunk: the stretches of text between
    ``separator`` (``<|endoftext|>``; None: the encoding has none) that hold more than whitespace. So
    ``"a<|endoftext|>b"`` is 2 documents (one separator), and ``"a<|endoftext|>\n"`` is 1. Chunks never cut a
    special token (:func:`tokenizer.jobs.dataset.iter_chunks`), so counting chunk by chunk equals counting the
    whole text."""

    def __init__(self, separator: str | None):
        self.separator = separator
        self.open = False  # inside a document that holds text and has not ended yet

    def count(self, text: str) -> int:
        """The documents that end in ``text`` (at a separator)."""
        ended = 0
        pieces = text.split(self.separator) if self.separator else [text]
        for k, piece in enumerate(pieces):
            if k and self.open:  # a separator ends the open document
                ended += 1
                self.open = False
            if not self.open and not piece.isspace() and piece:
                self.open = True
        return ended

    def count_end(self) -> int:
        """The document the end of the file ends (0 or 1)."""
        ended, self.open = int(self.open), False
        return ended


def decode_text_shard(data: bytes, offset: int, path: Path) -> str:
    """A chunk of a ``.txt`` shard as text; ``ValueError`` naming the file and byte offset if it is not UTF-8
    (encode-dataset reads shards as they are: it has no ``--errors``)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(
            f"{path} is not valid UTF-8: byte {offset + e.start} is {data[e.start:e.start + 1]!r} ({e.reason}); "
            "convert the shard to UTF-8 (encode-dataset never alters a dataset's text; encode-file --errors "
            "replace turns one file's invalid bytes into U+FFFD)"
        ) from None


def output_names(shards: list[Path]) -> list[str]:
    """``<shard name>.bin`` for each shard; a name taken already gets ``-2``, ``-3``, ... (in input order)."""
    names: list[str] = []
    for shard in shards:
        stem = shard_stem(shard)
        name = f"{stem}.bin"
        for k in itertools.count(2):
            if name not in names and name != "manifest.bin":
                break
            name = f"{stem}-{k}.bin"
        names.append(name)
    return names


def remove_partials(outputs: list[Path]) -> None:
    """Delete the temporary files of tasks that were killed (a retried task writes a new one): never trusted,
    never left behind."""
    for output in outputs:
        for stale in output.parent.glob(f".{output.name}.*.partial"):
            stale.unlink(missing_ok=True)


def encode_dataset(
    inputs,
    out_dir,
    *,
    encoding: str | Encoding = "gpt2",
    text_field: str = "text",
    engine: str = "local",
    address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> dict:
    """Encode the shards named by ``inputs`` (files, folders, globs) into ``out_dir``; returns the manifest,
    plus ``"encoded"`` and ``"skipped"`` (shard counts of this run) and ``"seconds"``.

    ``encoding`` is a registered name or an :class:`Encoding`; ``text_field`` the JSON field / parquet column
    holding each document; ``engine`` ``"local"`` (worker processes, default all CPUs) or ``"ray"``
    (``address`` of a cluster, or a local one started for the job); ``workers`` how many shards are encoded
    at once. Shards already complete in ``out_dir`` (proved by its manifest) are skipped.

    Raises ``FileNotFoundError`` for inputs that are not there, ``ValueError`` for bad input (the message names
    the file and line or row group), ``OSError`` when ``out_dir`` cannot be written; no partial ``.bin`` is
    left, and the manifest lists only the shards whose outputs are complete.
    """
    start = time.perf_counter()
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    shards = find_shards(inputs)
    if any(shard_format(s) == "parquet" for s in shards):
        import_pyarrow_parquet()  # missing pyarrow: say so before any work
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OSError(f"cannot create the output folder {out_dir}: {e.strerror or e}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write to the output folder {out_dir}: permission denied; pass another --out")
    dtype = id_dtype(enc.n_vocab)
    settings = {"encoding": enc.name, "encoding_sha256": encoding_fingerprint(enc), "dtype": dtype.name,
                "text_field": text_field}

    outputs = [out_dir / name for name in output_names(shards)]
    identities = [input_identity(s) for s in shards]
    remove_partials(outputs)
    recorded = read_manifest(out_dir, settings)
    entries: list[dict | None] = []
    for identity, output in zip(identities, outputs):
        entry = recorded.get(identity["input"])
        entries.append(entry if is_complete(entry, identity, output, dtype.itemsize) else None)
    todo = [n for n, entry in enumerate(entries) if entry is None]

    def save(complete: bool) -> dict:
        return write_manifest(out_dir, settings, [e for e in entries if e is not None], complete=complete)

    save(complete=not todo)  # first: no claim on a shard about to be redone
    sizes = [identities[n]["input_size"] for n in todo]
    bar = ProgressBar(sizes, desc=f"encoding {len(todo)} of {len(shards)} shards", enabled=progress)
    try:
        if todo:
            with open_engine(engine, address=address, workers=workers) as runner:
                tasks = [(str(shards[n]), str(outputs[n])) for n in todo]
                run = runner.run(ShardEncoder(enc, text_field), tasks, bar, name="encode_shard")
                for k, result in run:
                    n = todo[k]
                    entries[n] = {**identities[n], **result}
                    save(complete=all(e is not None for e in entries))
    finally:
        bar.close()
        remove_partials(outputs)
    manifest = save(complete=True)
    return {**manifest, "encoded": len(todo), "skipped": len(shards) - len(todo),
            "seconds": time.perf_counter() - start}

