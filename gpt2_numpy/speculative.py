"""Speculative decoding: more than one token per pass over the weights, and the same tokens.

Decoding one token reads every weight of the model once, and on a CPU that read, not the arithmetic,
is what takes the time. Running k + 1 positions in one pass reads the weights once too, so it costs
little more than one position. Speculative decoding spends that margin: something cheap guesses the
next k tokens (the draft), the model runs its newest token and the k guesses in one pass
(`KVDecoder.extend`), keeps the longest run of guesses it agrees with, adds one token of its own from
the position after them, and forgets the rest of its cache (`KVDecoder.rollback`). Each pass gives
from 1 token (the first guess was wrong) to k + 1 (all were right).

    >>> from gpt2_numpy.speculative import DraftModel, PromptLookup, generate   # doctest: +SKIP
    >>> generate(ids, params, n_head, 40, DraftModel(small_params, small_n_head))  # doctest: +SKIP
    >>> generate(ids, params, n_head, 40, PromptLookup(2), draft_tokens=8)         # doctest: +SKIP

Two drafts:

- `DraftModel`: a smaller GPT-2 with the same vocabulary (124M for 774M), with its own cache, rolled
  back like the model's.
- `PromptLookup(n)`: no model at all. It finds the latest earlier place where the last n tokens
  occurred, in the prompt or the text generated so far, and proposes what followed them there. Text
  that repeats itself (code, quotes, a document being edited or summarised) is where it pays.

Why the output does not change (`accepted_greedy`, `accepted_sampled`):

- Greedy: a drafted token is kept when it is the model's argmax at its position; the first that is
  not is replaced by that argmax. Every token is the one plain greedy decoding picks.
- Sampling: p is the model's distribution at a position and q the draft's, both after the same
  temperature, top-k and top-p (`kvcache.sampling_distribution`). A drafted token x, drawn from q, is
  kept with probability min(1, p(x) / q(x)); the first one rejected is replaced by a draw from
  max(0, p - q), normalised. Then each token is distributed exactly as p: it is x either by keeping a
  draft of x, min(q(x), p(x)), or by a rejection, (1 - sum_y min(p(y), q(y))) times the residual's
  (p(x) - min(p(x), q(x))) / (1 - sum_y min(p(y), q(y))), and the two add up to p(x). A lookup's draft
  is certain, q one-hot: x is kept with probability p(x), else replaced by a draw from p without x.
  The seeded tokens differ from plain sampling's (the random numbers are spent differently), their
  distribution does not.
- Rounding: a pass over k + 1 positions adds its float32 products in another order than k + 1 passes
  of one position (the logits differ by about 1e-6 of the largest, as the prompt's own pass does), so two
  tokens whose logits tie closer than that could swap: the caveat of any KV cache against full recompute.

What it does not do: batch prompts (each row would keep a different number of tokens per pass; it
runs one stream), adapt k to the acceptance rate, draft a tree of alternatives, or use a draft with
another vocabulary. How much it gives depends on how often the draft is right, which random weights
make meaningless; bench/bench_speculative.py measures the mechanism (the cost of verifying k tokens
against one, and acceptance on texts where it is known).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kvcache import (EOT_ID, DecodingWeights, KVDecoder, draw, sample, sampling_distribution,
                      sampling_temperature)
from .model import count_of_new_tokens

DEFAULT_DRAFT_TOKENS = 4  # k: drafted tokens verified per pass (bench/bench_speculative.py: what k costs)


# -------------------------------------------------------------------------- drafts
class DraftModel:
    """A smaller GPT-2 that drafts tokens, with a KV cache kept in step with the model's.

    params: picoGPT's params tree (or a DecodingWeights) of a GPT-2 with the model's vocabulary. Its context
    (n_ctx) may be shorter than the model's: it drafts while the positions fit in it, then proposes nothing,
    and the model goes on alone (one token a pass, as plain decoding).
    """

    def __init__(self, params, n_head):
        self.weights = params if isinstance(params, DecodingWeights) else DecodingWeights(params)
        self.n_head = n_head
        self.decoder = None

    def start(self, prompt, n_tokens_to_generate, n_vocab):
        if self.weights.n_vocab != n_vocab:
            raise ValueError(f"the draft model has {self.weights.n_vocab} tokens and the model {n_vocab}: a draft "
                             "must share the model's vocabulary (GPT-2's sizes all do)")
        self.n_run = 0  # drafted tokens of the last proposal run through the draft (all but the last)
        # the positions its cache holds: the prompt's and the new tokens', no more than its context
        self.n_positions = min(len(prompt) + count_of_new_tokens(n_tokens_to_generate), self.weights.n_ctx)
        if len(prompt) >= self.n_positions:  # no position left to draft from (propose never runs it)
            self.decoder = None
            return
        self.decoder = KVDecoder([prompt], self.weights, self.n_head, self.n_positions - len(prompt))
        self.decoder.prefill()
        self.n_cached = len(prompt)  # tokens of the sequence in the draft's cache

    def propose(self, sequence, k, pick):  # -> up to k token ids, as many distributions
        """Up to k tokens drafted after `sequence`, each chosen by pick(logits) -> (token, its distribution): as
        many as its context holds (running `sequence` and all but the last drafted token takes len(sequence) + k - 1
        positions), none once `sequence` fills it."""
        k = min(k, self.n_positions - len(sequence) + 1) if self.decoder is not None else 0
        if k <= 0:
            self.n_run = 0
            return [], []
        logits = self.decoder.extend([sequence[self.n_cached :]])[0, -1]  # the tokens it has not seen yet
        self.n_cached = len(sequence)
        tokens, dists = [], []
        for i in range(k):
            token, dist = pick(logits)
            tokens.append(token)
            dists.append(dist)
            if i < k - 1:  # the last drafted token is never run: nothing reads what would follow it
                logits = self.decoder.decode([token])[0]
        self.n_run = k - 1
        return tokens, dists

    def accepted(self, n_kept):
        """The model kept the first n_kept drafted tokens: forget the draft's cache past them."""
        if self.decoder is None:  # (a prompt that filled its context: it never ran)
            return
        valid = min(n_kept, self.n_run)
        self.decoder.rollback(self.n_run - valid)
        self.n_cached += valid


class PromptLookup:
    """Drafts by copying: what followed the latest earlier occurrence of the last n tokens."""

    def __init__(self, n):
        if int(n) != n or n < 1:
            raise ValueError(f"the lookup's n-gram length must be a whole number >= 1, got {n}")
        self.n = int(n)

    def start(self, prompt, n_tokens_to_generate, n_vocab):
        pass  # its tokens come from the sequence, so they are the model's

    def propose(self, sequence, k, pick):  # -> up to k token ids, and None for each: certain drafts
        tokens = lookup(sequence, self.n, k)
        return tokens, [None] * len(tokens)

    def accepted(self, n_kept):
        pass


def lookup(sequence, n, k):  # [n_seq] -> up to k ids
    """The (up to) k tokens that followed the latest earlier occurrence of sequence's last n tokens.

    >>> lookup([5, 6, 7, 8, 5, 6], n=2, k=3)
    [7, 8, 5]
    >>> lookup([5, 6, 7], n=2, k=3)  # [6, 7] never occurred before
    []
    """
    ids = np.asarray(sequence)
    if len(ids) <= n or k == 0:
        return []
    # every window of n tokens that has a token after it (so not the last n themselves)
    windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)  # [n_seq - n, n]
    starts = np.flatnonzero((windows == ids[-n:]).all(axis=1))
    if len(starts) == 0:
        return []
    follows = starts[-1] + n  # the latest: the nearest text is the likeliest to repeat
    return ids[follows : follows + k].tolist()


# -------------------------------------------------------------------------- the rule
def accepted_greedy(drafted, logits):  # k ids, [k + 1, n_vocab] -> 1..k+1 ids
    """The drafted tokens up to the first that is not the model's argmax, then the model's argmax."""
    best = logits.argmax(axis=-1)  # [k + 1]: plain greedy's token at each position
    n_kept = 0
    while n_kept < len(drafted) and drafted[n_kept] == best[n_kept]:
        n_kept += 1
    return [*drafted[:n_kept], int(best[n_kept])]


def accepted_sampled(drafted, draft_dists, target_dist, rng):  # -> 1..k+1 ids
    """Speculative sampling's accept/reject rule (see the module's docstring).

    drafted: k ids; draft_dists: for each, the distribution q it was drawn from ([n_vocab] probabilities,
    or None: the draft was certain, q one-hot); target_dist(i): the model's distribution p at position i
    ([n_vocab]), for i = 0..k (asked for lazily: positions after a rejection are never needed).
    """
    for i, (x, q) in enumerate(zip(drafted, draft_dists)):
        p = target_dist(i)  # [n_vocab]
        q_x = 1.0 if q is None else q[x]
        if rng.random() * q_x < p[x]:  # probability min(1, p(x) / q(x)), without dividing by q(x)
            continue
        residual = p.copy() if q is None else np.maximum(p - q, 0)  # [n_vocab]
        if q is None:
            residual[x] = 0
        if residual.sum() <= 0:  # p <= q everywhere means p == q, rejected only by rounding: p is the answer
            residual = p
        return [*drafted[:i], draw(np.arange(len(p)), residual, rng)]
    p = target_dist(len(drafted))  # every draft kept: one more token, from the position after them
    return [*drafted, draw(np.arange(len(p)), p, rng)]


def dense_distribution(logits, temperature, top_k, top_p):  # [n_vocab] -> [n_vocab]
    """sample()'s distribution over every token id (0 for the ones filtered out), float64."""
    candidates, probs = sampling_distribution(logits, temperature, top_k, top_p)
    dist = np.zeros(len(logits))
    dist[candidates] = probs
    return dist


# -------------------------------------------------------------------------- generation
@dataclass
class Counts:
    """What a run did, for the bench: the model's passes after the prompt's, tokens drafted and kept."""
    passes: int = 0
    drafted: int = 0
    accepted: int = 0


def iter_generate(inputs, params, n_head, n_tokens_to_generate, draft, *, draft_tokens=DEFAULT_DRAFT_TOKENS,
                  temperature=None, top_k=None, top_p=None, seed=None, stop_at_eot=False, counts=None):
    """Yield up to n_tokens_to_generate new token ids after `inputs` (one prompt), as generate().

    counts: a Counts to add this run's passes, drafted and accepted tokens to.
    """
    temperature = sampling_temperature(temperature, top_k, top_p, seed)
    prompt = one_prompt(inputs)
    if int(draft_tokens) != draft_tokens or draft_tokens < 1:
        raise ValueError(f"draft_tokens must be a whole number >= 1, got {draft_tokens}")
    n_new = count_of_new_tokens(n_tokens_to_generate)
    model = KVDecoder([prompt], params, n_head, n_new)
    if n_new == 0:
        return
    draft.start(prompt, n_new, model.weights.n_vocab)
    counts = Counts() if counts is None else counts
    rng = np.random.default_rng(seed)

    def pick(logits):  # the draft's choice at one position, and the distribution it was drawn from
        if temperature == 0:
            return int(np.argmax(logits)), None
        q = dense_distribution(logits, temperature, top_k, top_p)
        return draw(np.arange(len(q)), q, rng), q

    sequence = list(prompt)
    new = [sample(model.prefill()[0], temperature, top_k, top_p, rng)]  # the first token, as plain decoding's
    while True:
        for token in new:
            if stop_at_eot and token == EOT_ID:
                return
            yield token
        sequence += new
        n_left = n_new - (len(sequence) - len(prompt))
        if n_left == 0:
            return
        k = min(int(draft_tokens), n_left - 1)  # a pass gives up to k + 1 tokens: no more than are left
        drafted, draft_dists = draft.propose(sequence, k, pick) if k else ([], [])
        logits = model.extend([[sequence[-1], *drafted]])[0]  # [len(drafted) + 1, n_vocab], one pass
        if temperature == 0:
            new = accepted_greedy(drafted, logits)
        else:
            new = accepted_sampled(drafted, draft_dists, rng=rng,
                                   target_dist=lambda i: dense_distribution(logits[i], temperature, top_k, top_p))
        n_kept = len(new) - 1
        model.rollback(len(drafted) - n_kept)  # the positions of rejected drafts
        if k:
            draft.accepted(n_kept)
        counts.passes += 1
        counts.drafted += len(drafted)
        counts.accepted += n_kept


def generate(inputs, params, n_head, n_tokens_to_generate, draft, **options):
    """The ids of up to n_tokens_to_generate new tokens after `inputs`, drafted by `draft` (a DraftModel or a
    PromptLookup) and verified by the model: greedy, the tokens of kvcache.generate; sampling, their
    distribution. Options: draft_tokens (k, default DEFAULT_DRAFT_TOKENS), and kvcache.generate's
    temperature, top_k, top_p, seed, stop_at_eot."""
    return list(iter_generate(inputs, params, n_head, n_tokens_to_generate, draft, **options))


def one_prompt(inputs):  # -> [n_seq] ids as a list
    """The prompt's ids, or a ValueError for a batch of prompts (which this module does not run)."""
    try:
        ids = np.asarray(inputs, dtype=np.int64)
    except (ValueError, TypeError):  # a ragged list of lists
        ids = None
    if ids is None or ids.ndim != 1:
        raise ValueError("speculative decoding runs one prompt (a list of token ids), not a batch: call it once "
                         "per prompt, or use kvcache.generate_batch without a draft")
    return ids.tolist()
