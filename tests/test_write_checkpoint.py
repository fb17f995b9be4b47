"""gpt2_numpy.tfcheckpoint.write_checkpoint, everyday: what it writes reads back (read_checkpoint, every CRC
checked) as the arrays it was given, and a GPT-2 written with it loads through load_encoder_hparams_and_params
as the weights it holds. That TensorFlow itself reads these files is checked in test_tfcheckpoint.py (exhaustive:
it imports TF)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from conftest import FUZZ_SHARE
from gpt2_numpy import checkpoints, tfcheckpoint
from test_gpt2 import random_params

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_]
TENSOR = st.sampled_from(DTYPES).flatmap(
    lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))


@settings(max_examples=FUZZ_SHARE, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.text(min_size=1, max_size=30), TENSOR, max_size=8))
def test_written_tensors_read_back_equal(tmp_path, tensors):
    prefix = tmp_path / "model.ckpt"
    tfcheckpoint.write_checkpoint(prefix, tensors)
    back = tfcheckpoint.read_checkpoint(prefix, verify_data=True)
    assert sorted(back) == sorted(tensors)
    for name, array in tensors.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape, name
        np.testing.assert_array_equal(back[name], array)


def test_a_gpt2_written_in_openais_layout_loads_as_its_weights(tmp_path):
    params = random_params(seed=4, n_ctx=16, n_embd=8, n_layer=2)
    tensors = {"model/wte": params["wte"], "model/wpe": params["wpe"], "model/ln_f/g": params["ln_f"]["g"],
               "model/ln_f/b": params["ln_f"]["b"]}
    for i, block in enumerate(params["blocks"]):
        for part in ("ln_1", "ln_2"):
            tensors[f"model/h{i}/{part}/g"], tensors[f"model/h{i}/{part}/b"] = block[part]["g"], block[part]["b"]
        for part, name in (("attn", "c_attn"), ("attn", "c_proj"), ("mlp", "c_fc"), ("mlp", "c_proj")):
            tensors[f"model/h{i}/{part}/{name}/w"] = block[part][name]["w"][None]  # [1, nx, nf], as OpenAI's
            tensors[f"model/h{i}/{part}/{name}/b"] = block[part][name]["b"]
    folder = tmp_path / "124M"
    folder.mkdir()
    tfcheckpoint.write_checkpoint(folder / "model.ckpt", tensors)
    (folder / "checkpoint").write_text('model_checkpoint_path: "model.ckpt"\n')
    hparams = {"n_vocab": 50257, "n_ctx": 16, "n_embd": 8, "n_head": 2, "n_layer": 2}
    (folder / "hparams.json").write_text(json.dumps(hparams))
    encoder, loaded_hparams, loaded = checkpoints.load_encoder_hparams_and_params(str(folder))
    assert loaded_hparams == hparams and encoder.encode("Hello") == [15496]

    def flat(tree, path=""):
        if isinstance(tree, dict):
            return {k: v for key, value in tree.items() for k, v in flat(value, f"{path}/{key}").items()}
        if isinstance(tree, list):
            return {k: v for i, value in enumerate(tree) for k, v in flat(value, f"{path}/{i}").items()}
        return {path: tree}

    assert flat(loaded).keys() == flat(params).keys()
    assert all(np.array_equal(flat(loaded)[key], array) for key, array in flat(params).items())
