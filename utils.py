"""picoGPT's utils.py: GPT-2's checkpoint downloaded and read as picoGPT's params tree.

A face over gpt2_numpy/checkpoints.py, under picoGPT's three names:

    encoder, hparams, params = load_encoder_hparams_and_params("124M", "models")
    download_gpt2_files("124M", "models/124M")
    params = load_gpt2_params_from_tf_ckpt("models/124M/model.ckpt", hparams)

Without TensorFlow: the checkpoint is parsed and memory-mapped with NumPy. `models_dir` may be left
out, for the usual models folder (gpt2_numpy/models_dir.py). A model's folder in place of a size is read where
it is, and a `models_dir` given with it goes unread: picoGPT's own main passes its "models" with whatever
model_size it was given (gpt2.main and the gpt2 command refuse that pair instead). This file is for running from
a checkout and is not installed.
"""
from gpt2_numpy.checkpoints import download_gpt2_files, load_encoder_hparams_and_params, \
    load_gpt2_params_from_tf_ckpt

__all__ = ["download_gpt2_files", "load_encoder_hparams_and_params", "load_gpt2_params_from_tf_ckpt"]
