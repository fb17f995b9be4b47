"""A GPT-2 by size or by folder, as picoGPT's params tree: OpenAI's files downloaded, read and checked.

GPT-2 was released as a TensorFlow checkpoint. It is read here without TensorFlow
(:mod:`gpt2_numpy.tfcheckpoint`): the ``.index`` file says where each tensor lies in the ``.data`` file,
which is memory-mapped, so loading costs no copy and pages of the weights are read from disk only when
the model touches them. A Hugging Face folder is read by :mod:`gpt2_numpy.hfmodel`.

The first load also checks every tensor's CRC-32C (stored in the index), which reads the whole
data file; a small stamp beside the checkpoint (``model.ckpt.crc32c-ok.json``: the sha256 of the
index and the data files' sizes, modification and status-change times) then spares later loads that work. A
changed checkpoint no longer matches its stamp and is checked again.

The weights come back in picoGPT's params tree::

    {"wte": [n_vocab, n_embd], "wpe": [n_ctx, n_embd],
     "blocks": [{"ln_1": {"g", "b"}, "attn": {"c_attn": {"w", "b"}, "c_proj": {"w", "b"}},
                 "ln_2": {"g", "b"}, "mlp": {"c_fc": {"w", "b"}, "c_proj": {"w", "b"}}}, ...],
     "ln_f": {"g", "b"}}

The arrays are read-only memory maps; copy one (``np.array(a)``) before changing it in place.
A size is looked for in :func:`gpt2_numpy.models_dir.default_models_dir` unless a folder is given.

What it does not do: run the model, or decide where models live (``models_dir.py`` holds that rule).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import hfmodel
from .models_dir import MODEL_SIZES, default_models_dir
from .tfcheckpoint import CheckpointError, DamagedFile, read_checkpoint
from tokenizer.command_line import bar_if_slow, said_if_large, say
from tokenizer.download import DEFAULT_OPENAIPUBLIC_URL, RETRIES, CannotConnect, ChecksumError, DownloadError, \
    KeptFailing, download_file, download_progress, one_run_at_a_time, openai_public_url, sha256_file
from tokenizer.registry import GPT2_ENCODER_JSON, GPT2_VOCAB_BPE
from tokenizer.user_cache import expand_home

CHECKPOINT_FILES = (
    "checkpoint",
    "encoder.json",
    "hparams.json",
    "model.ckpt.data-00000-of-00001",
    "model.ckpt.index",
    "model.ckpt.meta",
    "vocab.bpe",
)
# Everything above except the .meta graph, which nothing here reads: a missing one is no reason to
# go to the network.
NEEDED_FILES = tuple(name for name in CHECKPOINT_FILES if name != "model.ckpt.meta")
CRC_STAMP_SUFFIX = ".crc32c-ok.json"  # model.ckpt + this: the stamp of a checkpoint whose CRCs passed
GPT2_N_VOCAB = 50257  # every GPT-2 size's ids: the 256 bytes, 50,000 merges and <|endoftext|>


def download_gpt2_files(model_size: str, model_dir) -> None:
    """Download the 7 files of GPT-2 ``model_size`` into ``model_dir``; files already there are kept.

    If any cannot be fetched, one :class:`DownloadError` names every file still missing, why, and how to
    supply them by hand; once all are there, one line on stderr names the folder they are in. A server that
    cannot be reached at all is asked once, not once per file; it draws no progress bar and leaves no folder
    behind (:func:`tokenizer.download.download_file` draws its bar and makes the folder only once the server
    sends a file). A server that failed a file through every retry is asked once for each later file. A second
    run for the same folder waits for the first, saying so once, and then fetches only what is still missing.
    """
    _check_model_size(model_size)
    model_dir = Path(model_dir)
    if all((model_dir / name).is_file() for name in CHECKPOINT_FILES):
        return
    # One lock over the whole size, not only each file's (download_file's): a run that joins another's download
    # says once that it waits, where it said so for every file still to come, and takes the folder over whole
    # (finding it complete, or what the other run left to fetch: a 404, or a .part after Ctrl-C)
    with one_run_at_a_time(model_dir, f"downloading GPT-2 {model_size} into {model_dir}",
                           received=lambda: _file_in_progress(model_size, model_dir)):
        _download_missing_files(model_size, model_dir)


def _file_in_progress(model_size: str, folder: Path) -> tuple[str, int, int | None]:
    """What a run downloading GPT-2 ``model_size`` into ``folder`` is on, for a run waiting for it: ``(the file,
    its bytes received, its size)`` (:func:`tokenizer.download.download_progress`), the size as the other run's
    server said it. The folder's total is known to no one before its last file is asked for, so the bar follows
    the file being fetched (the data file, most of the wait), which has one; before any file, nothing yet."""
    written = {}  # file -> when it was last written: the one being fetched is the one written last (a .part kept
    # from a file that failed stays behind while the other run goes on); between two files, the last one done
    for name in CHECKPOINT_FILES:
        for path in (folder / f"{name}.part", folder / name):
            with contextlib.suppress(OSError):  # (not there; or renamed between two looks)
                written[name] = path.stat().st_mtime_ns
                break
    if not written:
        return f"GPT-2 {model_size}, by the other run", 0, None
    name = max(written, key=written.get)
    return f"GPT-2 {model_size}'s {name}, by the other run", *download_progress(folder / name)


def _download_missing_files(model_size: str, model_dir: Path) -> None:
    """download_gpt2_files' work, once this run holds the lock on ``model_dir``."""
    missing = [name for name in CHECKPOINT_FILES if not (model_dir / name).is_file()]
    if not missing:  # the run this one waited for fetched them all (and said where they are)
        return
    base = openai_public_url(f"gpt-2/models/{model_size}/")
    failed = {}  # file name -> why it is missing
    unreachable = None  # the reason, once the server could not be reached
    retries = RETRIES  # download_file's own number, until the server has failed a file through all of them
    # every size's vocabulary files are GPT-2's own, whose sha256 are known: other bytes (from a mirror) that still
    # parse would encode differently without a word
    known_sha256 = {"encoder.json": GPT2_ENCODER_JSON.sha256, "vocab.bpe": GPT2_VOCAB_BPE.sha256}
    for name in missing:
        if unreachable is not None:
            failed[name] = unreachable
            continue
        try:
            download_file(base + name, model_dir / name, desc=f"{model_size}/{name}", retries=retries,
                          sha256=known_sha256.get(name))
        except ChecksumError as exc:
            failed[name] = f"its sha256 is {exc.actual}, not GPT-2's {known_sha256[name]}; the bytes were deleted"
        except CannotConnect as exc:
            unreachable = failed[name] = exc.reason
        except KeptFailing as exc:  # (a server failing every file would cost its backoff, 7.5 s, once per file)
            failed[name] = exc.reason
            retries = 0  # each later file is still asked once: a failure may be this file's alone
        except DownloadError as exc:
            failed[name] = exc.reason
        except OSError as exc:  # the file came, but could not be saved: the folder's fault, not the server's
            raise _cannot_save(exc, model_size, model_dir, name) from None
    if failed:
        by_reason = {}
        for name in CHECKPOINT_FILES:
            if name in failed:
                by_reason.setdefault(failed[name], []).append(name)
        causes = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
        # a server that cannot be reached at all is most often no network, asked as get_encoding's error asks it
        offline = "; are you offline?" if unreachable is not None else "."
        raise DownloadError(
            f"could not download {len(failed)} of the {len(CHECKPOINT_FILES)} files of GPT-2 {model_size} "
            f"from {base} ({causes}){offline} To supply them yourself, fetch each missing file from {base} some "
            f"other way and place it in {model_dir}{os.sep} (files already there are used as they are; the "
            f"next run reads that folder), or point $OPENAIPUBLIC_URL at a mirror (default "
            f"{DEFAULT_OPENAIPUBLIC_URL})."
        )
    # Where they landed, once: each file's bar or line names only the size and file, and the default folder (the
    # user cache, for an installed copy) is one a user would not guess when looking for half a gigabyte or more
    size = sum((model_dir / name).stat().st_size for name in CHECKPOINT_FILES)
    say(f"saved GPT-2 {model_size} in {model_dir} ({size:,} bytes); later runs read it from there")


def _cannot_save(error: OSError, model_size: str, model_dir: Path, name: str) -> OSError:
    """The error of a file that came but could not be written into ``model_dir``, saying what to do: a full disk
    (where the bytes received wait for the next run) is not a folder that refuses writes."""
    cause = f"{error.strerror or error}{f': {error.filename}' if error.filename else ''}"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        part = model_dir / f"{name}.part"
        received = part.stat().st_size if part.is_file() else 0
        kept = (f" (the {received:,} bytes of {name} received so far are kept in {part.name}, and the next run "
                "resumes from them)") if received else ""
        return OSError(error.errno, f"cannot save GPT-2 {model_size}'s files in {model_dir}: its disk is full "
                                    f"({cause}); free some space and run again{kept}, or choose another models "
                                    "folder (--models_dir, $GPT2_MODELS_DIR, or models_dir=)")
    return OSError(error.errno, f"cannot save GPT-2 {model_size}'s files in {model_dir} ({cause}); make that folder "
                                "writable, or choose another models folder (--models_dir, $GPT2_MODELS_DIR, or "
                                "models_dir=)")


class HparamsMismatch(CheckpointError):
    """hparams.json and the checkpoint describe different models (each file may be whole: which is wrong is not
    known)."""


def load_gpt2_params_from_tf_ckpt(tf_ckpt_path, hparams: dict, *, verify_data: bool = True) -> dict:
    """Read OpenAI's TF checkpoint at ``tf_ckpt_path`` (a prefix such as ``.../model.ckpt``) into the
    params tree of read-only float32 arrays mapped from the data file, checking every name, shape and
    dtype against ``hparams`` and (with ``verify_data``) every tensor's CRC-32C."""
    expected = _expected_shapes(hparams)
    try:
        with _CheckingBar(f"checking {Path(tf_ckpt_path).name}") as bar:
            stored = read_checkpoint(tf_ckpt_path, verify_data=verify_data, checked=bar.update)
    except CheckpointError as error:  # the index or data file's own bytes (the names and shapes are checked below)
        raise DamagedFile(str(error), path=error.path) from error
    missing = sorted(set(expected) - set(stored))
    unexpected = sorted(name for name in stored if name.startswith("model/") and name not in expected)
    if missing or unexpected:
        raise HparamsMismatch(
            f"checkpoint {tf_ckpt_path} does not match hparams {hparams}: missing variables {missing}, "
            f"unexpected variables {unexpected}; are hparams.json and the checkpoint from the same model?"
        )
    params = {}
    for name, shape in expected.items():
        array = stored[name]
        if array.shape != shape or array.dtype != np.float32:
            raise HparamsMismatch(
                f"checkpoint {tf_ckpt_path}: variable {name} is {array.dtype}{list(array.shape)}, but hparams "
                f"{hparams} expect float32{list(shape)}; are hparams.json and the checkpoint from the same model?"
            )
        _put(params, name, array[0] if len(shape) == 3 else array)  # [1, nx, nf] "convolution" -> [nx, nf]
    return params


def load_encoder_hparams_and_params(model_size: str, models_dir=None):
    """Return ``(encoder, hparams, params)`` for GPT-2 ``model_size`` in ``{models_dir}/{model_size}``
    (``models_dir`` defaults to :func:`default_models_dir`), or for the model in the folder
    ``model_size`` names when it is not one of :data:`MODEL_SIZES`: OpenAI's layout (``checkpoint``,
    ``hparams.json``, ``model.ckpt.*``) or Hugging Face's (``config.json``, ``model.safetensors``).

    >>> encoder, hparams, params = load_encoder_hparams_and_params("124M", "models")  # doctest: +SKIP
    >>> encoder, hparams, params = load_encoder_hparams_and_params("~/hf/gpt2")  # doctest: +SKIP

    Sizes are downloaded when the checkpoint or a file this needs is missing (files already there are
    kept); a folder is used as it is. The arrays are mapped from the weights file; a TF checkpoint's
    CRCs are checked on its first load.
    """
    from . import encoder  # imported late: reading the vocabulary costs time a download need not wait for

    if model_size not in MODEL_SIZES:
        folder = model_folder(model_size)
        layout = folder_layout(folder)
        if layout == "hf":
            try:
                hparams, params = hfmodel.load_hf_folder(folder)
            except DamagedFile:
                raise
            except ValueError as error:  # config.json and the weights are not one GPT-2: say what a folder needs
                raise ValueError(f"{error}; give a folder holding one whole GPT-2 (its config.json and weights, "
                                 "from the same model), or a size") from None
            vocab = hfmodel.read_hf_vocab(folder)
            if vocab:  # its Encoding built now: a vocabulary the fast core refuses stops the load, not a later encode
                return encoder.Encoder(*vocab, encoding=encoder.encoding_of(*vocab)), hparams, params
            # A model saved without its tokenizer (save_pretrained of the model alone): GPT-2's own vocabulary,
            # the one shipped, when the model has GPT-2's number of ids; any other is unknown here
            if hparams["n_vocab"] != GPT2_N_VOCAB:
                raise ValueError(f"{folder} holds no tokenizer (vocab.json + merges.txt, or tokenizer.json), and "
                                 f"its model's {hparams['n_vocab']} ids are not GPT-2's {GPT2_N_VOCAB}; put the "
                                 "model's tokenizer files there")
            return encoder.get_encoder(encoder.PACKAGED.name, encoder.PACKAGED.parent), hparams, params
        if layout == "openai":
            try:
                hparams, params = _load_openai_folder(folder)
            except CheckpointError as error:  # a folder of the user's: nothing to fetch it from, nor to delete
                if isinstance(error, HparamsMismatch):
                    advice = "give a folder whose hparams.json and checkpoint are one model's, or a size"
                else:
                    advice = "replace it with a good copy" if error.path else "put the missing files there"
                raise type(error)(f"{error}; {advice}", path=error.path) from None
            return encoder.get_encoder(folder.name, folder.parent), hparams, params
        if folder.is_dir():
            raise ValueError(f"{folder} holds neither OpenAI's layout (checkpoint, hparams.json, model.ckpt.*) "
                             f"nor Hugging Face's (config.json, {hfmodel.SAFETENSORS})")
        _check_model_size(model_size)  # neither a size nor a folder: the error lists the sizes
    model_dir = check_size_folder(model_size, models_dir)  # (before the default is put in: its error names it)
    models_dir = default_models_dir() if models_dir is None else models_dir
    if latest_checkpoint(model_dir) is None or not all((model_dir / n).is_file() for n in NEEDED_FILES):
        download_gpt2_files(model_size, model_dir)
    try:
        hparams, params = _load_openai_folder(model_dir)
    except CheckpointError as error:
        raise _set_aside(error, model_dir) from None
    try:
        return encoder.get_encoder(model_size, models_dir), hparams, params
    except ValueError as error:  # the download's encoder.json or vocab.bpe cannot be read: set it aside, as above
        # every size's two files are GPT-2's own, so the one whose sha256 is not theirs is the damaged one
        shipped = {"encoder.json": GPT2_ENCODER_JSON.sha256, "vocab.bpe": GPT2_VOCAB_BPE.sha256}
        damaged = next((model_dir / name for name, sha256 in shipped.items()
                        if sha256_file(model_dir / name) != sha256), None)
        raise _set_aside(CheckpointError(str(error), path=damaged), model_dir) from None


def check_size_folder(model_size: str, models_dir=None) -> Path:
    """The folder of a size (:func:`model_folder`), or a ValueError when something that is not a folder stands
    there, or where the models folder should be: read from or downloaded into, it would fail deep inside
    ("checkpoint: Not a directory")."""
    model_dir = model_folder(model_size, models_dir)
    if model_dir.exists() and not model_dir.is_dir():
        raise ValueError(f"{model_dir} is not a folder, but GPT-2 {model_size}'s files go in a folder of that name: "
                         "move it away, or choose another models folder (--models_dir, $GPT2_MODELS_DIR, or "
                         "models_dir=)")
    # the models folder itself a file, or inside one (the command says so of its flags first: cli.check_models_dir)
    folder = model_dir.parent
    nearest = next((path for path in (folder, *folder.parents) if path.exists()), None)
    if nearest is not None and not nearest.is_dir():
        named = ("models_dir" if models_dir is not None else
                 "$GPT2_MODELS_DIR" if os.environ.get("GPT2_MODELS_DIR") else "the models folder")
        what = "is not a folder" if nearest == folder else f"lies inside {nearest}, which is not a folder"
        raise ValueError(f"{named} {folder} {what}, but GPT-2 {model_size}'s files go in a folder inside it: choose "
                         "another models folder (--models_dir, $GPT2_MODELS_DIR, or models_dir=)")
    return model_dir


def model_folder(model_size: str, models_dir=None) -> Path:
    """The folder of a model's checkpoint: a size's (:data:`MODEL_SIZES`) in the models folder (``models_dir``,
    default :func:`default_models_dir`), else the folder ``model_size`` names."""
    if model_size not in MODEL_SIZES:
        return expand_home(model_size)
    return Path(default_models_dir() if models_dir is None else models_dir) / model_size


def _set_aside(error: CheckpointError, model_dir: Path) -> CheckpointError:
    """A damaged file of a downloaded size is renamed ``NAME.damaged`` (kept, for a look), so that the next run
    finds it missing and downloads it afresh; the error says so."""
    if error.path is None or not error.path.is_file():
        return CheckpointError(f"{error}; delete {model_dir} and run again to download it afresh")
    aside = error.path.with_name(error.path.name + ".damaged")
    try:
        os.replace(error.path, aside)
    except OSError:
        return CheckpointError(f"{error}; delete it and run again to download it afresh", path=error.path)
    return CheckpointError(f"{error}; it was moved aside to {aside.name}: run again to download it afresh",
                           path=aside)


def folder_layout(folder: Path) -> str | None:
    """``"hf"`` for a Hugging Face GPT-2 folder, ``"openai"`` for OpenAI's layout, else None."""
    if hfmodel.is_hf_folder(folder):
        return "hf"
    if (folder / "checkpoint").is_file() or (folder / "hparams.json").is_file():
        return "openai"
    return None


def _load_openai_folder(model_dir: Path) -> tuple[dict, dict]:
    """``(hparams, params)`` of OpenAI's layout in ``model_dir``, its CRCs checked on the first load."""
    # (what to do about a bad file is the caller's to say: a size's is fetched again, a folder's is the user's)
    ckpt_path = latest_checkpoint(model_dir)
    if ckpt_path is None:
        state = model_dir / "checkpoint"
        raise CheckpointError(f"{state} names no checkpoint whose .index file exists" if state.is_file() else
                              f"{model_dir} has no checkpoint file (the one naming model.ckpt)")
    hparams = _read_hparams(model_dir / "hparams.json")
    stamp_path = ckpt_path.with_name(ckpt_path.name + CRC_STAMP_SUFFIX)
    stamp = _checkpoint_stamp(ckpt_path)
    checked = _read_stamp(stamp_path) == stamp
    params = load_gpt2_params_from_tf_ckpt(ckpt_path, hparams, verify_data=not checked)
    if not checked:
        _write_stamp(stamp_path, stamp)
    return hparams, params


class _CheckingBar:
    """A bar in bytes over a checkpoint's CRC check (a first load reads the whole file: 1558M's 6 GB take about
    10 s), on a terminal, when it is slow (tokenizer.command_line.bar_if_slow); made on the first report. Off a
    terminal, one line at the start of a check that large (said_if_large: 355M and up), so a log says it too."""

    def __init__(self, desc: str):
        self.desc, self.bar = desc, None

    def update(self, n_bytes: int, total_bytes: int) -> None:
        if self.bar is None:
            said_if_large(self.desc, total_bytes)
            self.bar = bar_if_slow(desc=self.desc, total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024)
        self.bar.update(n_bytes)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()


def save_hf(folder, encoder, hparams: dict, params: dict, *, overwrite: bool = False, flag: str | None = None) -> None:
    """Write the model as a Hugging Face GPT-2 folder (see :func:`gpt2_numpy.hfmodel.save_hf_folder`)."""
    merges = sorted(encoder.bpe_ranks, key=encoder.bpe_ranks.__getitem__)
    hfmodel.save_hf_folder(folder, hparams, params, encoder.encoder, merges, overwrite=overwrite, flag=flag)


def latest_checkpoint(model_dir) -> Path | None:
    """The checkpoint prefix named by ``{model_dir}/checkpoint``, or None if there is none.

    Does what ``tf.train.latest_checkpoint`` does for OpenAI's layout, without importing TF: the
    file's ``model_checkpoint_path: "model.ckpt"`` line names a prefix, which counts only if
    ``{prefix}.index`` exists.
    """
    state = Path(model_dir) / "checkpoint"
    try:
        text = state.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    match = re.search(r'^model_checkpoint_path:\s*"((?:[^"\\]|\\.)*)"', text, re.MULTILINE)
    if not match:
        return None
    prefix = Path(model_dir) / match[1]  # an absolute path stays absolute
    return prefix if prefix.with_name(prefix.name + ".index").is_file() else None


def _check_model_size(model_size: str) -> None:
    if model_size not in MODEL_SIZES:
        raise ValueError(f"unknown GPT-2 model size {model_size!r}; choose one of {', '.join(MODEL_SIZES)} "
                         f"(or name a folder holding a GPT-2 in OpenAI's or Hugging Face's layout)")


def _read_hparams(path: Path) -> dict:
    """hparams.json as a dict, or an error naming the file and what is wrong with it."""
    try:
        hparams = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {path} ({exc})", path=path) from exc
    needed = ("n_vocab", "n_ctx", "n_embd", "n_head", "n_layer")
    if not isinstance(hparams, dict):
        raise CheckpointError(f"{path} holds {type(hparams).__name__}, not a JSON object", path=path)
    bad = [key for key in needed if not isinstance(hparams.get(key), int)]
    if bad:
        raise CheckpointError(f"{path} lacks integer values for {bad}", path=path)
    return hparams


def _expected_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """OpenAI's variable names mapped to the shapes ``hparams`` imply (see tests/tiny_checkpoint.py)."""
    d = hparams["n_embd"]
    shapes = {"model/wte": (hparams["n_vocab"], d), "model/wpe": (hparams["n_ctx"], d)}
    # In the order a block uses them; "w" is [1, nx, nf] (see load_gpt2_params_from_tf_ckpt).
    block = {"ln_1": None, "attn/c_attn": (d, 3 * d), "attn/c_proj": (d, d),
             "ln_2": None, "mlp/c_fc": (d, 4 * d), "mlp/c_proj": (4 * d, d)}
    for i in range(hparams["n_layer"]):
        for name, dense in block.items():
            if dense is None:  # a layer norm: gain and bias
                shapes[f"model/h{i}/{name}/g"] = shapes[f"model/h{i}/{name}/b"] = (d,)
            else:
                shapes[f"model/h{i}/{name}/w"] = (1, *dense)
                shapes[f"model/h{i}/{name}/b"] = (dense[1],)
    shapes["model/ln_f/g"] = shapes["model/ln_f/b"] = (d,)
    return shapes


def _split(variable: str) -> tuple[int | None, list[str]]:
    """"model/h3/attn/c_attn/w" -> (3, ["attn", "c_attn", "w"]); "model/ln_f/g" -> (None, ["ln_f", "g"])."""
    keys = variable.removeprefix("model/").split("/")
    if re.fullmatch(r"h\d+", keys[0]):
        return int(keys[0][1:]), keys[1:]
    return None, keys


def _put(params: dict, variable: str, array: np.ndarray) -> None:
    """Store ``array`` at the place in the params tree that OpenAI's ``variable`` name maps to."""
    block, keys = _split(variable)
    node = params
    if block is not None:
        blocks = params.setdefault("blocks", [])
        while len(blocks) <= block:  # variables arrive block by block, so this only appends
            blocks.append({})
        node = blocks[block]
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = array


def _checkpoint_stamp(ckpt_path: Path) -> dict:
    """What identifies a checkpoint's files: the index's sha256, the data files' sizes, modification and
    status-change times (the last because cp -p, rsync -a or tar can put other bytes of the same size in place
    with the old modification time, but nothing can set a file's status-change time)."""
    index = ckpt_path.with_name(ckpt_path.name + ".index")
    data = sorted(ckpt_path.parent.glob(ckpt_path.name + ".data-*"))
    return {
        "index_sha256": sha256_file(index),
        "data": {path.name: [(info := path.stat()).st_size, info.st_mtime_ns, info.st_ctime_ns] for path in data},
    }


def _read_stamp(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent or damaged: the CRCs are simply checked again
        return None


def _write_stamp(path: Path, stamp: dict) -> None:
    """Write the stamp through a temporary file and a rename, so it is never half-written. Failing to
    write it (read-only folder) only costs speed: one plain line on stderr, as a cache beside the checkpoint
    that cannot be kept says (gpt2_numpy/rows_cache.py), not a Python warning naming this file."""
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
        with open(fd, "w", encoding="utf-8") as file:
            json.dump(stamp, file)
        os.replace(tmp, path)
    except BaseException as exc:  # (Ctrl-C while it is written too: no hidden temporary file is left behind)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if not isinstance(exc, OSError):
            raise
        reason = exc.strerror or exc  # (the error's own text names the temporary file, which the user never sees)
        print(f"the checkpoint's CRCs were checked; {path} cannot be written ({reason}), so the next load checks "
              f"them again", file=sys.stderr, flush=True)
