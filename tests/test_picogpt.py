"""picoGPT's three files at the checkout's root (gpt2.py, encoder.py, utils.py) keep picoGPT's interface over
gpt2_numpy: picoGPT's own gpt2.py, re-typed here, runs on our utils.py and encoder.py, and our gpt2.main is
picoGPT's main (it returns the text)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from tiny_checkpoint import write_tiny_checkpoint

PROMPT = "Alan Turing theorized that computers"

# picoGPT's gpt2.py, re-typed: the same names, calls and flow (utils.load_encoder_hparams_and_params, encoder.encode
# and .decode, a greedy loop over the full forward pass, fire.Fire(main)), in this file's own words.
PICOGPT_GPT2 = '''
import numpy as np


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps=1e-5):
    mean, variance = np.mean(x, axis=-1, keepdims=True), np.var(x, axis=-1, keepdims=True)
    return g * (x - mean) / np.sqrt(variance + eps) + b


def linear(x, w, b):
    return x @ w + b


def ffn(x, c_fc, c_proj):
    return linear(gelu(linear(x, **c_fc)), **c_proj)


def attention(q, k, v, mask):
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def mha(x, c_attn, c_proj, n_head):
    qkv = np.split(linear(x, **c_attn), 3, axis=-1)
    heads = list(map(lambda a: np.split(a, n_head, axis=-1), qkv))
    mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    outs = [attention(q, k, v, mask) for q, k, v in zip(*heads)]
    return linear(np.hstack(outs), **c_proj)


def transformer_block(x, mlp, attn, ln_1, ln_2, n_head):
    x = x + mha(layer_norm(x, **ln_1), **attn, n_head=n_head)
    return x + ffn(layer_norm(x, **ln_2), **mlp)


def gpt2(inputs, wte, wpe, blocks, ln_f, n_head):
    x = wte[inputs] + wpe[range(len(inputs))]
    for block in blocks:
        x = transformer_block(x, **block, n_head=n_head)
    return layer_norm(x, **ln_f) @ wte.T


def generate(inputs, params, n_head, n_tokens_to_generate):
    from tqdm import tqdm

    for _ in tqdm(range(n_tokens_to_generate), "generating"):
        logits = gpt2(inputs, **params, n_head=n_head)
        inputs.append(int(np.argmax(logits[-1])))
    return inputs[len(inputs) - n_tokens_to_generate:]


def main(prompt: str, n_tokens_to_generate: int = 40, model_size: str = "124M", models_dir: str = "models"):
    from utils import load_encoder_hparams_and_params

    encoder, hparams, params = load_encoder_hparams_and_params(model_size, models_dir)
    input_ids = encoder.encode(prompt)
    assert len(input_ids) + n_tokens_to_generate < hparams["n_ctx"]
    output_ids = generate(input_ids, params, hparams["n_head"], n_tokens_to_generate)
    return encoder.decode(output_ids)


if __name__ == "__main__":
    import fire

    fire.Fire(main)
'''

# fire is not a dependency: this stand-in passes the command line's words to main as fire would for plain words
# and flags, and prints what main returns (fire prints a returned string as it is).
FIRE_STAND_IN = '''
import sys


def Fire(function):
    args, kwargs = [], {}
    words = iter(sys.argv[1:])
    for word in words:
        if word.startswith("--"):
            kwargs[word[2:]] = next(words)
        else:
            args.append(word)
    kwargs = {k: int(v) if v.isdigit() else v for k, v in kwargs.items()}
    print(function(*args, **kwargs))
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A models folder holding a tiny 124M (random weights, GPT-2's vocabulary), and those weights."""
    folder = tmp_path_factory.mktemp("picogpt") / "models"
    params = write_tiny_checkpoint(folder / "124M", n_ctx=64, n_embd=32, n_head=2, seed=7)
    return folder, params


def expected_text(models_folder, params, n_new):
    from gpt2_numpy.encoder import get_encoder
    from gpt2_numpy.model import generate_reference

    encoder = get_encoder("124M", models_folder)
    return encoder.decode(generate_reference(encoder.encode(PROMPT), params, 2, n_new))


def test_picogpts_own_gpt2_py_runs_on_our_utils_and_encoder(models, tmp_path):
    """picoGPT's gpt2.py beside copies of our utils.py and encoder.py, as a picoGPT user would lay them out,
    run from that folder with fire's command line: the same text as our greedy loop."""
    folder, params = models
    pico = tmp_path / "picoGPT"
    pico.mkdir()
    (pico / "gpt2.py").write_text(textwrap.dedent(PICOGPT_GPT2))
    (pico / "fire.py").write_text(textwrap.dedent(FIRE_STAND_IN))
    for name in ("utils.py", "encoder.py"):
        shutil.copy(REPO / name, pico / name)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}  # gpt2_numpy, as installed
    command = [sys.executable, "gpt2.py", PROMPT, "--n_tokens_to_generate", "6", "--models_dir", str(folder)]
    run = subprocess.run(command, cwd=pico, capture_output=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    assert run.stdout.decode("utf-8") == expected_text(folder, params, 6) + "\n"


def test_our_main_is_picogpts_main(models, monkeypatch, tmp_path):
    """gpt2.main(prompt, n_tokens_to_generate, model_size, models_dir) returns the text, as picoGPT's does; without
    models_dir it reads the usual models folder, and "models" passed by name is that folder."""
    import gpt2

    folder, params = models
    expected = expected_text(folder, params, 5)
    assert gpt2.main(PROMPT, 5, "124M", str(folder)) == expected
    monkeypatch.setenv("GPT2_MODELS_DIR", str(folder))
    assert gpt2.main(PROMPT, n_tokens_to_generate=5) == expected
    monkeypatch.chdir(folder.parent)  # so the relative "models" names the folder above
    assert gpt2.main(PROMPT, n_tokens_to_generate=5, models_dir="models") == expected


def test_main_refuses_models_dir_beside_a_model_folder_but_picogpts_main_reads_the_folder(models, monkeypatch):
    """gpt2.main(prompt, n, FOLDER, models_dir=DIR) read FOLDER and ignored DIR without a word; it is refused in
    one line naming both (as gpt2 --model FOLDER --models_dir DIR is), before any load. picoGPT's own main passes
    its models_dir ("models") whatever model_size is, so utils.load_encoder_hparams_and_params keeps reading a
    folder given with one: picoGPT's code, run on our utils, continues with a model's folder."""
    import gpt2
    from gpt2_numpy import checkpoints

    folder, params = models
    model = str(folder / "124M")
    expected = expected_text(folder, params, 3)
    assert gpt2.main(PROMPT, 3, model) == expected  # a folder alone: read where it is
    picogpt = {"__name__": "picogpt_gpt2"}  # (not "__main__": its fire.Fire(main) stays out of this run)
    exec(textwrap.dedent(PICOGPT_GPT2), picogpt)
    assert picogpt["main"](PROMPT, 3, model) == expected  # picoGPT's models_dir="models" beside a folder

    def no_load(*args):
        raise AssertionError("main loaded a model for a call it refuses")

    monkeypatch.setattr(checkpoints, "load_encoder_hparams_and_params", no_load)
    monkeypatch.setattr(gpt2, "load_encoder_hparams_and_params", no_load)
    for models_dir in (str(folder), "models"):
        with pytest.raises(ValueError) as refused:
            gpt2.main(PROMPT, 3, model, models_dir=models_dir)
        message = str(refused.value)
        assert "\n" not in message and f"models_dir={models_dir!r}" in message, message
        assert f"model_size={model!r}" in message and "drop models_dir, or give a size" in message, message


def test_main_refuses_an_empty_or_non_text_prompt_before_loading(models, monkeypatch, tmp_path):
    """main("") loaded the model, then failed inside generate with "every prompt needs at least one token (e.g.
    [50256], ...)", ids where main takes text; main(ids) failed inside the regex ("expected string"). Both are
    refused first, before a model is loaded or downloaded, as the gpt2 command refuses an empty prompt."""
    import gpt2
    from gpt2_numpy import checkpoints

    def no_download(*args):
        raise AssertionError("main downloaded a model for a prompt it cannot use")

    monkeypatch.setattr(checkpoints, "download_gpt2_files", no_download)
    folder, _ = models
    for models_dir in (str(folder), str(tmp_path / "no-models-here")):
        with pytest.raises(ValueError, match=r"^the prompt is empty; give some text to continue, e\.g\. main\('"):
            gpt2.main("", 3, "124M", models_dir)
        with pytest.raises(TypeError, match=r"^prompt must be text \(a str\), got list; to continue token ids"):
            gpt2.main([36235, 39141], 3, "124M", models_dir)


def test_python_gpt2_py_names_itself_as_it_was_run():
    """Its messages quote a command to type again, `python gpt2.py -- -x`, not `gpt2.py -- -x` (not on PATH)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "gpt2.py", "-x"], cwd=REPO, capture_output=True, text=True, env=env,
                         timeout=300)
    assert run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
    assert run.stderr.startswith("python gpt2.py: error: ") and "python gpt2.py -- -x" in run.stderr, run.stderr


def test_the_checkout_faces_are_the_package():
    import encoder
    import gpt2
    import utils

    from gpt2_numpy import checkpoints, kvcache, model
    from gpt2_numpy import encoder as package_encoder

    assert gpt2.gpt2 is model.gpt2 and gpt2.generate is kvcache.generate
    assert utils.load_encoder_hparams_and_params is checkpoints.load_encoder_hparams_and_params
    assert encoder.get_encoder is package_encoder.get_encoder and encoder.get_pairs is package_encoder.get_pairs


def test_the_layers_take_what_picogpts_take_lists_included():
    """A learner tries a layer on a plain list, as picoGPT's softmax, layer_norm, linear and ffn allow
    (np.max, np.mean and x @ w take one): ours raised AttributeError ('list' object has no attribute 'max')
    from inside model.py. Each gives picoGPT's numbers, for a list and for an array."""
    import numpy as np

    import gpt2 as ours

    picogpt: dict = {}
    exec(textwrap.dedent(PICOGPT_GPT2), picogpt)
    rows = [[2.0, 1.0, 0.1], [-5.0, 0.0, 1.0]]
    rng = np.random.default_rng(0)
    dense = {"w": rng.normal(size=(3, 4)), "b": rng.normal(size=4)}
    mlp = {"c_fc": {"w": rng.normal(size=(3, 12)), "b": rng.normal(size=12)},
           "c_proj": {"w": rng.normal(size=(12, 3)), "b": rng.normal(size=3)}}
    calls = {
        "softmax": lambda layers, x: layers["softmax"](x),
        "layer_norm": lambda layers, x: layers["layer_norm"](x, g=np.ones(3), b=np.zeros(3)),
        "linear": lambda layers, x: layers["linear"](x, **dense),
        "ffn": lambda layers, x: layers["ffn"](x, **mlp),
    }
    for name, call in calls.items():
        for x in (rows, rows[0], np.array(rows)):
            expected = call(picogpt, x)
            got = call(vars(ours), x)
            assert isinstance(got, np.ndarray) and got.shape == expected.shape, (name, x)
            assert np.allclose(got, expected, atol=1e-6), (name, x)
    assert np.allclose(ours.softmax([2.0, 1.0, 0.1]).sum(), 1.0)
