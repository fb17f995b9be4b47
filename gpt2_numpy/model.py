"""GPT-2's forward pass in NumPy, as picoGPT writes it: token ids in, every position's logits out.

The model is one function per idea of the GPT-2 paper, with the shape of the array on each line:
`gpt2(inputs, **params, n_head=...)` takes token ids and returns every position's logits,
recomputing the whole sequence each time. `generate_reference` is picoGPT's generation loop on top
of it: run everything, take the most likely next id, append, repeat.

    logits = gpt2(prompt_ids, **params, n_head=n_head)                     # [n_seq, n_vocab]
    new_ids = generate_reference(prompt_ids, params, n_head, 40)           # greedy, full recompute

`params` is picoGPT's tree of arrays (from `gpt2_numpy.checkpoints.load_encoder_hparams_and_params`):
{"wte", "wpe", "blocks": [{"ln_1", "attn", "ln_2", "mlp"}, ...], "ln_f"}.

These functions are also what the fast decoder runs: `kvcache.py` calls `layer_norm`, `linear`, `ffn`,
`split_qkv`, `split_heads`, `attention`, `merge_heads` and `causal_mask` from here and adds the
key/value cache around them (with the padding of batched prompts and the weights' memory order). So each
layer takes any leading axes ([..., n_embd]: one sequence here, a batch of rows there), and three of
them carry a speed trick, each commented where it is: `gelu`'s x * x * x, `layer_norm`'s sums,
`linear`'s one 2-D product. picoGPT's loop over heads is an axis of heads (`split_heads`), so one
`attention` call runs them all. One layer has a faster twin beside it, tested equal: `attention_in_blocks`,
which the decoder runs when many positions arrive at once (a prompt, a scored window) and which reads
only the keys a causal mask lets each block of queries see.

What it does not do: keep a cache, batch prompts, lay weights out for speed or sample (all
`kvcache.py`, tested to give the tokens of `generate_reference`, and both the logits of HF
transformers). It does not read checkpoints or turn text into ids either.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["gpt2", "generate_reference", "as_float32", "gelu", "softmax", "layer_norm", "linear", "ffn",
           "causal_mask", "attention", "attention_in_blocks", "split_qkv", "split_heads", "merge_heads", "mha",
           "transformer_block"]


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
# Every function takes any number of leading axes ([..., n_embd]): gpt2() passes one sequence,
# kvcache.py's decoder a batch of them, or one new position per row, through the same lines.
def gelu(x):  # [...] -> [...]
    # GPT-2's tanh approximation of x * P(X <= x) for a standard normal X ("gelu_new" in HF);
    # x * x * x rather than x**3, which NumPy computes for float32 with its slower general power
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))


def softmax(x):  # [..., n] -> [..., n], each row summing to 1
    x = np.asarray(x)  # a list too, as picoGPT's np.max(x, ...) takes one: softmax([2.0, 1.0, 0.1])
    exp_x = np.exp(x - x.max(axis=-1, keepdims=True))  # minus the max: exp cannot overflow
    return exp_x / exp_x.sum(axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):  # [..., n_embd] -> [..., n_embd]
    # sums divided by n rather than np.mean and np.var, whose Python-level overhead outweighs the
    # arithmetic on the single row a decoding step normalises (the .sum method: less of it again)
    x = np.asarray(x)  # a list too, as picoGPT's np.mean(x, ...) takes one
    n = x.shape[-1]
    centred = x - x.sum(axis=-1, keepdims=True) / n  # [..., n_embd], each row's mean now 0
    variance = (centred * centred).sum(axis=-1, keepdims=True) / n  # [..., 1]
    return g * centred / np.sqrt(variance + eps) + b  # each row: mean 0, variance 1, then scaled


def linear(x, w, b):  # [..., n_in] @ [n_in, n_out] + [n_out] -> [..., n_out]
    # the rows of every leading axis as one 2-D product: x @ w on a batch [n_batch, n_seq, n_in]
    # multiplies each sequence apart, reading w once per sequence instead of once
    x = np.asarray(x)  # a list too, as picoGPT's x @ w takes one
    rows = x.reshape(-1, x.shape[-1])  # [n_rows, n_in]
    return (rows @ w + b).reshape(*x.shape[:-1], w.shape[-1])  # [n_rows, n_out] -> [..., n_out]


def ffn(x, c_fc, c_proj):  # [..., n_embd] -> [..., n_embd]
    a = gelu(linear(x, **c_fc))  # [..., n_embd] -> [..., 4*n_embd]
    return linear(a, **c_proj)  # [..., 4*n_embd] -> [..., n_embd]


def causal_mask(n_seq, n_before=0):  # -> [n_seq, n_before + n_seq]
    """What the newest n_seq positions may attend to, after n_before earlier ones: 0 where position i
    may look (itself and every position before it), -1e10 where it may not (softmax weight 0).
    gpt2() has no earlier positions; kvcache.py's decoder has the cached ones."""
    sees = np.tri(n_seq, n_before + n_seq, k=n_before, dtype=np.float32)  # 1 on and below the diagonal
    return (sees - 1) * 1e10  # [n_seq, n_before + n_seq]: 0 (not -0) where it may look


def attention(q, k, v, mask):  # q [..., n_q, d], k, v [..., n_k, d], mask [..., n_q, n_k] -> [..., n_q, d]
    # each query's weights over the keys (scaled so they do not grow with d) average the values;
    # the leading axes are heads (and batch rows), each attending on its own
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])  # [..., n_q, n_k]
    return softmax(scores + mask) @ v  # [..., n_q, n_k] @ [..., n_k, d] -> [..., n_q, d]


def attention_in_blocks(q, k, v, mask, block=128):  # the shapes of attention(), n_k = n_before + n_q
    """attention() for many queries at once (a prefill, a scored window), computed `block` queries at a time.

    Why it exists: under a causal mask query i sees only keys up to n_before + i, so a block of queries ending
    at j needs only the first n_before + j keys; the rest would get weight 0. Over a whole sequence that skips
    nearly half the scores, and a block's scores ([..., block, n_k]) stay in the CPU cache where the full
    [..., n_q, n_k] array would not. The softmax is done in place, and its division applied to the block's
    output ([..., block, d]) rather than to its weights ([..., block, n_k]): the same numbers, fewer passes.
    The mask must be causal, plus keys hidden from every query alike (KVDecoder's padding): then a block needs
    it only on those keys' columns and on its own diagonal stretch; the columns between, which every query of
    the block sees, are not touched. Keys after n_before + j are never read."""
    n_q, n_before = q.shape[-2], k.shape[-2] - q.shape[-2]
    out = np.empty(np.broadcast_shapes(q.shape[:-2], k.shape[:-2]) + q.shape[-2:], dtype=np.float32)
    q = q * (1 / math.sqrt(q.shape[-1]))  # scaled once: [..., n_q, d] is smaller than the scores
    # the last query sees every key the causal mask allows, so what its row hides is hidden from all
    hidden = np.flatnonzero((mask[..., -1, :] != 0).reshape(-1, mask.shape[-1]).any(axis=0))  # key columns
    n_hidden = int(hidden[-1]) + 1 if hidden.size else 0  # the mask's columns to add before the diagonal
    ones = np.ones((k.shape[-2], 1), dtype=np.float32)
    for i in range(0, n_q, block):
        j = min(i + block, n_q)
        seen = n_before + j  # the keys any of queries i..j may look at
        scores = q[..., i:j, :] @ np.swapaxes(k[..., :seen, :], -1, -2)  # [..., j - i, seen]
        before = min(n_hidden, n_before + i)
        scores[..., :before] += mask[..., i:j, :before]  # keys hidden from every query
        scores[..., n_before + i :] += mask[..., i:j, n_before + i : seen]  # the causal triangle
        scores -= scores.max(axis=-1, keepdims=True)  # exp cannot overflow
        np.exp(scores, out=scores)  # softmax's numerators
        np.matmul(scores, v[..., :seen, :], out=out[..., i:j, :])  # [..., j - i, d], not yet divided
        out[..., i:j, :] /= scores @ ones[:seen]  # softmax's denominators: row sums, a product being faster
    return out


def split_qkv(x):  # [..., 3*n_embd] -> 3 x [..., n_embd]
    # each position's query, key and value come out of one product side by side: cut them apart (as
    # picoGPT's np.split(x, 3, axis=-1), whose own Python overhead shows in a one-position decoding step)
    n_embd = x.shape[-1] // 3
    return x[..., :n_embd], x[..., n_embd : 2 * n_embd], x[..., 2 * n_embd :]


def split_heads(x, n_head):  # [..., n_seq, n_embd] -> [..., n_head, n_seq, n_embd/n_head]
    # head h owns columns h*d .. (h+1)*d of every position's vector (picoGPT: np.split into n_head
    # arrays); here the heads become an axis, so attention() runs them all in one call
    *lead, n_seq, n_embd = x.shape
    return np.swapaxes(x.reshape(*lead, n_seq, n_head, n_embd // n_head), -3, -2)


def merge_heads(x):  # [..., n_head, n_seq, d] -> [..., n_seq, n_head*d]
    # the heads' outputs side by side again (picoGPT: np.hstack), the inverse of split_heads
    *lead, n_head, n_seq, d = x.shape
    return np.swapaxes(x, -3, -2).reshape(*lead, n_seq, n_head * d)


def mha(x, c_attn, c_proj, n_head):  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    q, k, v = split_qkv(linear(x, **c_attn))  # [..., n_seq, 3*n_embd] -> 3 x [..., n_seq, n_embd]
    q, k, v = (split_heads(a, n_head) for a in (q, k, v))  # 3 x [..., n_head, n_seq, d]
    heads = attention(q, k, v, causal_mask(x.shape[-2]))  # [..., n_head, n_seq, d], one mask for every head
    return linear(merge_heads(heads), **c_proj)  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)  # [..., n_seq, n_embd]: positions read earlier ones
    x = x + ffn(layer_norm(x, **ln_2), **mlp)  # [..., n_seq, n_embd]: each position on its own
    return x


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):  # [n_seq] -> [n_seq, n_vocab]
    wte, wpe, blocks, ln_f = as_float32([wte, wpe, blocks, ln_f])  # float32 whatever was passed
    x = wte[inputs] + wpe[range(len(inputs))]  # [n_seq] -> [n_seq, n_embd]
    for block in blocks:  # n_layer x
        x = transformer_block(x, **block, n_head=n_head)  # [n_seq, n_embd] -> [n_seq, n_embd]
    x = layer_norm(x, **ln_f)  # [n_seq, n_embd] -> [n_seq, n_embd]
    return x @ wte.T  # [n_seq, n_embd] -> [n_seq, n_vocab]: the input embedding, reused


def generate_reference(inputs, params, n_head, n_tokens_to_generate):  # [n_seq] -> [n_new]
    """picoGPT's greedy loop: the whole sequence through gpt2() for every new token. Its inputs are checked as
    ``kvcache.generate`` checks them, with the same words (past the context, wpe has no row to give)."""
    inputs = list(inputs)
    if not inputs:
        raise ValueError("every prompt needs at least one token (e.g. [50256], <|endoftext|>)")
    n_tokens_to_generate = count_of_new_tokens(n_tokens_to_generate)
    check_fits_context(len(inputs), n_tokens_to_generate, len(params["wpe"]))  # wpe: one row per position
    for _ in range(n_tokens_to_generate):
        logits = gpt2(inputs, **params, n_head=n_head)  # [n_seq, n_vocab]
        inputs.append(int(np.argmax(logits[-1])))  # the most likely next id
    return inputs[len(inputs) - n_tokens_to_generate :]


def count_of_new_tokens(n_tokens_to_generate) -> int:
    """``n_tokens_to_generate`` as an int, once it is checked to be one (a NumPy integer counts) and >= 0.

    A float or a bool is refused rather than read as a count: ``int(2.5)`` would quietly generate 2 tokens.
    """
    if isinstance(n_tokens_to_generate, (bool, np.bool_)) or not isinstance(n_tokens_to_generate, (int, np.integer)):
        raise TypeError(f"n_tokens_to_generate must be a whole number of tokens (an int), got "
                        f"{n_tokens_to_generate!r} ({type(n_tokens_to_generate).__name__})")
    if n_tokens_to_generate < 0:
        raise ValueError(f"n_tokens_to_generate must be >= 0, got {n_tokens_to_generate}")
    return int(n_tokens_to_generate)


def check_fits_context(n_prompt, n_new, n_ctx):
    """A ValueError with the numbers and what to change when n_prompt + n_new tokens exceed n_ctx."""
    if n_prompt + n_new <= n_ctx:
        return
    if n_prompt >= n_ctx:  # no count of new tokens would help: only a shorter prompt does
        fits = f"at most {n_ctx - n_new} tokens" if n_new < n_ctx else "fewer tokens, and ask for fewer new ones"
        raise ValueError(
            f"the prompt is too long: {n_prompt} tokens, and the model's context holds n_ctx={n_ctx} tokens "
            f"in all, the prompt's and n_tokens_to_generate={n_new} new ones together; shorten the prompt "
            f"to {fits}")
    # a shorter prompt helps only while the new tokens alone fit
    shorter = f", or shorten the prompt to at most {n_ctx - n_new} tokens" if n_new < n_ctx else ""
    raise ValueError(
        f"prompt of {n_prompt} token{'' if n_prompt == 1 else 's'} + n_tokens_to_generate={n_new} = "
        f"{n_prompt + n_new} exceeds the model's context of n_ctx={n_ctx} tokens; ask for at most "
        f"{n_ctx - n_prompt} new tokens{shorter}")
