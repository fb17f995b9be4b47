"""How well GPT-2 predicts a text: each token's negative log-likelihood, and their mean.

`token_nlls(ids, params, n_head)` runs the readable forward pass (`model.gpt2`) over the text and
reads off, for each id after the first, minus the log of the probability the model gave it. A text
longer than the context (n_ctx) is read in overlapping windows, the usual stride recipe, so every
scored id still sees at least n_ctx - stride ids before it. `score` is their mean (nats per token);
the `gpt2 --score FILE` command prints it as perplexity and bits per byte.

What it does not do: turn text into ids or load a model; it scores ids with the params it is given.
Tested equal to Hugging Face transformers' loss on the same weights.
"""
from __future__ import annotations

import numpy as np

from .model import gpt2

__all__ = ["token_nlls", "score"]


def token_nlls(ids, params, n_head, *, stride=None):  # [n_seq] -> [n_scored], [n_scored]
    """The negative log-likelihood (nats) of each id given the ids before it, and the positions
    scored. The first id has no context and is not scored. Longer than the context (n_ctx), the
    text is read in windows of n_ctx ids starting `stride` apart (default n_ctx // 2); each window
    scores only the ids no earlier window scored, so those still see >= n_ctx - stride ids before them.
    (With stride == n_ctx the windows do not overlap and each one's first id goes unscored, as in
    Hugging Face's recipe.)"""
    n_ctx = len(params["wpe"])
    stride = n_ctx // 2 if stride is None else stride
    if len(ids) < 2 or not 0 < stride <= n_ctx:
        raise ValueError(f"score needs >= 2 ids and 0 < stride <= n_ctx ({n_ctx}), got {len(ids)} ids, stride {stride}")
    nlls, positions, scored_up_to = [], [], 1  # ids[:scored_up_to] are done (ids[0] has no context)
    for start in range(0, len(ids), stride):
        end = min(start + n_ctx, len(ids))
        first = max(scored_up_to, start + 1)  # the first id this window scores
        logits = gpt2(ids[start:end], **params, n_head=n_head)  # [end - start, n_vocab]
        rows = logits[first - 1 - start : end - 1 - start]  # the rows predicting ids[first:end]
        log_probs = rows - rows.max(axis=-1, keepdims=True)  # log softmax, without overflow
        log_probs -= np.log(np.exp(log_probs).sum(axis=-1, keepdims=True))
        nlls.append(-log_probs[np.arange(len(rows)), ids[first:end]].astype(np.float64))  # [end - first]
        positions.append(np.arange(first, end))  # [end - first]
        scored_up_to = end
        if end == len(ids):
            break
    return np.concatenate(nlls), np.concatenate(positions)  # [n_scored], [n_scored]


def score(ids, params, n_head, *, stride=None):  # [n_seq] -> float
    """Mean negative log-likelihood (nats per scored id) of `ids`, windowed as in token_nlls."""
    nlls, _ = token_nlls(ids, params, n_head, stride=stride)  # [n_scored]
    return float(nlls.mean())
