"""Weight matrices kept beside the checkpoint in the order the compiled kernel reads them: made once, mapped later.

The compiled kernel (:mod:`gpt2_numpy.matvec_kernel`, and its bf16 twin) reads each matrix as rows [n_out, n_in],
one dot product per output; a checkpoint stores a layer's weight [n_in, n_out]. Turning every matrix around takes
seconds (a 774M model's 2.8 GB of float32 matrices: several seconds, most of it the fresh memory the copy fills),
and every process that decodes would pay them again. So the turned matrices go into one file beside the
checkpoint's weights, ``<weights>.<kind>`` (``model.safetensors.f32rows``, ``model.ckpt.bf16``), and later
processes map that file instead: no copy, no seconds, and the weights in memory once, not twice.

The file: 8 bytes of magic (which kind), the header's size, a JSON header (the format's version, the stamp of the
weights it was made from: each file's name, size, modification and status-change times, and each matrix's name
and shape), then the matrices one after another, starting 64-byte aligned. It is written as every output here is
(:func:`tokenizer.outputs.replaced_file`: beside it, then renamed), so it is never seen half-written; a file
that is absent, stale (the checkpoint changed) or damaged is simply made again.

What it does not do: decide which matrices go in or how they are turned (:mod:`gpt2_numpy.kvcache` for float32,
:mod:`gpt2_numpy.half` for bf16 pass them), or check the matrices' numbers (the stamp says which weights they came
from; the checkpoint itself is checked when it is downloaded).
"""
from __future__ import annotations

import json
import math
import shutil
import struct
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

from tokenizer.command_line import bar_if_slow
from tokenizer.outputs import check_file, partial_paths, replaced_file

VERSION = 1
FREE_BYTES_KEPT = 1 << 30  # a file is written only if the disk keeps this much free after it: a cache never fills it
# A writer adds a matrix to its hidden partial file every second or so: one untouched this long was left by a run
# that was killed (SIGTERM, SIGKILL, a power cut) before it could remove it, and is removed by the next writer.
LEFT_PARTIAL_SECONDS = 600


def weights_files(folder) -> list[Path]:
    """The files holding a checkpoint's weights in ``folder`` (OpenAI's or Hugging Face's layout)."""
    from . import hfmodel
    from .checkpoints import folder_layout, latest_checkpoint

    folder = Path(folder)
    if folder_layout(folder) == "hf":
        return [folder / hfmodel.SAFETENSORS]
    ckpt = latest_checkpoint(folder)
    if ckpt is None:
        raise FileNotFoundError(f"{folder} holds no checkpoint to arrange for the compiled kernel")
    return [ckpt.with_name(ckpt.name + ".index"), *sorted(ckpt.parent.glob(ckpt.name + ".data-*"))]


def cache_path(folder, kind: str) -> Path:
    """Where the matrices of ``kind`` (``bf16``, ``f32rows``) are kept: beside the weights, ``<weights>.<kind>``."""
    first = weights_files(folder)[0]
    return first.with_name(first.name.removesuffix(".index") + "." + kind)


def source_stamp(folder) -> dict:
    """What identifies the weights the cache was made from: each file's name, size, modification time and
    status-change time. The last because the first three can all come back with other bytes (``cp -p``, ``rsync
    -a`` or ``tar`` putting another checkpoint of the same size in place sets the old modification time), while
    no program can set the status-change time: a file replaced or rewritten always gets a new one."""
    return {path.name: [(info := path.stat()).st_size, info.st_mtime_ns, info.st_ctime_ns]
            for path in weights_files(folder)}


def cached(folder, kind: str, magic: bytes, dtype, shapes: dict[str, tuple], matrix: Callable, *, making: str,
           again: str) -> dict[str, np.ndarray]:
    """The matrices named in ``shapes`` (name -> [n_out, n_in]), memory-mapped from the file of ``kind`` beside the
    checkpoint in ``folder`` when it was made from the checkpoint's files as they are now; else each made by
    ``matrix(name)`` and written there first (saying "<making> once, into <file> ..." on stderr). A folder that
    cannot be written, or something other than a regular file by the cache's name (can_keep), costs only the
    making, each time: a line on stderr ends "the next run <again>"; so does a disk that would keep less than
    FREE_BYTES_KEPT free after the file (its line says how much it needs)."""
    path, stamp, names = cache_path(folder, kind), source_stamp(folder), list(shapes)
    rows = read(path, magic, dtype, stamp, names)
    if rows is not None:
        return rows
    n_bytes = sum(math.prod(shape) for shape in shapes.values()) * np.dtype(dtype).itemsize
    remove_left_partials(path)  # (first: the room they took counts as free)
    free = free_bytes(path.parent)
    if not can_keep(folder, kind):  # (a folder, device or FIFO by the cache's name is never replaced)
        print(f"{making} in memory: {path} cannot be written; the next run {again}", file=sys.stderr, flush=True)
    elif free < n_bytes + FREE_BYTES_KEPT:  # one line, and the run goes on
        print(f"{making} in memory: the file would take {n_bytes / 2**30:.1f} GiB of the {free / 2**30:.1f} GiB "
              f"free beside the checkpoint ({FREE_BYTES_KEPT >> 30} GiB are left free); with more room the next "
              f"run keeps them in {path}", file=sys.stderr, flush=True)
    else:
        print(f"{making} once, into {path} ...", file=sys.stderr, flush=True)
        try:  # (1558M's rows: 5.8 GB, tens of seconds the first time; a bar on a terminal)
            with bar_if_slow(desc=path.name, total=n_bytes, unit="B", unit_scale=True, unit_divisor=1024) as bar:
                write(path, magic, dtype, stamp, shapes, matrix, written=bar.update)
            rows = read(path, magic, dtype, stamp, names)
        except OSError as error:  # one line, as the message before it: the run goes on
            print(f"could not write {path} ({error}); the next run {again}", file=sys.stderr, flush=True)
    if rows is None:  # (not written, or gone again at once)
        rows = {name: np.ascontiguousarray(matrix(name), dtype=dtype) for name in names}
    return rows


def remove_left_partials(path: Path) -> None:
    """Remove the hidden partial files of ``path`` that killed runs left (each as big as the cache, gigabytes):
    those untouched for LEFT_PARTIAL_SECONDS, so that a run writing the same file at this moment keeps its own."""
    for partial in partial_paths(path):
        try:
            if time.time() - partial.stat().st_mtime > LEFT_PARTIAL_SECONDS:
                partial.unlink()
        except OSError:  # gone meanwhile, or not ours to remove: it costs only room
            pass


def free_bytes(folder: Path) -> int:
    """The bytes free on the disk holding ``folder`` (as many as needed when the system cannot say)."""
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return sys.maxsize


def can_keep(folder, kind: str) -> bool:
    """Whether the file of ``kind`` could be written beside the checkpoint in ``folder`` now
    (:func:`tokenizer.outputs.check_file`: a file made there and removed)."""
    try:
        check_file(cache_path(folder, kind), overwrite=True)
    except (OSError, ValueError):
        return False
    return True


def read(path: Path, magic: bytes, dtype, stamp: dict, names: list[str]) -> dict[str, np.ndarray] | None:
    """The matrices in the file at ``path``, memory-mapped as ``dtype``, if it is of kind ``magic``, was made from
    the weights ``stamp`` describes and holds ``names`` in that order; else None (absent, stale or damaged)."""
    if not path.is_file():  # (a FIFO by that name would block the open below)
        return None
    try:
        with open(path, "rb") as file:
            found, header_size = struct.unpack("<8sQ", file.read(16))
            header = json.loads(file.read(header_size)) if found == magic else None
        if not header or header.get("version") != VERSION or header.get("source") != stamp:
            return None
        if [entry["name"] for entry in header["matrices"]] != names:
            return None
        data = np.memmap(path, dtype=dtype, mode="r", offset=header["data_offset"])
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    rows, start = {}, 0
    for entry in header["matrices"]:
        size = entry["shape"][0] * entry["shape"][1]
        if start + size > data.size:
            return None
        rows[entry["name"]] = data[start : start + size].reshape(entry["shape"])
        start += size
    return rows


def write(path: Path, magic: bytes, dtype, stamp: dict, shapes: dict[str, tuple], matrix: Callable,
          written: Callable | None = None) -> None:
    """Write the matrices named in ``shapes`` (name -> [n_out, n_in]), each made by ``matrix(name)`` only when its
    turn comes (so that no more than one is held in memory at a time), with the stamp of their source;
    ``written(n_bytes)`` after each (a progress bar's update)."""
    header = {"version": VERSION, "source": stamp,
              "matrices": [{"name": name, "shape": list(shape)} for name, shape in shapes.items()]}
    text = json.dumps(header).encode()
    data_offset = -(-(16 + len(text) + 32) // 64) * 64  # room for the offset's own digits, rounded up
    header["data_offset"] = data_offset
    text = json.dumps(header).encode().ljust(data_offset - 16)
    with replaced_file(path) as file:  # (written beside it, renamed into place once complete)
        file.write(struct.pack("<8sQ", magic, len(text)) + text)
        for name, shape in shapes.items():
            rows = np.ascontiguousarray(matrix(name), dtype=dtype)
            if rows.shape != tuple(shape):
                raise ValueError(f"{name}: made {rows.shape}, the header says {tuple(shape)}")
            file.write(rows.data)
            if written is not None:
                written(rows.nbytes)
