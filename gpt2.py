"""GPT-2 inference in NumPy: forward pass, KV-cached generation, batching and a CLI.

Everything is float32. The forward pass reads like the GPT-2 paper: one function per
concept, with the array shape on each line. `gpt2()` recomputes the whole sequence and
returns every position's logits (the picoGPT interface); `generate()` and
`generate_batch()` keep the keys and values of past positions in a cache, so each new
token costs one position's work instead of the whole sequence's.

    python gpt2.py "Alan Turing theorized that computers would one day become" --stream

As a library (params: picoGPT's tree of arrays, e.g. from utils.load_encoder_hparams_and_params):

    ids = generate(prompt_ids, params, n_head, 40)                         # greedy
    ids = generate(prompt_ids, params, n_head, 40, temperature=0.8, top_p=0.9, seed=0)
    rows = generate_batch([ids_a, ids_b], params, n_head, 40)             # one pass for all
    logits = gpt2(prompt_ids, **params, n_head=n_head)                     # [n_seq, n_vocab]

A prompt plus its new tokens must fit in the context (n_ctx, 1024 for GPT-2); longer
requests raise ValueError up front rather than sliding the window.
"""
import codecs
import math
import sys
import weakref

import numpy as np

EOT_ID = 50256  # <|endoftext|>
LN_EPS = 1e-5
MASKED = np.float32(-1e10)  # added to attention scores that must get (exactly) zero weight


# ---------------------------------------------------------------------------- model
def gelu(x):  # [...] -> [...]
    # GPT-2's tanh approximation ("gelu_new" in HF transformers); x * x * x, not x**3,
    # which numpy computes with the general float32 power (~100x slower, measured)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))  # [...]


def softmax(x):  # [..., n] -> [..., n], each row summing to 1
    e = np.exp(x - x.max(axis=-1, keepdims=True))  # [..., n]; minus the max: exp cannot overflow
    return e / e.sum(axis=-1, keepdims=True)  # [..., n] / [..., 1] -> [..., n]


def layer_norm(x, g, b, eps=LN_EPS):  # x [..., n_embd], g/b [n_embd] -> [..., n_embd]
    x = x - x.sum(axis=-1, keepdims=True) / x.shape[-1]  # [..., n_embd], centred on the mean
    var = (x * x).sum(axis=-1, keepdims=True) / x.shape[-1]  # [..., n_embd] -> [..., 1]
    return g * x / np.sqrt(var + eps) + b  # [..., n_embd]


def linear(x, w, b):
    # [..., n_in] @ [n_in, n_out] -> [..., n_out]; flattened to one 2-D matmul so a batch
    # reads the weights once instead of once per row
    return (x.reshape(-1, w.shape[0]) @ w + b).reshape(*x.shape[:-1], w.shape[1])


def ffn(x, c_fc, c_proj):  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]
    a = gelu(linear(x, **c_fc))  # [..., n_seq, n_embd] -> [..., n_seq, 4*n_embd]
    return linear(a, **c_proj)  # [..., n_seq, 4*n_embd] -> [..., n_seq, n_embd]


def attention(q, k, v, mask):  # q [..., n_q, d], k/v [..., n_k, d], mask [..., n_q, n_k]
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])  # -> [..., n_q, n_k]
    if mask is not None:
        scores += mask  # [..., n_q, n_k]; MASKED entries get weight exactly 0 in softmax
    return softmax(scores) @ v  # [..., n_q, n_k] @ [..., n_k, d] -> [..., n_q, d]


def mha(x, c_attn, c_proj, n_head, mask, cache=None):  # [..., n_seq, n_embd] -> same
    *batch, n_seq, n_embd = x.shape
    qkv = linear(x, **c_attn)  # [..., n_seq, n_embd] -> [..., n_seq, 3*n_embd]
    qkv = qkv.reshape(*batch, n_seq, 3, n_head, n_embd // n_head)  # -> [..., n_seq, 3, n_head, d]
    q, k, v = np.moveaxis(qkv, -3, 0).swapaxes(-3, -2)  # 3 x [..., n_head, n_seq, d]
    if cache is not None:  # keys/values of earlier positions live in preallocated buffers
        k_buf, v_buf, start = cache  # [..., n_head, n_max, d] each; new rows go at `start`
        k_buf[..., start : start + n_seq, :] = k  # written in place: no concatenation copy
        v_buf[..., start : start + n_seq, :] = v  # [..., n_head, n_seq, d] into the buffer
        k, v = k_buf[..., : start + n_seq, :], v_buf[..., : start + n_seq, :]  # [..., n_head, n_k, d]
    out = attention(q, k, v, mask)  # -> [..., n_head, n_seq, d]
    out = out.swapaxes(-3, -2).reshape(*batch, n_seq, n_embd)  # merge heads -> [..., n_seq, n_embd]
    return linear(out, **c_proj)  # [..., n_seq, n_embd] -> [..., n_seq, n_embd]


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head, mask, cache=None):  # [..., n_seq, n_embd]
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head, mask=mask, cache=cache)  # [..., n_seq, n_embd]
    x = x + ffn(layer_norm(x, **ln_2), **mlp)  # [..., n_seq, n_embd]
    return x


def causal_mask(n_seq):  # -> [n_seq, n_seq]: position i may look at positions <= i
    return (1 - np.tri(n_seq, dtype=np.float32)) * MASKED


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):  # [n_seq] -> [n_seq, n_vocab]
    """Full forward pass over `inputs` (token ids); logits for every position."""
    wte, wpe, blocks, ln_f = as_float32([wte, wpe, blocks, ln_f])  # no copy if float32 already
    x = wte[inputs] + wpe[np.arange(len(inputs))]  # [n_seq] -> [n_seq, n_embd]
    mask = causal_mask(len(inputs))  # [n_seq, n_seq]
    for block in blocks:  # n_layer x
        x = transformer_block(x, **block, n_head=n_head, mask=mask)  # [n_seq, n_embd]
    return layer_norm(x, **ln_f) @ wte.T  # [n_seq, n_embd] -> [n_seq, n_vocab]


def gpt2_step(tokens, positions, mask, start, caches, head, wte, wpe, blocks, ln_f, n_head):
    """Cached forward pass for new tokens of a batch; logits of the last position only.

    tokens, positions: [n_batch, n_seq]; mask: [n_batch, 1, n_seq, start + n_seq] or None;
    caches: per layer (k_buf, v_buf); head: wte.T, [n_embd, n_vocab] (see decoding_params).
    """
    x = wte[tokens] + wpe[positions]  # [n_batch, n_seq] -> [n_batch, n_seq, n_embd]
    for block, (k_buf, v_buf) in zip(blocks, caches):
        x = transformer_block(x, **block, n_head=n_head, mask=mask, cache=(k_buf, v_buf, start))  # same
    x = layer_norm(x[:, -1], **ln_f)  # last position only: [n_batch, n_embd]
    return x @ head  # [n_batch, n_embd] -> [n_batch, n_vocab]


# ------------------------------------------------------------------ weight handling
def as_float32(tree):
    """The params tree with every array float32 (no copy if already so; any memory order)."""
    if isinstance(tree, dict):
        return {key: as_float32(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [as_float32(value) for value in tree]
    return np.asarray(tree, dtype=np.float32)


# Decoding reads every weight once per token, so the speed of the matrix-vector products is
# the speed of the model. OpenBLAS reads two of them faster in the other memory order
# (measured on the 124M shape, 2 cores, per token):
#   output layer x @ wte.T, wte.T stored row-major: 5.1 instead of 6.0 ms (8 rows: 12 vs 21 ms)
#   mlp c_proj [1, 3072] @ [3072, 768] stored column-major: 4.3 instead of 5.7 ms for the 12
#     layers; but 8 rows are slower that way (14.6 vs 9.3 ms), so batches use row-major.
# Copying both into the other order takes 0.1-0.3 s (more in a fresh process, which has not
# touched the weights yet), so it is done only for runs of at least RELAYOUT_MIN_STEPS positions
# (rows x new tokens; a whole generate() call breaks even at ~100 tokens), once per array, and
# every later call reuses it.
RELAYOUT_MIN_STEPS = 128
_RELAID = {}  # (id(array), order) -> copy; an entry goes when its array is garbage-collected


def relaid(array, order, make=True):
    """`array` as float32 stored in `order` ("C" row-major, "F" column-major): same values and
    shape, copied once per array and reused (changing `array` in place later is not seen).
    With make=False, only a copy made before is returned (else None)."""
    if not isinstance(array, np.ndarray):  # nested lists: nothing to key a cache on
        return np.asarray(array, dtype=np.float32, order=order) if make else None
    if array.dtype == np.float32 and array.flags[order + "_CONTIGUOUS"]:
        return array
    key = (id(array), order)
    if key not in _RELAID and make:
        _RELAID[key] = copy_in_order(array, order)
        weakref.finalize(array, _RELAID.pop, key, None)
    return _RELAID.get(key)


def copy_in_order(array, order, block=256):  # [n, m] -> [n, m] float32, stored in `order`
    """Copied in slabs that fit in the CPU cache: a one-shot transposing copy is ~3x slower
    (0.2 s instead of 0.07 s for the 124M wte), as nearly every write misses the cache."""
    out = np.empty(array.shape, dtype=np.float32, order=order)
    along_rows = order == "F"  # slabs of whole rows for a row-major source, else of columns
    for i in range(0, array.shape[0 if along_rows else 1], block):
        slab = np.s_[i : i + block] if along_rows else np.s_[:, i : i + block]
        out[slab] = array[slab]
    return out


def decoding_params(params, n_batch, n_steps):
    """(params as float32, output head wte.T [n_embd, n_vocab]), with the faster layouts above
    where they pay off. `params` itself is not changed."""
    fast, long_run = as_float32(params), n_batch * n_steps >= RELAYOUT_MIN_STEPS
    wte = relaid(params["wte"], "F", make=long_run)  # column-major wte = row-major wte.T
    head = fast["wte"].T if wte is None else wte.T  # [n_embd, n_vocab]
    for block, original in zip(fast["blocks"], params["blocks"]):
        order = "F" if n_batch == 1 else "C"  # see above: one row prefers column-major
        w = relaid(original["mlp"]["c_proj"]["w"], order, make=long_run)  # [4*n_embd, n_embd]
        if w is not None:
            block["mlp"]["c_proj"]["w"] = w
    return fast, head


# ------------------------------------------------------------------------- sampling
def check_sampling(temperature, top_k, top_p):
    if temperature is None or temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 means greedy), got {temperature}")
    if top_k is not None and (int(top_k) != top_k or top_k < 1):
        raise ValueError(f"top_k must be a positive integer or None, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1] or None, got {top_p}")


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
    top_p, instead of all 50257 (a full sort costs ~5 ms a token)."""
    k = min(256, len(probs))
    while True:
        best = np.argpartition(-probs, k - 1)[:k] if k < len(probs) else np.arange(k)  # [k]
        best = best[np.argsort(-probs[best], kind="stable")]  # most likely first
        mass = np.cumsum(probs[best])  # [k]
        if mass[-1] >= top_p or k == len(probs):
            keep = best[: min(int(np.searchsorted(mass, top_p)) + 1, k)]  # first to reach top_p
            return candidates[keep], probs[keep] / probs[keep].sum()
        k = min(4 * k, len(probs))


# ----------------------------------------------------------------------- generation
class KVDecoder:
    """A batch of prompts run through GPT-2 with a key/value cache.

    Prompts are left-padded to a common length; each row keeps its own positions
    (0, 1, ... from its first real token) and padding is masked out of attention, so a
    row's logits do not depend on the other rows. prefill() runs the prompts and fills
    the cache; each decode() then runs one new position per row. Both return the logits
    of the newest position, [n_batch, n_vocab].
    """

    def __init__(self, prompts, params, n_head, n_tokens_to_generate):
        lengths = [len(p) for p in prompts]
        if not prompts or min(lengths) == 0:
            raise ValueError("every prompt needs at least one token (e.g. [50256], <|endoftext|>)")
        n_new = int(n_tokens_to_generate)
        if n_new < 0:
            raise ValueError(f"n_tokens_to_generate must be >= 0, got {n_tokens_to_generate}")
        n_vocab, n_embd = np.shape(params["wte"])
        n_ctx, longest, n_batch = np.shape(params["wpe"])[0], max(lengths), len(prompts)
        if longest + n_new > n_ctx:
            raise ValueError(
                f"prompt of {longest} tokens + n_tokens_to_generate={n_new} = {longest + n_new} "
                f"exceeds the model's context of n_ctx={n_ctx} tokens; shorten the prompt or "
                f"ask for at most {max(n_ctx - longest, 0)} new tokens")
        n_max = longest + n_new  # the cache holds exactly what is needed
        self.tokens = np.zeros((n_batch, longest), dtype=np.int64)  # left-padded with token 0
        self.is_real = np.zeros((n_batch, n_max), dtype=bool)  # False at padding columns
        for row, prompt in enumerate(prompts):
            self.tokens[row, longest - len(prompt) :] = prompt  # copies: callers' lists untouched
            self.is_real[row, longest - len(prompt) :] = True
        if self.tokens.min() < 0 or self.tokens.max() >= n_vocab:
            raise ValueError(f"token ids must be in [0, {n_vocab})")
        self.is_real[:, longest:] = True  # generated tokens are real
        self.lengths = np.array(lengths)  # [n_batch]: position of each row's next token
        self.n_head = n_head
        self.params, self.head = decoding_params(params, n_batch, n_new)
        shape = (n_batch, n_head, n_max, n_embd // n_head)
        self.caches = [(np.empty(shape, np.float32), np.empty(shape, np.float32))
                       for _ in self.params["blocks"]]
        self.start = 0  # number of cache columns filled

    def _forward(self, tokens, positions):  # [n_batch, n_seq] each -> [n_batch, n_vocab]
        n_seq, start = tokens.shape[1], self.start
        query_at = start + np.arange(n_seq)  # [n_seq]: cache column of each new token
        allowed = np.arange(start + n_seq) <= query_at[:, None]  # causal: [n_seq, n_k]
        allowed = allowed & self.is_real[:, None, : start + n_seq]  # [n_batch, n_seq, n_k]
        mask = None if allowed.all() else np.where(allowed, 0, MASKED).astype(np.float32)[:, None]
        p = self.params
        logits = gpt2_step(tokens, positions, mask, start, self.caches, self.head,
                           p["wte"], p["wpe"], p["blocks"], p["ln_f"], self.n_head)
        self.start += n_seq
        return logits

    def prefill(self):
        positions = np.maximum(np.cumsum(self.is_real[:, : self.tokens.shape[1]], axis=1) - 1, 0)
        return self._forward(self.tokens, positions)  # [n_batch, longest] -> [n_batch, n_vocab]

    def decode(self, new_tokens):  # one id per row -> [n_batch, n_vocab]
        if self.start >= self.is_real.shape[1]:
            raise ValueError("KV cache is full: create the decoder with more n_tokens_to_generate")
        logits = self._forward(np.asarray(new_tokens, np.int64)[:, None], self.lengths[:, None])
        self.lengths = self.lengths + 1
        return logits


def iter_generate_batch(prompts, params, n_head, n_tokens_to_generate, *, temperature=0.0,
                        top_k=None, top_p=None, seed=None, stop_at_eot=False):
    """Yield, per step, a list with one new token id per prompt (None once a row stopped).

    A row stops after <|endoftext|> when stop_at_eot (that EOT is still yielded)."""
    check_sampling(temperature, top_k, top_p)
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


def generate(inputs, params, n_head, n_tokens_to_generate, *, temperature=0.0, top_k=None,
             top_p=None, seed=None, stop_at_eot=False):
    """The ids of up to n_tokens_to_generate new tokens after `inputs` (not modified).

    temperature 0 is greedy; otherwise logits/temperature are sampled after top_k/top_p
    filtering, reproducibly for a given seed. With stop_at_eot, generation ends at
    <|endoftext|> (50256), which is not included in the result.
    """
    return generate_batch([inputs], params, n_head, n_tokens_to_generate, temperature=temperature,
                          top_k=top_k, top_p=top_p, seed=seed, stop_at_eot=stop_at_eot)[0]


# ------------------------------------------------------------------------------ CLI
def token_bytes(encoder, token_id):
    """The raw bytes of one token (a GPT-2 token can hold part of a UTF-8 character)."""
    return bytes(encoder.byte_decoder[c] for c in encoder.decoder[token_id])


def decode_stream(encoder, token_ids):
    """Yield the text of token_ids piece by piece as they arrive, holding back the bytes
    of a character split across tokens until it is complete (invalid bytes become U+FFFD,
    as in encoder.decode)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for token_id in token_ids:
        yield utf8.decode(token_bytes(encoder, token_id))
    yield utf8.decode(b"", final=True)


def main(prompt: str, n_tokens_to_generate: int = 40, model_size: str = "124M",
         models_dir: str = "models", temperature: float = 0.0, top_k: int = None,
         top_p: float = None, seed: int = None, stream: bool = False):
    """Print the continuation of PROMPT (returned for fire to print, or streamed)."""
    from utils import load_encoder_hparams_and_params

    encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir)
    input_ids = encoder.encode(str(prompt))  # fire turns a prompt like "42" into a number
    options = dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)
    if not stream:
        output_ids = generate(input_ids, params, hparams["n_head"], n_tokens_to_generate, **options)
        return encoder.decode(output_ids)
    steps = iter_generate_batch([input_ids], params, hparams["n_head"], n_tokens_to_generate, **options)
    for piece in decode_stream(encoder, (token for (token,) in steps)):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")


if __name__ == "__main__":
    import fire

    try:
        fire.Fire(main)
    except (ValueError, OSError) as error:  # bad input, too long for the context, a failed download or
        sys.exit(f"error: {error}")  # a missing file: one line that says what to do, no traceback
