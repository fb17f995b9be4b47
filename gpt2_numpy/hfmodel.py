"""GPT-2 in Hugging Face's folder layout, read and written without transformers or safetensors.

A Hugging Face GPT-2 folder (``gpt2``, ``gpt2-medium``, ... or anything ``save_pretrained`` wrote) holds:

``config.json``
    the sizes: ``vocab_size``, ``n_positions``, ``n_embd``, ``n_head``, ``n_layer``.
``model.safetensors``
    the weights. The format is 8 bytes (little-endian length N), N bytes of JSON mapping each
    tensor's name to ``{"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}`` (offsets
    into what follows), then the raw little-endian bytes. So the file can be memory-mapped and each
    tensor is a view of it, as with :mod:`tfcheckpoint`.
``vocab.json`` + ``merges.txt``, or ``tokenizer.json``
    the tokenizer: the same token->id map and merge list as OpenAI's ``encoder.json`` / ``vocab.bpe``.

The tensor names are PyTorch's: ``wte.weight``, ``h.{i}.attn.c_attn.weight``, ``ln_f.bias``, ...
(``transformer.`` in front when the file came from ``GPT2LMHeadModel``). GPT-2's ``Conv1D`` layers
store their weights as [in, out], exactly picoGPT's layout, so nothing is transposed. There is no
separate output matrix: ``lm_head.weight`` is ``wte.weight`` (tied) and is skipped, like the causal
mask buffers ``attn.bias`` / ``attn.masked_bias`` older files carry.

``pytorch_model.bin`` (a pickle) is read only through torch, when it is installed.

It does NOT read sharded checkpoints (``model-00001-of-00002.safetensors``) or other architectures.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from tokenizer.command_line import said_if_slow
from tokenizer.outputs import check_folder, replaced_folder_files
from tokenizer.vocab_files import read_json_object

from .tfcheckpoint import DamagedFile

SAFETENSORS = "model.safetensors"
HF_MODEL_FILES = ("config.json", SAFETENSORS, "vocab.json", "merges.txt")  # what save_hf_folder writes
PYTORCH_BIN = "pytorch_model.bin"
# safetensors dtype names this reads; F16/BF16 weights are widened to float32 (a copy).
SAFETENSORS_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "F64": "<f8"}
SKIPPED = re.compile(r"(h\.\d+\.attn\.(bias|masked_bias)|lm_head\.weight)")  # buffers, and the tied output


def is_hf_folder(folder: Path) -> bool:
    return (folder / "config.json").is_file() and any((folder / f).is_file() for f in (SAFETENSORS, PYTORCH_BIN))


# ------------------------------------------------------------------------ safetensors
def read_safetensors(path) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file, by name, as read-only arrays mapped from the file; those not stored
    as float32 (F16, BF16, F64) converted to float32, a copy (1558M in 16 bits: 6 GB made, seconds; said on
    stderr, tokenizer.command_line.said_if_slow)."""
    path = Path(path)

    def damaged(why):
        return DamagedFile(f"{path} is not a readable safetensors file: {why}", path=path)

    try:
        data = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, np.uint8)
    except OSError as exc:
        raise OSError(f"cannot read {path} ({exc.strerror or exc})") from exc
    if len(data) < 8:
        raise damaged("shorter than its 8-byte header length")
    header_size = int(data[:8].view("<u8")[0])
    if 8 + header_size > len(data):
        raise damaged(f"its header claims {header_size} bytes but the file has {len(data)}")
    try:
        header = json.loads(data[8 : 8 + header_size].tobytes())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise damaged(f"its header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise damaged("its header is not a JSON object")
    body = data[8 + header_size :]
    tensors, stored_as = {}, {}  # name -> the array as stored, its safetensors dtype
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
        except (TypeError, KeyError, ValueError) as exc:
            raise damaged(f"tensor {name} has a malformed entry {info!r}") from exc
        if dtype not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {dtype}; "
                             f"this reader supports {sorted(SAFETENSORS_DTYPES)}")
        itemsize = np.dtype(SAFETENSORS_DTYPES[dtype]).itemsize
        if not 0 <= begin <= end <= len(body) or end - begin != itemsize * int(np.prod(shape, dtype=np.int64)):
            raise damaged(f"tensor {name} {dtype}{list(shape)} has data offsets {[begin, end]} that do not fit "
                          f"(the data is {len(body)} bytes: truncated?)")
        tensors[name], stored_as[name] = body[begin:end].view(SAFETENSORS_DTYPES[dtype]).reshape(shape), dtype
    converted = [name for name, dtype in stored_as.items() if dtype != "F32"]
    if not converted:
        return tensors
    kinds = " and ".join(sorted({stored_as[name] for name in converted}))
    with said_if_slow(f"converting the {kinds} weights of {path} to float32",
                      n_bytes=4 * sum(tensors[name].size for name in converted)):
        for name in converted:
            array = tensors[name]
            if stored_as[name] == "BF16":  # bfloat16 is the top half of a float32
                tensors[name] = (array.astype(np.uint32) << 16).view(np.float32)
            else:
                tensors[name] = array.astype(np.float32)
    return tensors


def write_safetensors(path, tensors, metadata: dict[str, str], *, shapes: dict | None = None) -> None:
    """Write float32 ``tensors`` (name -> array) in the safetensors format (header padded to 8 bytes, as the
    reference writer does, so the data starts aligned).

    With ``shapes`` (name -> shape, in the file's order) the header is written from them and each
    ``tensors[name]`` is asked for once, when its bytes are due: a mapping that makes its arrays on demand then
    writes a model of any size holding one tensor in memory at a time."""
    shapes = {name: array.shape for name, array in tensors.items()} if shapes is None else shapes
    header, offset = {"__metadata__": metadata}, 0
    for name, shape in shapes.items():
        nbytes = 4 * int(np.prod(shape, dtype=np.int64))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as file:
        file.write(len(header_bytes).to_bytes(8, "little"))
        file.write(header_bytes)
        for name, shape in shapes.items():
            array = np.ascontiguousarray(tensors[name], dtype="<f4")
            if array.shape != tuple(shape):
                raise ValueError(f"tensor {name} has shape {list(array.shape)}, but its header says {list(shape)}")
            file.write(memoryview(array).cast("B"))  # the array's own bytes, no copy


# ---------------------------------------------------------------------------- GPT-2
def hparams_from_config(config_path: Path) -> dict:
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {config_path} ({exc})") from exc
    names = {"n_vocab": "vocab_size", "n_ctx": "n_positions", "n_embd": "n_embd", "n_head": "n_head",
             "n_layer": "n_layer"}
    if not isinstance(config, dict) or config.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"{config_path} does not describe a GPT-2 model (model_type {config.get('model_type')!r})")
    missing = [key for key in names.values() if not isinstance(config.get(key), int)]
    if missing:
        raise ValueError(f"{config_path} lacks integer values for {missing}")
    if config.get("activation_function", "gelu_new") != "gelu_new":
        raise ValueError(f"{config_path} asks for activation {config['activation_function']!r}; GPT-2 here is gelu_new")
    return {ours: config[theirs] for ours, theirs in names.items()}


def hf_shapes(hparams: dict) -> dict[str, tuple[int, ...]]:
    """Hugging Face's GPT-2 tensor names mapped to the shapes ``hparams`` imply, in picoGPT's order."""
    d = hparams["n_embd"]
    shapes = {"wte.weight": (hparams["n_vocab"], d), "wpe.weight": (hparams["n_ctx"], d)}
    for i in range(hparams["n_layer"]):
        # a block's parts as picoGPT's tree holds them: ln_1, attn, ln_2, mlp (None marks a norm, of shape (d,))
        for layer, in_out in {"ln_1": None, "attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d),
                              "ln_2": None, "mlp.c_fc": (d, 4 * d), "mlp.c_proj": (4 * d, d)}.items():
            if in_out is None:
                shapes[f"h.{i}.{layer}.weight"] = shapes[f"h.{i}.{layer}.bias"] = (d,)
            else:
                shapes[f"h.{i}.{layer}.weight"], shapes[f"h.{i}.{layer}.bias"] = in_out, (in_out[1],)
    shapes["ln_f.weight"] = shapes["ln_f.bias"] = (d,)
    return shapes


def params_from_hf_tensors(tensors: dict[str, np.ndarray], hparams: dict, where: Path) -> dict:
    """picoGPT's params tree from Hugging Face's tensors, every name and shape checked."""
    tensors = {name.removeprefix("transformer."): array for name, array in tensors.items()}
    expected = hf_shapes(hparams)
    missing = [name for name in expected if name not in tensors]
    unexpected = [name for name in tensors if name not in expected and not SKIPPED.fullmatch(name)]
    if missing or unexpected:
        raise ValueError(f"{where} does not match its config.json {hparams}: missing tensors {missing[:5]}"
                         f"{' ...' if len(missing) > 5 else ''}, unexpected tensors {unexpected[:5]}"
                         f"{' ...' if len(unexpected) > 5 else ''}")
    # the tree laid out first in the order load_gpt2_params_from_tf_ckpt gives (wte, wpe, blocks of ln_1, attn, ln_2,
    # mlp, ln_f), whatever order the tensors come in: a model loads to one tree, whichever files it came from
    block_parts = ("ln_1", "attn", "ln_2", "mlp")
    params: dict = {"wte": None, "wpe": None, "blocks": [{part: {} for part in block_parts}
                                                         for _ in range(hparams["n_layer"])], "ln_f": {}}
    for name, shape in expected.items():
        array = tensors[name]
        if array.dtype != np.float32:  # (read_safetensors converts its own; a caller's tensors may be of any)
            array = array.astype(np.float32)
        if array.shape != shape:
            raise ValueError(f"{where}: tensor {name} has shape {list(array.shape)}, but config.json "
                             f"{hparams} implies {list(shape)}")
        *keys, last = picogpt_keys(name)
        node = params
        for key in keys:
            node = node[key] if isinstance(key, int) else node.setdefault(key, {})
        node[last] = array
    return params


def picogpt_keys(name: str) -> list:
    """Where a Hugging Face tensor goes in the params tree: "wte.weight" -> ["wte"],
    "h.3.ln_1.weight" -> ["blocks", 3, "ln_1", "g"], "h.3.mlp.c_fc.weight" -> ["blocks", 3, "mlp", "c_fc", "w"]."""
    *keys, last = name.split(".")
    if keys in (["wte"], ["wpe"]):
        return keys
    if keys[0] == "h":
        keys = ["blocks", int(keys[1]), *keys[2:]]
    is_norm = keys[-1].startswith("ln_")
    return [*keys, {"weight": "g" if is_norm else "w", "bias": "b"}[last]]


def read_hf_weights(folder: Path) -> tuple[dict[str, np.ndarray], Path]:
    """The tensors of ``model.safetensors``, else of ``pytorch_model.bin`` through torch."""
    if (folder / SAFETENSORS).is_file():
        return read_safetensors(folder / SAFETENSORS), folder / SAFETENSORS
    try:
        import torch  # optional: only an old-style pytorch_model.bin needs it
    except ImportError:
        raise ValueError(f"{folder / PYTORCH_BIN} is a PyTorch pickle, which needs torch to read: pip install "
                         f"torch, or convert the folder to {SAFETENSORS}") from None
    path = folder / PYTORCH_BIN
    # a pickle is read whole, not mapped (1558M: 6 GB, seconds): said as the other slow steps of a load are
    with said_if_slow(f"reading {path} through torch", n_bytes=path.stat().st_size):
        state = torch.load(path, map_location="cpu", weights_only=True)
        return {name: value.float().numpy() for name, value in state.items()}, path


def load_hf_folder(folder) -> tuple[dict, dict]:
    """``(hparams, params)`` of the Hugging Face GPT-2 folder ``folder``."""
    folder = Path(folder)
    hparams = hparams_from_config(folder / "config.json")
    tensors, where = read_hf_weights(folder)
    return hparams, params_from_hf_tensors(tensors, hparams, where)


def read_hf_vocab(folder: Path) -> tuple[dict[str, int], list[tuple[str, str]]] | None:
    """The token->id map and merges from ``vocab.json`` + ``merges.txt`` or ``tokenizer.json``;
    None when the folder has neither."""
    try:
        if (folder / "vocab.json").is_file() and (folder / "merges.txt").is_file():
            vocab = read_json_object(folder / "vocab.json", "a JSON object mapping token strings to ids")
            lines = (folder / "merges.txt").read_text(encoding="utf-8").split("\n")
            return vocab, [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
        if (folder / "tokenizer.json").is_file():
            model = read_json_object(folder / "tokenizer.json", "an HF tokenizer.json with a BPE model")["model"]
            merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
            return model["vocab"], merges
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cannot read the tokenizer files in {folder} ({exc})") from exc
    return None


def check_hf_folder(folder, *, overwrite: bool = False, flag: str | None = None) -> Path:
    """``folder`` checked as :func:`save_hf_folder`'s destination (:func:`tokenizer.outputs.check_folder`): one
    that holds a model's files is refused unless ``overwrite``. Returns where to write."""
    return check_folder(folder, holds=hf_model_files, what="a model", overwrite=overwrite, flag=flag)


def save_hf_folder(folder, hparams: dict, params: dict, vocab: dict[str, int], merges, *,
                   overwrite: bool = False, flag: str | None = None) -> None:
    """Write a folder ``transformers.GPT2LMHeadModel.from_pretrained`` loads: config.json,
    model.safetensors, vocab.json, merges.txt (:data:`HF_MODEL_FILES`), by the project's output rule
    (:mod:`tokenizer.outputs`): checked first, written beside the folder and moved in once complete. A
    folder that already holds any of those files is refused unless ``overwrite``; other files in it stay."""
    folder = check_hf_folder(folder, overwrite=overwrite, flag=flag)
    tensors = {}
    for name in hf_shapes(hparams):
        node = params
        for key in picogpt_keys(name):
            node = node[key]
        tensors[name] = node
    with replaced_folder_files(folder) as partial:
        (partial / "config.json").write_text(json.dumps(hf_config(hparams), indent=2) + "\n", encoding="utf-8")
        write_safetensors(partial / SAFETENSORS, tensors, {"format": "pt"})  # transformers asks for "pt"
        (partial / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
        (partial / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges),
                                            encoding="utf-8")


def hf_config(hparams: dict) -> dict:
    """The ``config.json`` of a GPT-2 with these sizes, as ``transformers`` writes it (the keys it reads)."""
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": hparams["n_vocab"],
            "n_positions": hparams["n_ctx"], "n_ctx": hparams["n_ctx"], "n_embd": hparams["n_embd"],
            "n_head": hparams["n_head"], "n_layer": hparams["n_layer"], "activation_function": "gelu_new",
            "layer_norm_epsilon": 1e-5, "bos_token_id": 50256, "eos_token_id": 50256}


def hf_model_files(folder: Path) -> list[str]:
    """The files of :data:`HF_MODEL_FILES` that ``folder`` holds (what :func:`save_hf_folder` would replace)."""
    return [name for name in HF_MODEL_FILES if (folder / name).exists()]
