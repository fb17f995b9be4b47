"""picoGPT's gpt2.py: GPT-2's forward pass and a greedy `main`, as faces over the `gpt2_numpy` package.

The forward pass is picoGPT's, one function per idea of the paper with a shape comment on each line;
it lives in gpt2_numpy/model.py and is imported here under picoGPT's names. `generate` is the fast
KV-cached loop (gpt2_numpy/kvcache.py): those same functions with a key/value cache around them, giving
the same tokens as picoGPT's full recompute (`generate_reference`).

    python gpt2.py "Alan Turing theorized that computers would one day become"    # the gpt2 command

    import gpt2
    text = gpt2.main("Alan Turing theorized that", n_tokens_to_generate=8)        # picoGPT's main: the text

This file is for running from a checkout and is not installed; `pip install .` gives the `gpt2` command
(gpt2_numpy/cli.py) and the package. It holds no logic of its own beyond picoGPT's `main`.
"""
from __future__ import annotations

import os
import sys

from gpt2_numpy.kvcache import DecodingWeights, generate, generate_batch
from gpt2_numpy.model import attention, count_of_new_tokens, ffn, gelu, generate_reference, gpt2, layer_norm, linear, \
    mha, softmax, transformer_block
from gpt2_numpy.scoring import score, token_nlls
from gpt2_numpy.checkpoints import load_encoder_hparams_and_params, model_folder
from gpt2_numpy.models_dir import MODEL_SIZES

__all__ = ["gpt2", "generate", "generate_batch", "generate_reference", "score", "token_nlls", "main",
           "gelu", "softmax", "layer_norm", "linear", "ffn", "attention", "mha", "transformer_block"]


def main(prompt: str, n_tokens_to_generate: int = 40, model_size: str = "124M", models_dir: str | None = None):
    """picoGPT's main: GPT-2's greedy continuation of `prompt`, returned as text. `models_dir` None means
    the usual models folder (gpt2_numpy/models_dir.py); a folder passed by name ("models") is that folder.
    `model_size` may also name a model's folder, read where it is: then no `models_dir` (ValueError), as the
    gpt2 command refuses --models_dir with a --model folder. (utils.load_encoder_hparams_and_params takes that
    pair and reads the folder: picoGPT's own main passes its models_dir, "models", whatever model_size is.)"""
    # a prompt that is no text, or none, is refused before any download (as the gpt2 command refuses it)
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be text (a str), got {type(prompt).__name__}; to continue token ids, call "
                        "generate(ids, params, n_head, n_tokens_to_generate)")
    if not prompt:
        raise ValueError("the prompt is empty; give some text to continue, e.g. main('Alan Turing theorized that')")
    count_of_new_tokens(n_tokens_to_generate)  # a count that is no int is refused before any download
    if models_dir is not None and model_size not in MODEL_SIZES:  # a folder: models_dir would go unread
        raise ValueError(f"models_dir={models_dir!r} is where GPT-2's sizes ({', '.join(MODEL_SIZES)}) are kept, "
                         f"and model_size={model_size!r} is none of them: a model's folder, read where it is; "
                         "drop models_dir, or give a size")
    encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir)
    input_ids = encoder.encode(prompt)
    # as the gpt2 command: a long run's weights as the compiled kernel reads them kept beside the checkpoint
    weights = DecodingWeights(params, folder=model_folder(model_size, models_dir))
    output_ids = generate(input_ids, weights, hparams["n_head"], n_tokens_to_generate)  # checks n_ctx
    return encoder.decode(output_ids)


if __name__ == "__main__":  # the gpt2 command, as the README shows it: python gpt2.py "prompt" [options]
    from gpt2_numpy.cli import main as command

    # the name its messages quote a command with, to type again (argparse's own is the bare "gpt2.py")
    sys.exit(command(prog=f"python {os.path.basename(sys.argv[0])}"))
