"""GPT-2's forward pass in NumPy, as picoGPT writes it: token ids in, every position's logits out.

The model is one function per idea of the GPT-2 paper, with the shape of the array on each line:
`gpt2(inputs, **params, n_head=...)` takes token ids and returns every position's logits,
recomputing the whole sequence each time. `generate_reference` is picoGPT's generation loop on top
of it: run everything, take the most likely next id, append, repeat.

    logits = gpt2(prompt_ids, **params, n_head=n_head)                     # [n_seq, n_vocab]
    new_ids = generate_reference(prompt_ids, params, n_head, 40)           # greedy, full recompute

`params` is picoGPT's tree of arrays (from `gpt2_numpy.checkpoints.load_encoder_hparams_and_params`):
{"wte", "wpe", "blocks": [{"ln_1", "attn", "ln_2", "mlp"}, ...], "ln_f"}.

What it does not do: go fast. It holds no key/value cache, no batching and no memory-layout tricks,
so it reads top to bottom; `kvcache.py` generates the same tokens computing each position once,
and the tests hold the two equal, and both to HF transformers. It does not read checkpoints, turn
text into ids or sample either.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["gpt2", "generate_reference", "as_float32", "gelu", "softmax", "layer_norm", "linear", "ffn",
           "attention", "mha", "transformer_block"]


def as_float32(tree):
    """The params tree (or any nest of dicts and lists of arrays) with every array as float32: no copy
    when it already is, whatever its memory order. The tree itself is new; the caller's is untouched."""
    if isinstance(tree, dict):
        return {key: as_float32(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [as_float32(value) for value in tree]
    return np.asarray(tree, dtype=np.float32)


# ---------------------------------------------------------------------------- model
# Everything is float32. Constants are Python floats (math.sqrt, not np.sqrt): a NumPy float64
# scalar would turn every array it touches into float64.
def gelu(x):  # [...] -> [...]
    # GPT-2's tanh approximation of x * P(X <= x) for a standard normal X ("gelu_new" in HF)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x):  # [..., n] -> [..., n], each row summing to 1
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))  # minus the max: exp cannot overflow
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):  # [n_seq, n_embd] -> [n_seq, n_embd]
    mean = np.mean(x, axis=-1, keepdims=True)  # [n_seq, 1]
    variance = np.var(x, axis=-1, keepdims=True)  # [n_seq, 1]
    return g * (x - mean) / np.sqrt(variance + eps) + b  # each row: mean 0, variance 1, then scaled


def linear(x, w, b):  # [n_seq, n_in] @ [n_in, n_out] + [n_out] -> [n_seq, n_out]
    return x @ w + b


def ffn(x, c_fc, c_proj):  # [n_seq, n_embd] -> [n_seq, n_embd]
    a = gelu(linear(x, **c_fc))  # [n_seq, n_embd] -> [n_seq, 4*n_embd]
    return linear(a, **c_proj)  # [n_seq, 4*n_embd] -> [n_seq, n_embd]


def attention(q, k, v, mask):  # q, k, v [n_seq, d], mask [n_seq, n_seq] -> [n_seq, d]
    return softmax(q @ k.T / math.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):  # [n_seq, n_embd] -> [n_seq, n_embd]
    q, k, v = np.split(linear(x, **c_attn), 3, axis=-1)  # [n_seq, 3*n_embd] -> 3 x [n_seq, n_embd]
    q_heads, k_heads, v_heads = (np.split(a, n_head, axis=-1) for a in (q, k, v))  # 3 x n_head x [n_seq, d]
    causal_mask = (1 - np.tri(len(x), dtype=x.dtype)) * -1e10  # [n_seq, n_seq]: i sees 0..i only
    heads = [attention(*qkv, causal_mask) for qkv in zip(q_heads, k_heads, v_heads)]  # n_head x [n_seq, d]
    return linear(np.hstack(heads), **c_proj)  # [n_seq, n_embd] -> [n_seq, n_embd]


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):  # [n_seq, n_embd] -> [n_seq, n_embd]
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)  # [n_seq, n_embd]
    x = x + ffn(layer_norm(x, **ln_2), **mlp)  # [n_seq, n_embd]
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):  # [n_seq] -> [n_seq, n_vocab]
    wte, wpe, blocks, ln_f = as_float32([wte, wpe, blocks, ln_f])  # float32 whatever was passed
    x = wte[inputs] + wpe[range(len(inputs))]  # [n_seq] -> [n_seq, n_embd]
    for block in blocks:  # n_layer x
        x = transformer_block(x, **block, n_head=n_head)  # [n_seq, n_embd] -> [n_seq, n_embd]
    x = layer_norm(x, **ln_f)  # [n_seq, n_embd] -> [n_seq, n_embd]
    return x @ wte.T  # [n_seq, n_embd] -> [n_seq, n_vocab]: the input embedding, reused


def generate_reference(inputs, params, n_head, n_tokens_to_generate):  # [n_seq] -> [n_new]
    """picoGPT's greedy loop: the whole sequence through gpt2() for every new token."""
    inputs = list(inputs)
    for _ in range(n_tokens_to_generate):
        logits = gpt2(inputs, **params, n_head=n_head)  # [n_seq, n_vocab]
        inputs.append(int(np.argmax(logits[-1])))  # the most likely next id
    return inputs[len(inputs) - n_tokens_to_generate :]
