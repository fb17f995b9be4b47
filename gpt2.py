"""GPT-2's forward pass in NumPy, as picoGPT writes it, and the `gpt2` command.

The model is one function per idea of the GPT-2 paper, with the shape of the array on each
line: `gpt2(inputs, **params, n_head=...)` takes token ids and returns every position's logits,
recomputing the whole sequence each time. `generate_reference` is picoGPT's generation loop on
top of it: run everything, take the most likely next id, append, repeat.

That loop is the reference, not the fast path. `kvcache.py`, beside this file, generates the
same tokens while computing each position once (a key/value cache), in batches, with sampling;
`generate` and `generate_batch` below are its functions, and the command line uses them. This
file holds no cache, no batching and no memory-layout tricks, so it can be read top to bottom.

    python gpt2.py "Alan Turing theorized that computers would one day become" --stream

As a library (params: picoGPT's tree of arrays, e.g. from utils.load_encoder_hparams_and_params):

    logits = gpt2(prompt_ids, **params, n_head=n_head)                     # [n_seq, n_vocab]
    ids = generate(prompt_ids, params, n_head, 40)                         # greedy
    ids = generate(prompt_ids, params, n_head, 40, temperature=0.8, top_p=0.9, seed=0)
    nats_per_token = score(text_ids, params, n_head)                       # mean NLL, sliding window
    rows = generate_batch([ids_a, ids_b], params, n_head, 40)             # one pass for all
"""
from __future__ import annotations

import argparse
import codecs
import math
import os
import sys
import textwrap

import numpy as np

from kvcache import generate, generate_batch, iter_generate_batch, sampling_temperature
from utils import MODEL_SIZES, as_float32, default_models_dir, load_encoder_hparams_and_params, save_hf

__all__ = ["gpt2", "generate", "generate_batch", "generate_reference", "score", "main"]


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


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2) that points at --help."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class PathFriendlyFormatter(argparse.HelpFormatter):
    """Help text wrapped only at spaces, so a path such as ~/.cache/gpt2-numpy stays whole to copy."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False, break_long_words=False)


def command_line_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        formatter_class=PathFriendlyFormatter,
        description="Print GPT-2's continuation of PROMPT (or, with --score, how well GPT-2 predicts a file; "
        "with --save-hf, write the model as a Hugging Face folder). The first run downloads OpenAI's "
        "checkpoint and checks it; later runs map it straight from disk.",
        epilog="Sampling: greedy by default; --top_k, --top_p or --seed without --temperature sample at "
        "temperature 1, and --temperature 0 (greedy) takes none of them. A prompt that starts with a dash "
        "goes after --, as in: gpt2 -- '-5 degrees outside, and'",
        allow_abbrev=False,  # a misspelt flag is an error, never a guess
    )
    def option(name, **options):  # --name, and its dashed spelling (--top-k) kept out of the help text
        parser.add_argument(f"--{name}", **options)
        if "_" in name:
            hidden = {"dest": name, **options, "default": argparse.SUPPRESS, "help": argparse.SUPPRESS}
            parser.add_argument(f"--{name.replace('_', '-')}", **hidden)

    parser.add_argument("prompt", nargs="?", help="the text to continue, used exactly as given")
    option("n_tokens_to_generate", type=int, default=40, metavar="N", help="how many tokens to add (default: 40)")
    option("model", default="124M", metavar="PATH_OR_SIZE",
           help=f"which GPT-2: a size ({', '.join(MODEL_SIZES)}; default: 124M), or a folder in OpenAI's layout "
           "(checkpoint, hparams.json, model.ckpt.*) or Hugging Face's (config.json, model.safetensors, "
           "vocab.json, merges.txt)")
    option("model_size", dest="model", default=argparse.SUPPRESS, help=argparse.SUPPRESS)  # picoGPT's name
    option("models_dir", default=None, metavar="DIR",
           help=f"folder of the checkpoints, one subfolder per size (default: {default_models_dir()}: "
           "$GPT2_MODELS_DIR if set, else the models/ folder of this checkout, else "
           "$XDG_CACHE_HOME/gpt2-numpy/models, ~/.cache/gpt2-numpy/models without XDG_CACHE_HOME)")
    option("temperature", type=float, default=None, metavar="T",
           help="sample from softmax(logits / T); 0 is greedy (default: greedy, or 1 with --top_k, --top_p "
           "or --seed)")
    option("top_k", type=int, default=None, metavar="K", help="sample only among the K most likely tokens")
    option("top_p", type=float, default=None, metavar="P",
           help="sample only among the fewest most likely tokens whose probability reaches P")
    option("seed", type=int, default=None, help="seed the sampling, for a reproducible run")
    option("stream", action="store_true", help="print each token as soon as it is generated")
    option("score", metavar="FILE", default=None,
           help="print the tokens, perplexity and bits per byte of the UTF-8 text in FILE")
    option("stride", type=int, default=None, metavar="N",
           help="with --score, windows over a text longer than the context start N tokens apart "
           "(default: half the context)")
    option("save_hf", metavar="DIR", default=None,
           help="write the model to the new folder DIR in Hugging Face's layout "
           "(transformers.GPT2LMHeadModel.from_pretrained(DIR) loads it)")
    return parser


def print_score(encoder, params, n_head, text, stride):
    """Tokens, perplexity and bits per byte of `text`, over the tokens the model predicted (all but
    the first, and without window overlap, all but each window's first) and the bytes they hold."""
    ids = encoder.encode(text)
    nlls, positions = token_nlls(ids, params, n_head, stride=stride)  # [n_scored], [n_scored]
    predicted_bytes = sum(len(token_bytes(encoder, ids[i])) for i in positions)
    print(f"tokens: {len(ids)} ({len(positions)} predicted)")
    print(f"mean NLL: {nlls.mean():.4f} nats/token")
    print(f"perplexity: {math.exp(nlls.mean()):.4f}")
    print(f"bits per byte: {nlls.sum() / math.log(2) / predicted_bytes:.4f}")


def main(argv: list[str] | None = None) -> int:
    """`gpt2 PROMPT [options]`: print GPT-2's continuation of PROMPT (`--score FILE`, `--save-hf DIR`:
    see the help). Returns the exit status:
    0 done, 1 a download or a file failed, 2 bad input, 130 interrupted (Ctrl-C)."""
    parser = command_line_parser()
    args = parser.parse_args(argv)  # usage errors exit 2 here, before any download or model work
    options = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    try:
        if args.prompt is None and args.score is None and args.save_hf is None:
            raise ValueError(f"give a PROMPT to continue (e.g. {parser.prog} 'Hello, world'), --score FILE or --save-hf DIR")
        if args.prompt is not None and args.score is not None:
            raise ValueError("--score scores a file; give it no PROMPT")
        if args.model not in MODEL_SIZES and not os.path.isdir(os.path.expanduser(args.model)):
            raise ValueError(f"--model {args.model!r} is neither a GPT-2 size ({', '.join(MODEL_SIZES)}) nor a folder")
        if args.stride is not None and args.stride <= 0:
            raise ValueError(f"--stride must be > 0, got {args.stride}")
        if args.prompt == "":
            raise ValueError(f"the prompt is empty; give some text to continue, e.g. {parser.prog} 'Hello, world'")
        if args.n_tokens_to_generate < 0:
            raise ValueError(f"n_tokens_to_generate must be >= 0, got {args.n_tokens_to_generate}")
        sampling_temperature(**options)  # the check generate() makes, made before the download
    except ValueError as error:
        parser.error(str(error))
    try:
        models_dir = default_models_dir() if args.models_dir is None else args.models_dir
        text = None
        if args.score is not None:
            try:
                text = open(args.score, encoding="utf-8").read()
            except UnicodeDecodeError as error:
                raise ValueError(f"{args.score} is not UTF-8 text ({error})") from None
        encoder, hparams, params = load_encoder_hparams_and_params(args.model, models_dir)
        if args.save_hf is not None:
            save_hf(args.save_hf, encoder, hparams, params)
            print(f"wrote {args.save_hf}", file=sys.stderr)
        if text is not None:
            print_score(encoder, params, hparams["n_head"], text, args.stride)
        if args.prompt is None:
            return 0
        ids = encoder.encode(args.prompt)
        steps = iter_generate_batch([ids], params, hparams["n_head"], args.n_tokens_to_generate, **options)
        new_ids = (token for (token,) in steps)
        if args.stream:
            for piece in decode_stream(encoder, new_ids):
                sys.stdout.write(piece)
                sys.stdout.flush()
            sys.stdout.write("\n")
        else:
            print(encoder.decode(list(new_ids)))
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    except ValueError as error:  # bad input (e.g. a prompt too long for the context) or a damaged file
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a failed download or a missing file: the message says what to do
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
