"""Fast GPT-2 generation: a key/value cache, batches of prompts, and sampling.

`model.py`'s `generate_reference` runs the whole sequence through the model for every new token.
The attention of a past position never changes once computed (it only sees earlier positions), so
this module keeps each layer's keys and values in a cache and runs only the newest position per
step: same tokens, a small part of the work. `generate` and `generate_batch` are the entry points.

- `KVDecoder` runs a batch of prompts: one prefill over the prompts, then one position per step.
  Prompts of different lengths are left-padded; padding is masked out and each row keeps its own
  positions, so a row's tokens do not depend on the other rows.
- `DecodingWeights` holds the weights as decoding reads them: float32, with two matrices copied
  into the memory order that is faster to read for long runs. Build it once and pass it to many
  generate calls to make those copies once.
- `sample` picks the next token: greedy, or drawn at a temperature after top-k and top-p (nucleus)
  filtering. `sampling_temperature` is the one rule for which of the two the options ask for.

It does not slide the window past the model's context (n_ctx), search beams or use a GPU.

The layers are model.py's own functions (`layer_norm`, `linear`, `ffn`, `split_qkv`, `split_heads`, `attention`,
`merge_heads`, `causal_mask`, and `attention_in_blocks`, attention's faster twin for many new positions at
once); what this module adds is the cache around them (`cached_attention`, `block_step`), the padding mask,
and the weights' memory order. `KVDecoder.prefill_states` gives every prompt position's final state, which
scoring.py turns into log-probabilities. The tests hold its tokens and
logits to model.py's full recompute, and both to HF transformers.
"""
from __future__ import annotations

import math

import numpy as np

from .model import (as_float32, attention, attention_in_blocks, causal_mask, ffn, layer_norm, linear, merge_heads,
                    softmax, split_heads, split_qkv)

EOT_ID = 50256  # <|endoftext|>
MASKED = np.float32(-1e10)  # added to the scores of padding, as model.causal_mask to later positions
# Runs of at least this many positions (rows x new tokens) copy two weight matrices into a faster
# memory order first; below it the copying costs more than it saves (see DecodingWeights).
RELAYOUT_MIN_STEPS = 128


# ------------------------------------------------------------ model.py's layers, with a cache
def cached_attention(x, c_attn, c_proj, n_head, mask, cache, start):  # [n_batch, n_seq, n_embd] -> same
    """model.mha for the n_seq newest positions, whose queries also read every cached position.

    cache: (keys, values), each [n_batch, n_head, n_max, d]; the new positions' keys and values
    are written at columns start.. and the queries attend to columns 0..start + n_seq.
    mask: [n_batch, 1, n_seq, start + n_seq], 0 where a query may look and -1e10 (or twice that) where
    not: the causal mask plus each row's padding.
    """
    q, k, v = split_qkv(linear(x, **c_attn))  # 3 x [n_batch, n_seq, n_embd]
    q, k, v = (split_heads(a, n_head) for a in (q, k, v))  # 3 x [n_batch, n_head, n_seq, d]
    keys, values = cache
    end = start + x.shape[1]
    keys[:, :, start:end] = k  # into the preallocated buffer: no concatenation copy
    values[:, :, start:end] = v
    # many new positions (a prompt): attention_in_blocks, which skips the keys the causal mask hides
    attend = attention if x.shape[1] == 1 else attention_in_blocks
    heads = attend(q, keys[:, :, :end], values[:, :, :end], mask)  # [n_batch, n_head, n_seq, d]
    return linear(merge_heads(heads), **c_proj)  # [n_batch, n_seq, n_embd]


def block_step(x, mlp, attn, ln_1, ln_2, n_head, mask, cache, start):  # [n_batch, n_seq, n_embd] -> same
    """model.transformer_block with cached_attention in place of mha."""
    x = x + cached_attention(layer_norm(x, **ln_1), **attn, n_head=n_head, mask=mask, cache=cache, start=start)
    return x + ffn(layer_norm(x, **ln_2), **mlp)


# ------------------------------------------------------------------------ weights
class DecodingWeights:
    """GPT-2's params as decoding reads them. Build once, pass to many generate calls.

    Decoding reads every weight once per token, so how fast the matrix-vector products read the
    weights is how fast the model runs. With OpenBLAS two of them read faster in the other memory
    order (bench/bench_generate.py measures the whole): the output head `x @ wte.T` with wte.T
    stored row-major, and the MLP's c_proj stored column-major for a single row (a batch of rows
    is faster row-major, as loaded). Copying a matrix takes a noticeable moment, so the copies are
    made by the first run of at least RELAYOUT_MIN_STEPS positions, kept here, and used by every
    later run, long or short. They go when this object goes. Changing `params` in place afterwards
    is not seen.
    """

    def __init__(self, params):
        self.params = as_float32(params)  # no copy of arrays that are float32 already
        self.n_vocab, self.n_embd = self.params["wte"].shape
        self.n_ctx = self.params["wpe"].shape[0]
        self.head = self.params["wte"].T  # [n_embd, n_vocab], a view until a long run copies it
        self.blocks_in_order = {}  # "C"/"F" -> the blocks with mlp c_proj w stored in that order

    def for_run(self, n_batch, n_new):
        """(blocks, head) for a run of n_batch rows and n_new new tokens, copying into the faster
        memory order first if the run is long enough to pay for it."""
        order = "F" if n_batch == 1 else "C"  # mlp c_proj: column-major for one row, else row-major
        if n_batch * n_new >= RELAYOUT_MIN_STEPS:
            if not self.head.flags.c_contiguous:
                self.head = copy_in_order(self.params["wte"], "F").T  # column-major wte = row-major wte.T
            if order not in self.blocks_in_order:
                self.blocks_in_order[order] = [with_mlp_proj_in_order(b, order) for b in self.params["blocks"]]
        return self.blocks_in_order.get(order, self.params["blocks"]), self.head


def with_mlp_proj_in_order(block, order):
    """A block whose mlp c_proj weight is stored in `order` (the same array if it already is)."""
    w = block["mlp"]["c_proj"]["w"]  # [4*n_embd, n_embd]
    if not w.flags[order + "_CONTIGUOUS"]:
        w = copy_in_order(w, order)
    return {**block, "mlp": {**block["mlp"], "c_proj": {**block["mlp"]["c_proj"], "w": w}}}


def copy_in_order(array, order, block=256):  # [n, m] -> [n, m] float32, stored in `order`
    """A copy stored in `order`, made in slabs that fit in the CPU cache: a one-shot transposing
    copy writes to memory in an order that misses the cache on nearly every write."""
    out = np.empty(array.shape, dtype=np.float32, order=order)
    along_rows = order == "F"  # slabs of whole rows for a row-major source, else of columns
    for i in range(0, array.shape[0 if along_rows else 1], block):
        slab = np.s_[i : i + block] if along_rows else np.s_[:, i : i + block]
        out[slab] = array[slab]
    return out


# ------------------------------------------------------------------------ decoder
class KVDecoder:
    """A batch of prompts run through GPT-2 with a key/value cache.

    Prompts are left-padded to a common length; each row keeps its own positions
    (0, 1, ... from its first real token) and padding is masked out of attention, so a
    row's logits do not depend on the other rows. prefill() runs the prompts and fills
    the cache; each decode() then runs one new position per row. Both return the logits
    of the newest position, [n_batch, n_vocab].

    params: picoGPT's params tree, or a DecodingWeights built from one.
    """

    def __init__(self, prompts, params, n_head, n_tokens_to_generate):
        weights = params if isinstance(params, DecodingWeights) else DecodingWeights(params)
        lengths = [len(p) for p in prompts]
        if not prompts or min(lengths) == 0:
            raise ValueError("every prompt needs at least one token (e.g. [50256], <|endoftext|>)")
        n_new = int(n_tokens_to_generate)
        if n_new < 0:
            raise ValueError(f"n_tokens_to_generate must be >= 0, got {n_tokens_to_generate}")
        longest, n_batch = max(lengths), len(prompts)
        check_fits_context(longest, n_new, weights.n_ctx)
        n_max = longest + n_new  # the cache holds exactly what is needed
        self.tokens = np.zeros((n_batch, longest), dtype=np.int64)  # left-padded with token 0
        self.is_real = np.zeros((n_batch, n_max), dtype=bool)  # False at padding columns
        for row, prompt in enumerate(prompts):
            self.tokens[row, longest - len(prompt) :] = prompt  # copies: callers' lists untouched
            self.is_real[row, longest - len(prompt) :] = True
        if self.tokens.min() < 0 or self.tokens.max() >= weights.n_vocab:
            raise ValueError(f"token ids must be in [0, {weights.n_vocab})")
        self.is_real[:, longest:] = True  # generated tokens are real
        self.lengths = np.array(lengths)  # [n_batch]: position of each row's next token
        self.n_head = n_head
        self.weights = weights
        self.blocks, self.head = weights.for_run(n_batch, n_new)
        shape = (n_batch, n_head, n_max, weights.n_embd // n_head)
        self.caches = [(np.empty(shape, np.float32), np.empty(shape, np.float32)) for _ in self.blocks]
        self.start = 0  # number of cache columns filled

    def _forward(self, tokens, positions):  # [n_batch, n_seq] each -> [n_batch, n_vocab]
        x = self._run_blocks(tokens, positions)  # [n_batch, n_seq, n_embd]
        x = layer_norm(x[:, -1], **self.weights.params["ln_f"])  # the newest position only: [n_batch, n_embd]
        return x @ self.head  # [n_batch, n_embd] @ [n_embd, n_vocab] -> [n_batch, n_vocab]

    def _run_blocks(self, tokens, positions):  # [n_batch, n_seq] each -> [n_batch, n_seq, n_embd]
        """The new positions through every block, their keys and values into the cache (before ln_f)."""
        n_seq, start, p = tokens.shape[1], self.start, self.weights.params
        padding = np.where(self.is_real[:, : start + n_seq], np.float32(0), MASKED)  # [n_batch, n_k]
        mask = causal_mask(n_seq, start) + padding[:, None, None, :]  # [n_batch, 1, n_seq, n_k]
        x = p["wte"][tokens] + p["wpe"][positions]  # [n_batch, n_seq] -> [n_batch, n_seq, n_embd]
        for block, cache in zip(self.blocks, self.caches):  # n_layer x
            x = block_step(x, **block, n_head=self.n_head, mask=mask, cache=cache, start=start)
        self.start += n_seq
        return x

    def _prompt_positions(self):  # -> [n_batch, longest]: each row counts from its first real token
        return np.maximum(np.cumsum(self.is_real[:, : self.tokens.shape[1]], axis=1) - 1, 0)

    def prefill(self):
        return self._forward(self.tokens, self._prompt_positions())  # [n_batch, longest] -> [n_batch, n_vocab]

    def prefill_states(self):  # -> [n_batch, longest, n_embd]
        """prefill() for callers that want every prompt position, not only the newest: each position's
        final state (after ln_f), whose product with wte.T is that position's logits. Scoring reads them,
        and computes the logits only of the positions it scores (scoring.py). Padding columns hold
        states of padding. The cache is filled as by prefill(), so decode() may follow."""
        x = self._run_blocks(self.tokens, self._prompt_positions())  # [n_batch, longest, n_embd]
        return layer_norm(x, **self.weights.params["ln_f"])

    def decode(self, new_tokens):  # one id per row -> [n_batch, n_vocab]
        if self.start >= self.is_real.shape[1]:
            raise ValueError("KV cache is full: create the decoder with more n_tokens_to_generate")
        logits = self._forward(np.asarray(new_tokens, np.int64)[:, None], self.lengths[:, None])
        self.lengths = self.lengths + 1
        return logits


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
        f"prompt of {n_prompt} tokens + n_tokens_to_generate={n_new} = {n_prompt + n_new} exceeds the "
        f"model's context of n_ctx={n_ctx} tokens; ask for at most {n_ctx - n_prompt} new tokens{shorter}")


# ----------------------------------------------------------------------- sampling
def sampling_temperature(temperature=None, top_k=None, top_p=None, seed=None):
    """The temperature a run uses, after checking the sampling options.

    temperature=None (the default) means greedy unless top_k, top_p or seed is given: those ask
    for sampling, which then happens at temperature 1 (as HF's do_sample). temperature=0 is
    greedy, where top_k, top_p and seed would do nothing, so giving them is an error.
    """
    if top_k is not None and (int(top_k) != top_k or top_k < 1):
        raise ValueError(f"top_k must be a whole number >= 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    asks_to_sample = [name for name, value in (("top_k", top_k), ("top_p", top_p), ("seed", seed))
                      if value is not None]
    if temperature is None:
        return 1.0 if asks_to_sample else 0.0
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy), got {temperature}")
    if temperature == 0 and asks_to_sample:
        raise ValueError(f"temperature 0 means greedy decoding, which {' and '.join(asks_to_sample)} would "
                         f"not change; leave out the temperature (sampling at 1) or give one above 0")
    return float(temperature)


def sample(logits, temperature=0.0, top_k=None, top_p=None, rng=None):  # [n_vocab] -> token id
    """Greedy at temperature 0; otherwise sample among the top_k tokens, then among the
    smallest most-likely set whose probability reaches top_p. Excluded tokens are not
    candidates at all, so they can never be drawn."""
    if temperature == 0:
        return int(np.argmax(logits))
    rng = np.random.default_rng() if rng is None else rng
    logits = logits.astype(np.float64) / temperature  # [n_vocab]
    candidates = np.arange(len(logits))  # token ids still allowed
    if top_k is not None and top_k < len(logits):
        candidates = np.argpartition(-logits, int(top_k) - 1)[: int(top_k)]  # the k best, unordered
    probs = softmax(logits[candidates])  # [n_cand]
    if top_p is not None and top_p < 1:
        candidates, probs = nucleus(candidates, probs, top_p)
    cdf = np.cumsum(probs)  # [n_cand]; inverse-CDF draw, as rng.choice(p=...) but cheaper
    pick = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
    return int(candidates[min(pick, len(candidates) - 1)])


def nucleus(candidates, probs, top_p):  # [n_cand] each -> [n_keep] each
    """The smallest set of most likely candidates whose probability reaches top_p, with its
    probabilities renormalised. Sorts only the best k (k = 256, 1024, ...) until they hold
    top_p, instead of all 50257: the nucleus is usually small, a full sort is not."""
    k = min(256, len(probs))
    while True:
        best = np.argpartition(-probs, k - 1)[:k] if k < len(probs) else np.arange(k)  # [k]
        best = best[np.argsort(-probs[best], kind="stable")]  # most likely first
        mass = np.cumsum(probs[best])  # [k]
        if mass[-1] >= top_p or k == len(probs):
            keep = best[: min(int(np.searchsorted(mass, top_p)) + 1, k)]  # first to reach top_p
            return candidates[keep], probs[keep] / probs[keep].sum()
        k = min(4 * k, len(probs))


# --------------------------------------------------------------------- generation
def iter_generate_batch(prompts, params, n_head, n_tokens_to_generate, *, temperature=None,
                        top_k=None, top_p=None, seed=None, stop_at_eot=False):
    """Yield, per step, a list with one new token id per prompt (None once a row stopped).

    A row stops after <|endoftext|> when stop_at_eot (that EOT is still yielded)."""
    temperature = sampling_temperature(temperature, top_k, top_p, seed)
    decoder = KVDecoder(prompts, params, n_head, n_tokens_to_generate)
    rng = np.random.default_rng(seed)
    stopped = np.zeros(len(prompts), dtype=bool)
    for step in range(int(n_tokens_to_generate)):
        logits = decoder.prefill() if step == 0 else decoder.decode(new)  # [n_batch, n_vocab]
        new = [sample(row_logits, temperature, top_k, top_p, rng) for row_logits in logits]
        yield [None if done else token for token, done in zip(new, stopped)]
        if stop_at_eot:
            stopped |= np.array(new) == EOT_ID
            if stopped.all():
                return


def generate_batch(prompts, params, n_head, n_tokens_to_generate, **options):
    """New token ids for each prompt (list of lists), all prompts computed together.

    Options as for generate(). Greedy results equal running each prompt on its own.
    Sampling draws rows in order from one generator, so a seeded batch is reproducible.
    """
    outputs = [[] for _ in prompts]
    for step_ids in iter_generate_batch(prompts, params, n_head, n_tokens_to_generate, **options):
        for out, token in zip(outputs, step_ids):
            if token is not None and not (options.get("stop_at_eot") and token == EOT_ID):
                out.append(token)
    return outputs


def generate(inputs, params, n_head, n_tokens_to_generate, *, temperature=None, top_k=None,
             top_p=None, seed=None, stop_at_eot=False):
    """The ids of up to n_tokens_to_generate new tokens after `inputs` (not modified).

    params: picoGPT's params tree, or a DecodingWeights to reuse its weight copies across calls.
    Greedy by default. Sampling (softmax(logits / temperature) after top_k/top_p filtering,
    reproducible for a given seed) happens at a temperature above 0, or at temperature 1 when
    top_k, top_p or seed is given without one (see sampling_temperature). With stop_at_eot,
    generation ends at <|endoftext|> (50256), which is not included in the result.
    """
    return generate_batch([inputs], params, n_head, n_tokens_to_generate, temperature=temperature,
                          top_k=top_k, top_p=top_p, seed=seed, stop_at_eot=stop_at_eot)[0]
