"""Encode a dataset of many shards into nanoGPT ``.bin`` files and a manifest, resumably, locally or on Ray.

    encode_dataset(["owt/*.jsonl.gz"], "owt_bin", encoding="gpt2")               # worker processes here
    encode_dataset(["fineweb/"], "fw_bin", engine="ray", address="auto")         # tasks on a Ray cluster

Each input shard (a file found by :func:`tokenizer.jobs.inputs.find_inputs`) becomes one output file
``DIR/<shard name>.bin``, written by the job that writes ``encode-file``'s output
(:func:`tokenizer.jobs.dataset.encode_input`): every JSON-lines or parquet document is
``encode_ordinary(text) + [eot_token]``; a text shard is ``encode(text, allowed_special="all")``.

One shard is one task, so an output depends on its input alone: the same inputs give byte-identical outputs
whatever the engine (:mod:`tokenizer.jobs.engines`), the number of workers or the order in which tasks finish. A
task's output is renamed into place only when complete, so a ``.bin`` in ``DIR`` is never partial; the driver
then records it in ``DIR/manifest.json`` (:mod:`tokenizer.jobs.manifest`), with its documents: the records of a
JSON-lines or parquet shard, the stretches of text between ``<|endoftext|>`` separators of a text shard.
Running again into the same ``DIR`` redoes only the shards the manifest does not prove complete, and removes the
outputs the earlier manifest listed for inputs this run was not given (a loader reading every ``DIR/*.bin`` would
read them), once the new manifest is in place.

What this module does not do: split one shard across several tasks (a dataset's shards are the parallelism;
one huge file is ``encode-file``'s job), read standard input (a manifest recognises its inputs by path, size
and time), or shuffle, deduplicate or filter documents.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from .dataset import check_documents_can_end, encode_input, id_dtype
from ..encoding import Encoding
from .engines import ProgressBar, open_engine
from .inputs import find_inputs, input_stem, refuse_stdin
from .manifest import (MANIFEST_NAME, TEXT_RULE, encoding_fingerprint, input_identity, is_complete, read_manifest,
                       recorded_outputs, write_manifest)
from ..outputs import check_file, check_folder, make_folders, partial_paths, remove_folders
from ..registry import get_encoding


class ShardEncoder:
    """The task: encode one shard into its ``.bin`` file; returns the shard's manifest entry (without the
    input's identity, which the driver adds). Holds the encoding, so it reaches each worker once."""

    def __init__(self, encoding: Encoding, text_field: str, errors: str = "strict"):
        self.encoding = encoding
        self.text_field = text_field
        self.errors = errors

    def __call__(self, task: tuple[str, str], report) -> dict:
        input_path, out_path = Path(task[0]), Path(task[1])
        # a text shard's rule, the one the manifest records (TEXT_RULE): every special token's text its id
        written = encode_input(input_path, out_path, self.encoding, allowed_special="all", disallowed_special=(),
                               text_field=self.text_field, errors=self.errors, report=report)
        return {"output": out_path.name, **written}


def output_names(shards: list[Path]) -> list[str]:
    """``<shard name>.bin`` for each shard; a name taken already gets ``-2``, ``-3``, ... (in input order)."""
    names: list[str] = []
    for shard in shards:
        stem = input_stem(shard)
        name = f"{stem}.bin"
        for k in itertools.count(2):
            if name not in names and name != "manifest.bin":
                break
            name = f"{stem}-{k}.bin"
        names.append(name)
    return names


def foreign_files(folder: Path) -> list[str]:
    """What a folder without a manifest holds (the first few names): files ``encode-dataset`` did not write."""
    if (folder / MANIFEST_NAME).exists():
        return []
    names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))  # hidden: leftovers
    return names[:3] + ["..."] * (len(names) > 3)


def check_out_dir(out_dir, *, overwrite: bool = False, flag: str | None = None) -> Path:
    """``out_dir`` checked as :func:`encode_dataset`'s destination (:func:`tokenizer.outputs.check_folder`): a
    folder of other files and no manifest is refused unless ``overwrite``. Returns where to write."""
    return check_folder(out_dir, holds=foreign_files, what="files but no manifest of encode-dataset",
                        overwrite=overwrite, flag=flag, overwrite_does="write into it")


def refuse_replacing_inputs(shards: list[Path], outputs: list[Path], manifest: Path, named: str) -> None:
    """``ValueError`` when a shard's output is one of the inputs (``x.txt`` writes ``x.bin``, and ``x.bin``, a
    text file as any other extension is, is an input in that folder), or the ``manifest`` is: writing it would
    replace the input. ``named`` is how the message names the output folder."""
    inputs_at = {shard.resolve(): shard for shard in shards}  # outputs are real paths (check_file)
    for shard, output in zip(shards, outputs):
        replaced = inputs_at.get(output)
        if replaced is not None:
            raise ValueError(f"{named}: the output of {shard}, {output}, would replace the input {replaced}; "
                             "name another folder")
    replaced = inputs_at.get(manifest)
    if replaced is not None:
        raise ValueError(f"{named}: its manifest, {manifest}, would replace the input {replaced}; name another "
                         "folder")


def remove_partials(outputs: list[Path]) -> None:
    """Delete the temporary files of tasks that were killed (a retried task writes a new one): never trusted,
    never left behind."""
    for output in outputs:
        for stale in partial_paths(output):
            stale.unlink(missing_ok=True)


def remove_earlier_outputs(folder: Path, earlier: list[str], outputs: list[Path], shards: list[Path]) -> list[str]:
    """Delete the ``earlier`` outputs (named by the manifest this run replaced) that are none of this run's
    ``outputs``: a loader that reads every ``*.bin`` of the folder, as nanoGPT-style scripts do, would read the
    ids of inputs no longer in the dataset. Never an input, nor anything but a file; returns the names removed."""
    kept = {output.name for output in outputs}
    inputs_at = {shard.resolve() for shard in shards}
    removed = []
    for name in dict.fromkeys(earlier):  # each name once, in the earlier manifest's order
        path = folder / name
        if name in kept or path.resolve() in inputs_at or path.is_symlink() or not path.is_file():
            continue
        path.unlink()
        removed.append(name)
    return removed


def encode_dataset(
    inputs,
    out_dir,
    *,
    encoding: str | Encoding = "gpt2",
    text_field: str = "text",
    errors: str = "strict",
    engine: str = "local",
    address: str | None = None,
    workers: int | None = None,
    progress: bool = True,
    overwrite: bool = False,
    flag: str | None = None,
) -> dict:
    """Encode the shards named by ``inputs`` (files, folders, globs) into ``out_dir``; returns the manifest,
    plus ``"encoded"`` and ``"skipped"`` (shard counts of this run), ``"removed"`` (the names of the outputs an
    earlier run's manifest listed that are none of this run's, deleted) and ``"seconds"``.

    ``encoding`` is a registered name or an :class:`Encoding`; ``text_field`` the JSON field / parquet column
    holding each document; ``errors`` how invalid UTF-8 is read (``"strict"``: an error naming the input and the
    byte; ``"replace"``: as U+FFFD, counted in each shard's and the totals' ``replaced_bytes``); ``engine``
    ``"local"`` (worker processes, default all CPUs) or ``"ray"`` (``address`` of a cluster, or a local one started
    for the job); ``workers`` how many shards are encoded at once. Shards already complete in ``out_dir`` (proved by
    its manifest) are skipped.

    ``out_dir`` is checked before any work (:func:`tokenizer.outputs.check_folder`; ``flag`` names it on a
    command line): a folder that holds files but no manifest (not an ``encode-dataset`` output) is refused
    unless ``overwrite``.

    Raises ``FileNotFoundError`` for inputs that are not there, ``ValueError`` for bad input (the message names
    the file and line or row), ``OSError`` when ``out_dir`` cannot be written; no partial ``.bin`` is
    left, the manifest lists only the shards whose outputs are complete, and a run that completed none leaves
    no manifest (nor the folder, if it made it).
    """
    start = time.perf_counter()
    if errors not in ("strict", "replace"):  # (before any work: a task would find it out only at a bad byte)
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    shards = find_inputs(inputs)
    refuse_stdin(shards, "encode-dataset's manifest recognises each input by its path, size and time")
    # the destination before the encoding, which may have to be downloaded
    named = f"{flag} {out_dir}" if flag else str(out_dir)  # how messages name it: as given
    out_dir = check_out_dir(out_dir, overwrite=overwrite, flag=flag)
    # each shard's output too: a FIFO, a folder or a link there is told now, not after its encoding
    outputs = [check_file(out_dir / name, overwrite=True) for name in output_names(shards)]
    refuse_replacing_inputs(shards, outputs, check_file(out_dir / MANIFEST_NAME, overwrite=True), named)
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    for shard in shards:
        check_documents_can_end(enc, shard)
    dtype = id_dtype(enc.n_vocab)
    settings = {"encoding": enc.name, "encoding_sha256": encoding_fingerprint(enc), "dtype": dtype.name,
                "text_field": text_field, **TEXT_RULE, "errors": errors}

    identities = [input_identity(s) for s in shards]
    remove_partials(outputs)
    recorded = read_manifest(out_dir, settings)
    earlier_outputs = recorded_outputs(out_dir)
    entries: list[dict | None] = []
    for identity, output in zip(identities, outputs):
        entry = recorded.get(identity["input"])
        entries.append(entry if is_complete(entry, identity, output, dtype.itemsize) else None)
    todo = [n for n, entry in enumerate(entries) if entry is None]

    def save(complete: bool) -> dict:
        return write_manifest(out_dir, settings, [e for e in entries if e is not None], complete=complete)

    made = make_folders(out_dir)
    had_manifest = (out_dir / MANIFEST_NAME).exists()
    bar = ProgressBar([identities[n]["input_size"] for n in todo], desc=f"encoding {len(todo)} of {len(shards)} "
                      "shards", enabled=progress)
    try:
        save(complete=not todo)  # first: no claim on a shard about to be redone
        # once the new manifest is in place, so that no manifest ever names a file that is gone
        removed = remove_earlier_outputs(out_dir, earlier_outputs, outputs, shards)
        if todo:
            with open_engine(engine, address=address, workers=workers) as runner:
                tasks = [(str(shards[n]), str(outputs[n])) for n in todo]
                run = runner.run(ShardEncoder(enc, text_field, errors), tasks, bar, name="encode_shard")
                for k, result in run:
                    n = todo[k]
                    entries[n] = {**identities[n], **result}
                    save(complete=all(e is not None for e in entries))
    except BaseException:
        if not had_manifest and all(e is None for e in entries):  # nothing done: no manifest of nothing left
            (out_dir / MANIFEST_NAME).unlink(missing_ok=True)
            remove_folders(made)
        raise
    finally:
        bar.close()
        remove_partials(outputs)
    manifest = save(complete=True)
    return {**manifest, "encoded": len(todo), "skipped": len(shards) - len(todo), "removed": removed,
            "seconds": time.perf_counter() - start}

