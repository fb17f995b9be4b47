"""The `gpt2` command: GPT-2's continuation of a prompt, a file's score, a Hugging Face copy, the playground.

    gpt2 "Alan Turing theorized that computers would one day become" [--stream] [--temperature 0.8 ...]
    gpt2 - < prompt.txt                            # the prompt from standard input
    gpt2 "def f(x):" --model 774M --draft 124M     # the same tokens, drafted by 124M (or --lookup 2)
    gpt2 --score essay.txt [--stride 512]          # tokens, perplexity, bits per byte
    gpt2 --model 124M --save_hf out/gpt2           # a folder transformers loads
    gpt2 --serve [--port 8000] [--encoding PATH]   # the tokenizer playground, with GPT-2's next-token panel

`main(argv)` parses the arguments (argparse: text arrives exactly as typed), loads the model
(`checkpoints.load_encoder_hparams_and_params`, which downloads a missing size into the models folder
of `models_dir.default_models_dir`), and prints. Exit status, the rule both commands share
(`tokenizer.command_line`): 0 done; 1 a download failed or a model file is damaged or cannot be read (a
damaged file of a downloaded size is moved aside, so the next run fetches it again); 2 a mistake on the
command line or in its input (one line, before any download where it can be told then; an option that needs
another, such as --stride without --score, is one; a --model folder that holds no whole, consistent GPT-2,
found as it is read); 130 Ctrl-C; 141 the reader went away (| head).

What it does not do: hold model code. The forward pass is model.py's, decoding kvcache.py's (with
--draft or --lookup, speculative.py's), scoring scoring.py's; the playground's server is the tokenizer's
(`tokenizer/serve.py`), handed the model here.
"""
from __future__ import annotations

import argparse
import codecs
import contextlib
import math
import os
import re
import sys
from pathlib import Path

from tokenizer.command_line import (EXIT_FAILED, EXIT_MISTAKE, STDOUT_CLOSED, OneLineParser, OneValue, add_flag,
                                    add_version_flag, bar_if_slow, cannot_listen, decimal_number, error_message,
                                    host_address, run_guarded, said_if_slow, say, show_progress, shown_typed,
                                    stdout_named, typed_number, unbroken, unknown_arguments, whole_number)
from tokenizer.download import ChecksumError, DownloadError
from tokenizer.extras import install_hint
from tokenizer.text_input import argument_text, read_stdin_text, read_utf8_file
from tokenizer.user_cache import expand_home

from . import half
from .checkpoints import (MODEL_SIZES, check_size_folder, folder_layout, load_encoder_hparams_and_params, model_folder,
                          save_hf)
from .hfmodel import check_hf_folder
from .kvcache import DecodingWeights, iter_generate_batch, sampling_temperature
from .model import check_fits_context
from .models_dir import default_models_dir
from .speculative import DEFAULT_DRAFT_TOKENS, DraftModel, PromptLookup
from .tfcheckpoint import DamagedFile
from .speculative import iter_generate as iter_generate_speculative
from .scoring import token_nlls, windows


class CommandError(Exception):
    """A failure after the command line was accepted: printed as one line, exit ``status``."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def decode_stream(encoder, token_ids):
    """Yield the text of token_ids piece by piece as they arrive, holding back the bytes
    of a character split across tokens until it is complete (invalid bytes become U+FFFD,
    as in encoder.decode)."""
    utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for token_id in token_ids:  # (a GPT-2 token can hold part of a UTF-8 character)
        yield utf8.decode(encoder.encoding.decode_single_token_bytes(token_id))
    yield utf8.decode(b"", final=True)


def command_line_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog,
        description="Print GPT-2's continuation of PROMPT (or, with --score, how well GPT-2 predicts a file; "
        "with --save_hf, write the model as a Hugging Face folder; with --serve, start the tokenizer "
        "playground with GPT-2's next-token panel). The first run downloads OpenAI's checkpoint and checks "
        "it; later runs map it straight from disk.",
        allow_abbrev=False,  # a misspelt flag is an error, never a guess
    )
    # (the command as it was run, e.g. python gpt2.py from a checkout, where no gpt2 may be installed)
    parser.epilog = ("Sampling: greedy by default; --top_k, --top_p or --seed without --temperature sample at "
                     "temperature 1, and --temperature 0 (greedy) takes none of them. A prompt that starts with a "
                     f"dash goes after --, as in:\n    {parser.prog} -- '-5 degrees outside, and'")
    # names a user of OpenAI's gpt-2 scripts (--length, --model_name) or of HF's generate (max_new_tokens) types
    parser.flags_elsewhere = {"--length": "--n_tokens_to_generate", "--max_new_tokens": "--n_tokens_to_generate",
                              "--model_name": "--model"}

    def option(name, **options):  # --name, and its dashed spelling (--top-k) kept out of the help text
        add_flag(parser, name, **options)

    parser.add_argument("prompt", nargs="?",
                        help="the text to continue, used exactly as given; - reads it from standard input")
    add_version_flag(parser)
    option("n_tokens_to_generate", type=whole_number, default=None, metavar="N",
           help=f"how many tokens to add (default: {DEFAULT_NEW_TOKENS})")
    option("model", default="124M", metavar="PATH_OR_SIZE", action=OneValue, two="models",
           help=f"which GPT-2: a size ({', '.join(MODEL_SIZES)}; default: 124M), or a folder in OpenAI's layout "
           "(checkpoint, hparams.json, model.ckpt.*) or Hugging Face's (config.json, model.safetensors, "
           "vocab.json, merges.txt)")
    option("model_size", dest="model", default=argparse.SUPPRESS, help=argparse.SUPPRESS, action=OneValue,
           two="models")  # picoGPT's name
    option("models_dir", default=None, metavar="DIR", action=OneValue, two="models folders",
           help=f"folder of the checkpoints, one subfolder per size (default: {default_models_dir()}: "
           "$GPT2_MODELS_DIR if set, else the models/ folder of this checkout, else "
           "$XDG_CACHE_HOME/gpt2-numpy/models, ~/.cache/gpt2-numpy/models without XDG_CACHE_HOME; so a copy "
           f"installed with {unbroken('pip install .')} and the checkout it came from download into two folders: "
           "set $GPT2_MODELS_DIR to share one)")
    option("temperature", type=decimal_number, default=None, metavar="T",
           help="sample from softmax(logits / T); 0 is greedy (default: greedy, or 1 with --top_k, --top_p "
           "or --seed)")
    option("top_k", type=whole_number, default=None, metavar="K", help="sample only among the K most likely tokens")
    option("top_p", type=decimal_number, default=None, metavar="P",
           help="sample only among the fewest most likely tokens whose probability reaches P")
    option("seed", type=seed_number, default=None, help="seed the sampling, for a reproducible run (0 to 2**32 - 1)")
    option("stream", action="store_true", help="print each token as soon as it is generated")
    option("dtype", default="f32", choices=half.DTYPES,
           help="the weights' number format: f32 (default), or bf16, half the bytes and about twice as fast to "
           f"generate with, its logits rounded (generating needs numba: {unbroken(install_hint(half.EXTRA))}; the "
           "first run converts the checkpoint and keeps the copy beside it; with --draft, the draft's weights too)")
    option("draft", default=None, metavar="PATH_OR_SIZE", action=OneValue, two="drafts",
           help="speculative decoding: a smaller GPT-2 (a size or a folder, as --model; same vocabulary) drafts "
           "tokens that the model checks several at a time in one pass; the output is the same (greedy: the "
           "same tokens; sampling: the same distribution); a draft with a shorter context drafts while the "
           "positions fit in it, then the model goes on alone")
    option("lookup", type=whole_number, default=None, metavar="N",
           help="prompt-lookup decoding: draft the tokens that followed the latest earlier occurrence of the "
           "last N tokens (prompt and output), checked as with --draft; pays on text that repeats itself")
    option("draft_tokens", type=whole_number, default=None, metavar="K",
           help=f"with --draft or --lookup, tokens drafted per pass of the model (default {DEFAULT_DRAFT_TOKENS})")
    option("score", metavar="FILE", default=None, action=OneValue, two="files to score",
           help="print the tokens, perplexity and bits per byte of the UTF-8 text in FILE (- reads it from "
           "standard input)")
    option("stride", type=whole_number, default=None, metavar="N",
           help="with --score, windows over a text longer than the context start N tokens apart "
           "(default: half the context)")
    option("save_hf", metavar="DIR", default=None, action=OneValue, two="outputs",
           help="write the model to the new folder DIR in Hugging Face's layout "
           "(transformers.GPT2LMHeadModel.from_pretrained(DIR) loads it)")
    option("force", action="store_true", help="with --save_hf, replace the model files already in DIR")
    option("serve", action="store_true",
           help="serve the tokenizer playground (a web page) with the model's next-token panel, until Ctrl-C")
    option("host", type=host_address, default=None,
           help="with --serve, the address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every "
           "network this machine is on, e.g. a classroom's; the playground has no login)")
    option("port", type=whole_number, default=None, help="with --serve, the port (default 8000; 0: any free port)")
    option("encoding", action="append", default=None, metavar="NAME|PATH",
           help="with --serve, the page's first encoding, or a saved tokenizer to offer too (a tokenizer.json, its "
           "folder, a train --out folder); repeat for more (default gpt2)")
    return parser


def seed_number(value: str) -> int:
    """``--seed``: what NumPy's generator takes, a whole number from 0 to 2**32 - 1. Read as every option's whole
    number is (whole_number: digits 0-9, a long value refused in one short line before int() is asked)."""
    expected = "a whole number from 0 to 2**32 - 1"
    seed = typed_number(value, expected)
    if not 0 <= seed < 2**32:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {shown_typed(value)}")
    return seed


# Options that mean something only with another (by dest): one without it is a mistake, never silently ignored.
NEEDS = {"stride": "score", "force": "save_hf", "host": "serve", "port": "serve", "encoding": "serve",
         "stream": "prompt", "n_tokens_to_generate": "prompt", "temperature": "prompt", "top_k": "prompt",
         "top_p": "prompt", "seed": "prompt", "draft": "prompt", "lookup": "prompt",
         "draft_tokens": ("draft", "lookup")}  # a tuple: any one of them
DEFAULT_NEW_TOKENS = 40


def flag_name(dest: str | tuple) -> str:
    if isinstance(dest, tuple):
        return " or ".join(flag_name(one) for one in dest)
    return "a PROMPT" if dest == "prompt" else f"--{dest}"


def check_command_line(parser, args) -> None:
    """Every mistake that can be told before any download or model work (ValueError: one line, exit 2)."""
    wants = [flag for flag, given in (("PROMPT", args.prompt is not None), ("--score", args.score is not None),
                                      ("--save_hf", args.save_hf is not None), ("--serve", args.serve)) if given]
    if not wants:
        raise ValueError(f"give a PROMPT to continue (e.g. {parser.prog} 'Hello, world'), --score FILE, "
                         "--save_hf DIR or --serve")
    if args.prompt is not None and args.score is not None:
        raise ValueError("--score scores a file; give it no PROMPT")
    if args.serve and len(wants) > 1:
        raise ValueError(f"--serve runs until Ctrl-C; give it no {' or '.join(w for w in wants if w != '--serve')}")
    def given(dest):  # a value, 0 included (0 == False: `not in (None, False)` would miss --port 0)
        if isinstance(dest, tuple):
            return any(given(one) for one in dest)
        value = getattr(args, dest)
        return value is not None and value is not False

    stray = [dest for dest, needed in NEEDS.items() if given(dest) and not given(needed)]
    if stray:
        needed = NEEDS[stray[0]]
        alone = " and ".join(flag_name(dest) for dest in stray if NEEDS[dest] == needed)
        verb = "goes" if " and " not in alone else "go"
        raise ValueError(f"{alone} {verb} with {flag_name(needed)}, which is not given: add {flag_name(needed)}, "
                         f"or drop {alone}")
    if args.port is not None and not 0 <= args.port <= 65535:
        raise ValueError(f"--port {args.port}: expected a port from 0 to 65535 (0: any free port)")
    check_model_name("--model", args.model)
    if args.draft is not None:
        check_model_name("--draft", args.draft)
        if args.lookup is not None:
            raise ValueError("--draft and --lookup are two ways to draft tokens; give one of them")
    if args.model in MODEL_SIZES or args.draft in MODEL_SIZES:  # a size is read from (or fetched into) that folder
        check_models_dir(args.models_dir)
        for size in [name for name in (args.model, args.draft) if name in MODEL_SIZES]:  # models/124M a file
            check_size_folder(size, args.models_dir)
    elif args.models_dir is not None:  # only sizes are looked for there: a folder is read where it is
        folders = [f"{flag} {name}" for flag, name in (("--model", args.model), ("--draft", args.draft)) if name]
        named = f"{folders[0]} names a folder" if len(folders) == 1 else f"{' and '.join(folders)} name folders"
        raise ValueError(f"--models_dir is where GPT-2's sizes ({', '.join(MODEL_SIZES)}) are kept, and {named}, "
                         "read where it is: drop --models_dir, or give a size")
    if args.lookup is not None and args.lookup < 1:
        raise ValueError(f"--lookup {args.lookup}: expected the number of tokens to match, a whole number >= 1")
    if args.draft_tokens is not None and args.draft_tokens < 1:
        raise ValueError(f"--draft_tokens {args.draft_tokens}: expected a whole number >= 1")
    if args.save_hf is not None:  # the output rule, before any download (tokenizer/outputs.py)
        # a model's own folder: with --force its files would be replaced by what is read from them; without,
        # a second layout would be written beside the first
        for flag, name in (("--model", args.model), ("--draft", args.draft)):
            if name is not None and expand_home(args.save_hf).resolve() == model_folder(
                    name, args.models_dir).resolve():
                raise ValueError(f"--save_hf {args.save_hf} is the folder {flag} reads the model from; name another "
                                 "folder")
        try:
            check_hf_folder(args.save_hf, overwrite=args.force, flag="--save_hf")
        except OSError as error:
            raise ValueError(str(error)) from None
    if args.stride is not None and args.stride <= 0:
        raise ValueError(f"--stride must be > 0, got {args.stride}")
    if args.prompt == "":
        raise ValueError(f"the prompt is empty; give some text to continue, e.g. {parser.prog} 'Hello, world'")
    if args.n_tokens_to_generate is None:
        args.n_tokens_to_generate = DEFAULT_NEW_TOKENS
    if args.n_tokens_to_generate < 0:
        raise ValueError(f"--n_tokens_to_generate must be >= 0, got {args.n_tokens_to_generate}")
    try:
        sampling_temperature(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    except ValueError as error:  # the library names its parameters; the user typed flags
        raise ValueError(sampling_flags(str(error))) from None
    if args.dtype != "f32":
        if args.prompt is None and args.score is None:
            raise ValueError(f"--dtype {args.dtype} goes with a PROMPT or --score, which are not given: add one, "
                             f"or drop --dtype")
        # generating multiplies through numba's kernel; --score runs the rounded weights through NumPy alone
        if args.prompt is not None and half.missing_extra(args.dtype):
            raise ValueError(f"--{half.missing_extra(args.dtype)}")


def sampling_flags(message: str) -> str:
    """A message of kvcache.sampling_temperature, its parameters (top_p) named as the flags typed (--top_p)."""
    message = message.replace("leave out the temperature", "leave out --temperature")
    return re.sub(r"\b(?<!--)(temperature|top_k|top_p|seed)\b", r"--\1", message)


def check_model_name(flag: str, name: str) -> None:
    """A ValueError unless `name` (of --model or --draft) is a GPT-2 size or a folder holding a model."""
    if name in MODEL_SIZES:
        return
    if not name:  # (Path("") is the current folder: an empty value would name it without saying so)
        raise ValueError(f"{flag} is empty; give a GPT-2 size ({', '.join(MODEL_SIZES)}) or a model's folder")
    folder = model_folder(name)
    if not folder.is_dir():
        raise ValueError(f"{flag} {name!r} is neither a GPT-2 size ({', '.join(MODEL_SIZES)}) nor a folder")
    if folder_layout(folder) is None:
        raise ValueError(f"{flag} {name}: the folder holds neither OpenAI's layout (checkpoint, "
                         "hparams.json, model.ckpt.*) nor Hugging Face's (config.json, model.safetensors)")


def check_models_dir(models_dir: str | None) -> None:
    """A ValueError when the models folder (--models_dir, else the default) is, or lies inside, something that is
    not a folder: no size could be read there or downloaded into it, which a run would find only when it fails."""
    if models_dir == "":  # Path("") is the current folder, where a download would spill its files unasked
        raise ValueError("--models_dir is empty; give the folder that holds the models, or is to hold them")
    folder = Path(default_models_dir() if models_dir is None else models_dir)
    nearest = next((path for path in (folder, *folder.parents) if path.exists()), None)  # what the path runs into
    if nearest is None or nearest.is_dir():
        return
    if models_dir is not None:
        named = f"--models_dir {models_dir}"
    else:  # (a checkout's models/ and the cache folder are the project's own: most likely the variable's)
        named = f"$GPT2_MODELS_DIR {folder}" if os.environ.get("GPT2_MODELS_DIR") else f"the models path {folder}"
    what = "is not a folder" if nearest == folder else f"lies inside {nearest}, which is not a folder"
    raise ValueError(f"{named} {what}; pass the folder that holds the models, or is to hold them "
                     "(one subfolder per size)")


def read_score_file(path: str) -> str:
    """The text of --score's FILE (``-``: standard input, as the PROMPT's ``-`` and every input of gpt2-tokenizer),
    or ValueError (exit 2) saying why it cannot be scored."""
    if path == "-":
        text = read_stdin_text("--score -, the text on stdin,")
        if not text:
            raise ValueError("--score -: stdin is empty; give a text of at least two tokens")
        return text
    try:
        text = read_utf8_file(path, what=f"--score {path}")
    except OSError as error:
        raise ValueError(f"{error}; pass a UTF-8 text file") from None
    if not text:
        raise ValueError(f"--score {path}: the file is empty; give a text of at least two tokens")
    return text


def ids_to_score(encoder, text, stride, n_ctx, path):
    """The token ids of --score's `text`, or ValueError (exit 2) when the model (its context, n_ctx, known only
    once it is loaded) cannot score them: told before anything is written."""
    ids = encoder.encoding.encode_ordinary(text)  # a whole file: the fast core (encoder.encode's ids, sooner)
    if len(ids) < 2:
        raise ValueError(f"--score {path} holds {len(ids)} token; the first has no context, so give at least two")
    if stride is not None and stride > n_ctx:
        raise ValueError(f"--stride {stride} is more than the model's context, n_ctx={n_ctx}: windows start at most "
                         f"a context apart, or the tokens between them would go unscored; give at most {n_ctx}")
    return ids


def print_score(encoder, params, n_head, ids, stride, *, progress=None, what="scoring"):
    """Tokens, perplexity and bits per byte of the text of `ids` (ids_to_score's), over the tokens the model
    predicted (all but the first, and without window overlap, all but each window's first) and the bytes they hold.
    progress: a bar on stderr counting the tokens scored, window by window (default: show_progress()); off a
    terminal, a long score says ``what: N tokens in W windows ...`` as it starts (said_if_long)."""
    from tqdm import tqdm  # imported here, as the other commands do: only a run that scores needs it

    n_ctx = len(params["wpe"])
    spans = windows(len(ids), n_ctx, stride=stride)
    n_to_score = sum(end - first for _, end, first in spans)
    # every position of every window goes through the weights, the overlap's too
    said_if_long(f"{what}: {n_to_score} tokens in {len(spans)} window{'s' * (len(spans) != 1)} of up to {n_ctx}",
                 sum(end - start for start, end, _ in spans) / PREFILL_POSITIONS_PER_PASS * weight_bytes(params))
    progress = show_progress() if progress is None else progress
    with tqdm(total=n_to_score, unit="tok", desc="scoring", disable=not progress, leave=False) as bar:
        nlls, positions = token_nlls(ids, params, n_head, stride=stride, progress=bar.update)  # [n_scored] each
    predicted_bytes = sum(len(encoder.encoding.decode_single_token_bytes(ids[i])) for i in positions)
    to_stdout(f"tokens: {len(ids)} ({len(positions)} predicted)\n"
              f"mean NLL: {nlls.mean():.4f} nats/token\n"
              f"perplexity: {math.exp(nlls.mean()):.4f}\n"
              f"bits per byte: {nlls.sum() / math.log(2) / predicted_bytes:.4f}\n")


# Off a terminal, generating and scoring say one line as they start when they are long, told by their size, never
# by a timer (as tokenizer.command_line.SLOW_BYTES: a log reads the same on every machine). Their size is the
# bytes of weights the model reads: decoding reads every weight once a new token; a prompt's positions, or a
# scored window's, go through the weights together, bound by the arithmetic more than by the reading, about
# PREFILL_POSITIONS_PER_PASS of them in one decoding step's time (docs/performance.md: 1,000 positions of 124M in
# 0.7 s, where one step takes 10-12 ms). Decoding reads the weights at tens of GB/s (124M's 0.5 GB in 10-20 ms),
# so the 2 s that nothing waits in silence are about SLOW_WEIGHT_READS: the default 40 new tokens after a short
# prompt stay quiet at 124M and 355M (20 and 57 GB read) and speak at 774M and 1558M (124 and 250 GB); 500 speak
# from 124M up.
SLOW_WEIGHT_READS = 64 << 30
PREFILL_POSITIONS_PER_PASS = 16


def said_if_long(what: str, n_bytes_read: float) -> None:
    """Off a terminal, ``what ...`` on stderr now if the work about to start reads SLOW_WEIGHT_READS bytes of
    weights or more; on a terminal, nothing (its bars and said_if_slow speak there, after a moment)."""
    if n_bytes_read >= SLOW_WEIGHT_READS and not show_progress():
        say(f"{what} ...")


def weight_bytes(tree) -> int:
    """The bytes of every array in a params tree (nested dicts and lists of arrays)."""
    if isinstance(tree, dict):
        return sum(weight_bytes(branch) for branch in tree.values())
    if isinstance(tree, list):
        return sum(weight_bytes(branch) for branch in tree)
    return tree.nbytes


def load_model(name, models_dir, flag="--model"):
    """(encoder, hparams, params) of --model's (or --draft's: ``flag``) ``name``, or a CommandError found only
    now that the files are read (the command line itself was checked before). Exit 1 for what the machine or a
    download did: a download failed, a downloaded size's file is damaged (set aside to fetch again), a file that
    cannot be read, a weights file of a folder whose bytes are damaged. Exit 2 for a folder the user named that
    holds no whole, consistent GPT-2 (a file missing, a config that contradicts its weights, no tokenizer): a
    mistake in what was passed, told with what to pass instead."""
    try:
        return load_encoder_hparams_and_params(name, models_dir)
    except OSError as error:
        raise CommandError(error_message(error), EXIT_FAILED) from None
    except ValueError as error:
        if name in MODEL_SIZES or isinstance(error, DamagedFile):
            raise CommandError(error_message(error), EXIT_FAILED) from None
        raise CommandError(f"{flag} {name}: {error_message(error)}", EXIT_MISTAKE) from None


def load_draft_model(args, models_dir, encoder, model_params):
    """--draft's (hparams, params), checked to share the model's vocabulary; None without --draft. Loaded with
    the model, so that a draft that cannot serve is told before anything is written or converted."""
    if args.draft is None:
        return None
    draft_encoder, draft_hparams, draft_params = load_model(args.draft, models_dir, flag="--draft")
    if draft_encoder.decoder != encoder.decoder:  # id -> token: the ids must mean the same
        raise CommandError(f"--draft {args.draft}: its vocabulary differs from --model {args.model}'s; a draft "
                           "must share the model's tokens (every GPT-2 size does)", EXIT_MISTAKE)
    # the same tokens, but a model may have more ids than tokens (a vocabulary padded to 50304, as nanoGPT's):
    # told here, not once the run (and --save_hf's writing) is under way
    n_ids, n_draft_ids = len(model_params["wte"]), len(draft_params["wte"])
    if n_draft_ids != n_ids:
        raise CommandError(f"--draft {args.draft}: its model has {n_draft_ids} token ids and --model {args.model}'s "
                           f"{n_ids}; a draft must have the model's (every GPT-2 size has 50257)", EXIT_MISTAKE)
    return draft_hparams, draft_params


def make_draft(args, models_dir, draft_model):
    """The draft --draft or --lookup asks for (None without them), ready to decode. --draft's weights take
    --dtype as the model's do (bf16: half the bytes to read for the draft too), and are kept beside its own
    checkpoint (the bf16 copy, or the compiled kernel's rows: a long run's draft decodes as long)."""
    if args.lookup is not None:
        return PromptLookup(args.lookup)
    if draft_model is None:
        return None
    draft_hparams, draft_params = draft_model
    weights = DecodingWeights(draft_params, dtype=args.dtype, folder=model_folder(args.draft, models_dir))
    return DraftModel(weights, draft_hparams["n_head"])


def generate_text(encoder, hparams, params, args, ids, draft=None, *, bytes_per_pass=0) -> None:
    """The continuation of the prompt's `ids`, on stdout (streamed with --stream). bytes_per_pass: the weights'
    bytes a decoding step reads, for the line a long run says at its start off a terminal (said_if_long)."""
    options = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if draft is None:
        steps = iter_generate_batch([ids], params, hparams["n_head"], args.n_tokens_to_generate, **options)
        new_ids = (token for (token,) in steps)
    else:
        k = DEFAULT_DRAFT_TOKENS if args.draft_tokens is None else args.draft_tokens
        new_ids = iter_generate_speculative(ids, params, hparams["n_head"], args.n_tokens_to_generate, draft,
                                            draft_tokens=k, **options)
    n_new = args.n_tokens_to_generate
    if n_new:  # (no new token: the prompt is not run either)
        said_if_long(f"generating {n_new} token{'s' * (n_new != 1)} with {args.model} after a {len(ids)}-token "
                     "prompt", (n_new + len(ids) / PREFILL_POSITIONS_PER_PASS) * bytes_per_pass)
    new_ids = said_before_the_first(new_ids, "loading the weights and reading the prompt")
    if args.stream:  # (a notice waits for the line's end: said mid-line, it would cut the text on a terminal)
        notices = []
        print_streamed(decode_stream(encoder, with_text(new_ids, encoder, params.n_vocab, tell=notices.append)),
                       notices)
    else:  # the text comes at the end: until then a bar counts the tokens on a terminal (drawn after the wait
        # for the first token, so never on the line where that wait is announced)
        with bar_if_slow(new_ids, total=args.n_tokens_to_generate, unit="tok", desc="generating") as bar:
            text = encoder.decode(list(with_text(bar, encoder, params.n_vocab)))
        to_stdout(text + "\n")


def print_streamed(pieces, notices=()) -> None:
    """The pieces of text on stdout as they come, then the end of the line, then ``notices`` (lines for stderr,
    added to while the pieces come) said below it. What can stop it once a piece is out (every check of the
    command line and the model came before the first token): Ctrl-C, a character stdout's encoding cannot print,
    a full disk. The text so far then gets the end of its line, so that the notices and the error, which
    run_guarded prints on stderr, start on lines of their own where both streams share a terminal; the exit
    status is the error's. A reader gone away (BrokenPipeError) gets nothing more on stdout."""
    line_is_open = False  # text printed since the last line's end
    try:
        for piece in pieces:
            to_stdout(piece)
            line_is_open = line_is_open if not piece else not piece.endswith("\n")
    except BaseException as error:  # (KeyboardInterrupt too: Ctrl-C is the usual way to end a long stream)
        if line_is_open and not isinstance(error, BrokenPipeError):
            with contextlib.suppress(Exception):  # stdout may be what failed: then the error says so, as it is
                sys.stdout.write("\n")
                sys.stdout.flush()
        raise
    else:
        to_stdout("\n")
    finally:
        for notice in notices:
            say(notice)


def to_stdout(text: str) -> None:
    """`text` on stdout, written through now. stdout that cannot take it (a full disk) is one line naming it, exit
    1, not the bare "No space left on device" of a flush at the end; a reader gone away (BrokenPipeError) is left
    to end the run quietly (141), and a character stdout's encoding cannot print to be told as such."""
    with stdout_named():  # run_guarded says a StdoutFailed in one line, exit 1
        sys.stdout.write(text)
        sys.stdout.flush()


def with_text(token_ids, encoder, n_ids, *, tell=say):
    """token_ids without those the tokenizer has no text for, saying so once (``tell``: on stderr). A model may
    have more ids than its tokenizer has tokens (a vocabulary padded to a round number, as nanoGPT's 50304 for
    GPT-2's 50257); such an id stands for no text, so it prints as nothing, as Hugging Face's tokenizers decode it."""
    told = False
    for token in token_ids:
        if token in encoder.decoder:
            yield token
        elif not told:
            tell(f"token id {token} stands for no text: the model has {n_ids} token ids, its tokenizer "
                 f"{len(encoder.decoder)} tokens (a padded vocabulary); such ids print as nothing")
            told = True


def said_before_the_first(token_ids, what: str):
    """token_ids, saying ``what ...`` on a terminal if the first is slow to come (said_if_slow): a large model's
    weights read from disk, a long prompt, the compiled kernel loaded and timed all come before it."""
    token_ids = iter(token_ids)
    with said_if_slow(what):
        first = next(token_ids, None)
    if first is not None:
        yield first
        yield from token_ids


def serve_playground(args, hparams, params) -> None:
    """The tokenizer's playground, handed this model for its next-token panel; runs until Ctrl-C."""
    from tokenizer.encoding_argument import open_encoding
    from tokenizer.serve import Playground, PlaygroundServer

    from .next_tokens import NextTokens

    encodings = []
    for name in args.encoding or ["gpt2"]:
        try:
            with said_if_slow(f"loading {name}"):
                encodings.append(open_encoding(name))
        except (ValueError, KeyError, OSError) as error:  # a download that failed is no mistake of the user's
            status = EXIT_FAILED if isinstance(error, (DownloadError, ChecksumError)) else EXIT_MISTAKE
            raise CommandError(f"--encoding {name}: {error_message(error)}", status) from None
    try:
        model = NextTokens(params, hparams["n_head"], name=Path(args.model).name)
    except ValueError as error:
        raise CommandError(f"--model {args.model}: {error}", 2) from None
    host, port = args.host or "127.0.0.1", 8000 if args.port is None else args.port
    try:
        server = PlaygroundServer(Playground(encodings, model=model), host, port)
    except OSError as error:
        raise CommandError(cannot_listen(error, host, port), EXIT_MISTAKE) from None
    with server:
        print(f"the tokenizer playground is at {server.url} with {model.name}'s next tokens (Ctrl-C stops it)",
              flush=True)
        server.serve_forever()


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """`gpt2 PROMPT [options]` (see the module's docstring and --help). Returns the exit status:
    0 done, 1 a download or a model file failed, 2 a mistake in the command line or its input,
    130 interrupted (Ctrl-C), 141 the reader of stdout went away."""
    parser = command_line_parser(prog)
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(unknown_arguments(unknown, argv, parser, command=parser.prog, text="prompt",
                                       text_given=args.prompt is not None))
    try:
        if sys.stdout is None:  # started with stdout closed (>&-): Python leaves no stream to print to
            raise ValueError(STDOUT_CLOSED)
        if args.prompt == "-":  # as gpt2-tokenizer's TEXT: the prompt is standard input, exactly as it comes
            args.prompt = read_stdin_text("the prompt on stdin")
        elif args.prompt is not None:
            args.prompt = argument_text(args.prompt, "the prompt")
        check_command_line(parser, args)
        text = read_score_file(args.score) if args.score is not None else None
    except ValueError as error:
        parser.error(str(error))
    # exit statuses: tokenizer.command_line's rule, the same as gpt2-tokenizer's
    errors = [(CommandError, lambda error: error.status),
              (ValueError, EXIT_MISTAKE),  # bad input found once the model is known (a prompt too long for it)
              (OSError, EXIT_FAILED)]  # e.g. --save_hf into a folder that cannot be written
    return run_guarded(parser.prog, lambda: run(args, text), errors=errors)


def run(args, text: str | None) -> None:
    """The work the command line asked for, once it was checked."""
    models_dir = default_models_dir() if args.models_dir is None else args.models_dir
    encoder, hparams, params = load_model(args.model, models_dir)
    draft_model = load_draft_model(args, models_dir, encoder, params)
    # every check the loaded model makes possible, before any work (--save_hf's folder written, bf16 weights
    # converted, their kernel compiled): a prompt too long, a text too short, costs one line and nothing written
    ids = encoder.encode(args.prompt) if args.prompt is not None else None
    if ids is not None:
        check_fits_context(len(ids), args.n_tokens_to_generate, hparams["n_ctx"])
    score_ids = ids_to_score(encoder, text, args.stride, len(params["wpe"]), args.score) if text is not None else None
    if args.save_hf is not None:
        with said_if_slow(f"writing {args.save_hf}", n_bytes=weight_bytes(params)):  # (1558M: 6 GB of float32)
            save_hf(args.save_hf, encoder, hparams, params, overwrite=args.force, flag="--save_hf")
        # what the command made, so stdout; unless stdout carries the continuation of a PROMPT
        print(f"wrote {args.save_hf}", file=sys.stdout if args.prompt is None else sys.stderr)
    if score_ids is not None:
        # the rounded weights in float32: the bf16 model's numbers, through the readable forward pass
        scored = params
        if args.dtype == "bf16":
            with said_if_slow("rounding the weights to bf16", n_bytes=weight_bytes(params)):  # (1558M: ~20 s)
                scored = half.rounded_params(params)
        print_score(encoder, scored, hparams["n_head"], score_ids, args.stride,
                    what=f"scoring {args.score} with {args.model}")
    if args.serve:
        serve_playground(args, hparams, params)
    if ids is not None:
        # a decoding step reads the weights as loaded, float32, or bf16's half of their bytes
        bytes_per_pass = weight_bytes(params) // (2 if args.dtype == "bf16" else 1)
        # the checkpoint's folder: a long run's weights as the compiled kernel reads them are kept beside it
        # (float32 rows, or bf16), made once and mapped by later runs
        params = DecodingWeights(params, dtype=args.dtype, folder=model_folder(args.model, models_dir))
        generate_text(encoder, hparams, params, args, ids, make_draft(args, models_dir, draft_model),
                      bytes_per_pass=bytes_per_pass)
