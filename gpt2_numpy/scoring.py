"""How well GPT-2 predicts a text: each token's negative log-likelihood, and their mean.

`token_nlls(ids, params, n_head)` runs the text through the model and reads off, for each id after the
first, minus the log of the probability the model gave it. A text longer than the context (n_ctx) is
read in overlapping windows, the usual stride recipe, so every scored id still sees at least
n_ctx - stride ids before it. `score` is their mean (nats per token); the `gpt2 --score FILE` command
prints it as perplexity and bits per byte.

Each window is one prefill of the KV decoder (`kvcache.KVDecoder.prefill_states`: model.py's layers, every
position at once), which gives every position's final state. A position's log-probabilities are
log_softmax(state @ wte.T), 50257 of them, but scoring needs only two numbers of each row: the target's
logit and the row's logsumexp. So `next_token_nlls` computes logits only for the positions a window
scores (half of them, once windows overlap by half), a slice of the vocabulary at a time, keeping a
running logsumexp instead of the [n_scored, n_vocab] array.

What it does not do: turn text into ids or load a model; it scores ids with the params it is given.
Tested equal to Hugging Face transformers' loss on the same weights, and to model.gpt2's logits.
"""
from __future__ import annotations

import numpy as np

from .bands import in_bands
from .kvcache import DecodingWeights, KVDecoder

__all__ = ["token_nlls", "score", "windows", "next_token_nlls"]


def token_nlls(ids, params, n_head, *, stride=None, progress=None):  # [n_seq] -> [n_scored], [n_scored]
    """The negative log-likelihood (nats) of each id given the ids before it, and the positions
    scored. The first id has no context and is not scored. Longer than the context (n_ctx), the
    text is read in windows of n_ctx ids starting `stride` apart (default n_ctx // 2; see `windows`); each window
    scores only the ids no earlier window scored, so those still see >= n_ctx - stride ids before them.
    (With stride == n_ctx the windows do not overlap and each one's first id goes unscored, as in
    Hugging Face's recipe.)

    params: picoGPT's params tree, or a kvcache.DecodingWeights built from one.
    progress: called after each window with the number of ids it scored (e.g. a tqdm bar's update);
    the counts add up to the number of positions returned."""
    weights = params if isinstance(params, DecodingWeights) else DecodingWeights(params)
    spans = windows(len(ids), weights.n_ctx, stride=stride)  # [(start, end, first), ...]
    ids = np.asarray(ids, dtype=np.int64)
    wte = weights.params["wte"]
    nlls = []
    for start, end, first in spans:
        # the states predicting ids[first:end] are those of positions first - 1 .. end - 2: the window's last
        # end - first + 1 positions but its very last, which predicts the id after the window
        decoder = KVDecoder([ids[start:end]], weights, n_head, 0)
        rows = decoder.prefill_states(end - first + 1)[0, :-1]  # [end - first, n_embd]
        # each row's NLL is its own: a band of rows per core (bands.in_bands), equal to one call
        nlls.append(in_bands(lambda band, targets: next_token_nlls(band, wte, targets), rows, ids[first:end],
                             axis=0))  # [end - first]
        if progress is not None:
            progress(end - first)
    positions = [np.arange(first, end) for _, end, first in spans]  # [end - first] each
    return np.concatenate(nlls), np.concatenate(positions)  # [n_scored], [n_scored]


def windows(n_ids, n_ctx, *, stride=None):  # -> [(start, end, first), ...]
    """The windows token_nlls reads over n_ids ids: each is ids[start:end] (at most n_ctx of them) and
    scores ids[first:end], the ids no earlier window scored. Windows start `stride` apart (default
    n_ctx // 2); the first id is never scored (it has no context), so the windows score n_ids - 1 ids,
    fewer only when stride == n_ctx (each later window's first id has no context in its window)."""
    stride = n_ctx // 2 if stride is None else stride
    if n_ids < 2 or not 0 < stride <= n_ctx:
        raise ValueError(f"score needs >= 2 ids and 0 < stride <= n_ctx ({n_ctx}), got {n_ids} ids, stride {stride}")
    spans, scored_up_to = [], 1  # ids[:scored_up_to] are done (ids[0] has no context)
    for start in range(0, n_ids, stride):
        end = min(start + n_ctx, n_ids)
        spans.append((start, end, max(scored_up_to, start + 1)))
        scored_up_to = end
        if end == n_ids:
            break
    return spans


def next_token_nlls(states, wte, targets, *, chunk=4096):  # [n, n_embd], [n_vocab, n_embd], [n] -> [n]
    """-log_softmax(states @ wte.T)[i, targets[i]] for each row i, as float64: the row's logsumexp
    minus its target's logit.

    Why not write it as that one line: the logits of a 1,024-position window are [1024, 50257], 200 MB
    of float32 written and read back several times over. Here the vocabulary goes by in slices of
    `chunk` ids, whose logits ([n, chunk]) stay in the CPU cache while a running logsumexp takes them
    in: the largest logit so far, and the sum of exp(logit - largest), rescaled when the largest grows."""
    largest = np.full(len(states), -np.inf, dtype=np.float32)  # [n]
    total = np.zeros(len(states), dtype=np.float64)  # [n]: sum of exp(logit - largest) so far
    for v in range(0, len(wte), chunk):
        logits = states @ wte[v : v + chunk].T  # [n, chunk]
        new_largest = np.maximum(largest, logits.max(axis=-1))  # [n]
        logits -= new_largest[:, None]  # <= 0: exp cannot overflow
        np.exp(logits, out=logits)
        total = total * np.exp(largest - new_largest) + logits.sum(axis=-1)  # the old sum, rescaled
        largest = new_largest
    target = np.einsum("ij,ij->i", states, wte[targets])  # [n]: each row's logit of its own target
    return (largest + np.log(total)) - target.astype(np.float64)  # [n]: logsumexp - target logit


def score(ids, params, n_head, *, stride=None):  # [n_seq] -> float
    """Mean negative log-likelihood (nats per scored id) of `ids`, windowed as in token_nlls."""
    nlls, _ = token_nlls(ids, params, n_head, stride=stride)  # [n_scored]
    return float(nlls.mean())
