"""Write a tiny GPT-2 checkpoint in OpenAI's exact TensorFlow format, for tests.

The real 124M checkpoint is 500 MB and needs the internet. This writes one with the same variable
names and layouts but random weights and a toy size (2 layers, 16 wide), in well under a second,
so loaders and the inference code can be tested against the genuine file format.

OpenAI's layout, which this reproduces (D = n_embd):

    model/wte [n_vocab, D]    model/wpe [n_ctx, D]    model/ln_f/{g,b} [D]
    model/h{i}/ln_1/{g,b} [D]                         model/h{i}/ln_2/{g,b} [D]
    model/h{i}/attn/c_attn/w [1, D, 3D]  b [3D]       model/h{i}/attn/c_proj/w [1, D, D]   b [D]
    model/h{i}/mlp/c_fc/w    [1, D, 4D]  b [4D]       model/h{i}/mlp/c_proj/w  [1, 4D, D]  b [D]

The ``[1, nx, nf]`` weights are a quirk of GPT-2's TF code, which stored its dense layers as 1x1
convolutions. The layout is spelled out here on its own, rather than taken from utils.py, so that a
mistake in the loader's idea of it cannot hide from the round-trip tests.

The checkpoint is written with TF's raw ``SaveV2`` op, which stores tensors under exactly the names
given (higher-level savers add suffixes such as ``/.ATTRIBUTES/VARIABLE_VALUE``). No ``.meta`` graph
file is written; nothing here reads one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

VOCAB_DIR = Path(__file__).resolve().parents[1] / "tokenizer" / "data"


def write_tiny_checkpoint(
    model_dir,
    *,
    n_vocab: int = 50257,
    n_ctx: int = 32,
    n_embd: int = 16,
    n_head: int = 2,
    n_layer: int = 2,
    seed: int = 0,
) -> dict:
    """Write ``checkpoint``, ``model.ckpt.*``, ``hparams.json``, ``encoder.json`` and ``vocab.bpe``
    into ``model_dir`` (created if needed) and return the same weights as picoGPT's params tree.

    The default ``n_vocab`` is GPT-2's, so the real GPT-2 tokenizer can drive the tiny model.
    """
    import tensorflow as tf  # imported here: only tests that write checkpoints pay for TF

    if n_embd % n_head:
        raise ValueError(f"n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def normal(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def layer_norm():  # gains near 1 and small biases, like a trained model
        return {"g": 1 + normal(n_embd, scale=0.1), "b": normal(n_embd)}

    def dense(nx, nf):  # picoGPT layout: w is [nx, nf] (the checkpoint adds a leading 1)
        return {"w": normal(nx, nf), "b": normal(nf)}

    d = n_embd
    params = {
        "wte": normal(n_vocab, d),
        "wpe": normal(n_ctx, d, scale=0.01),
        "blocks": [
            {
                "ln_1": layer_norm(),
                "attn": {"c_attn": dense(d, 3 * d), "c_proj": dense(d, d)},
                "ln_2": layer_norm(),
                "mlp": {"c_fc": dense(d, 4 * d), "c_proj": dense(4 * d, d)},
            }
            for _ in range(n_layer)
        ],
        "ln_f": layer_norm(),
    }

    tensors = {"model/wte": params["wte"], "model/wpe": params["wpe"]}
    for i, block in enumerate(params["blocks"]):
        for path, array in _leaves(block):
            # Dense weights go back to the convolution shape [1, nx, nf] OpenAI saved.
            tensors[f"model/h{i}/{path}"] = array[np.newaxis] if path.endswith("/w") else array
    for key, array in params["ln_f"].items():
        tensors[f"model/ln_f/{key}"] = array

    prefix = str(model_dir / "model.ckpt")
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),  # "" = each tensor whole, not a slice
        tensors=[tf.constant(tensors[name]) for name in names],
    )
    # The `checkpoint` file is how tf.train.latest_checkpoint finds "model.ckpt" in the directory.
    # Written by hand, word for word as in OpenAI's release: a relative path keeps the directory
    # movable (TF's own helper would record an absolute one).
    (model_dir / "checkpoint").write_text(
        'model_checkpoint_path: "model.ckpt"\nall_model_checkpoint_paths: "model.ckpt"\n'
    )

    hparams = {"n_vocab": n_vocab, "n_ctx": n_ctx, "n_embd": n_embd, "n_head": n_head, "n_layer": n_layer}
    (model_dir / "hparams.json").write_text(json.dumps(hparams, indent=2) + "\n")
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copyfile(VOCAB_DIR / name, model_dir / name)
    return params


def _leaves(tree: dict, prefix: str = ""):
    """Yield ("ln_1/g", array)-style pairs for every array in a nested dict."""
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _leaves(value, path + "/")
        else:
            yield path, value
