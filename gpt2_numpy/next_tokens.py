"""GPT-2's guess at the next token, for the tokenizer playground's next-token panel.

:class:`NextTokens` holds a model's params and answers ``top(ids, k)``: the ``k`` likeliest next tokens
after ``ids`` with their probabilities, the softmax of the readable forward pass's logits at the last
position (:func:`gpt2_numpy.model.gpt2`). It also has the ``name`` and ``n_ctx`` the page shows. The
playground (``tokenizer/serve.py``) is handed such an object by the command that starts it (``gpt2
--serve``), so the tokenizer package never imports the model.

What it does not do: sample, generate text or serve anything; it only ranks one next token.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from tokenizer import get_encoding

from .checkpoints import load_encoder_hparams_and_params
from .model import gpt2

TOP_K = 10


class NextTokens:
    """The next-token model: ``params`` is picoGPT's tree of arrays, whose vocabulary must be GPT-2's 50,257
    tokens (the playground encodes the text with GPT-2's encoding)."""

    def __init__(self, params: dict, n_head: int, *, name: str = "GPT-2"):
        n_vocab, gpt2_vocab = params["wte"].shape[0], get_encoding("gpt2").n_vocab
        if n_vocab != gpt2_vocab:
            raise ValueError(f"model {name}: {n_vocab} token embeddings, but GPT-2's vocabulary has "
                             f"{gpt2_vocab} tokens; pass a GPT-2 checkpoint")
        self.params, self.n_head, self.name = params, n_head, name
        self.n_ctx = params["wpe"].shape[0]
        self._lock = threading.Lock()  # one forward pass at a time: they share the machine's cores anyway

    @classmethod
    def load(cls, model: str, models_dir: str | Path | None = None) -> NextTokens:
        """``model``: a size (``124M``, fetched into ``models_dir``, by default the models folder of
        :func:`gpt2_numpy.models_dir.default_models_dir`, if missing) or a model folder."""
        _, hparams, params = load_encoder_hparams_and_params(model, models_dir)
        return cls(params, hparams["n_head"], name=Path(model).name)

    def top(self, ids: list[int], k: int = TOP_K) -> list[tuple[int, float]]:
        """The ``k`` likeliest next tokens after ``ids`` (the last ``n_ctx`` of them; ``<|endoftext|>`` when
        there are none, as GPT-2 saw at the start of each document), with their probabilities."""
        ids = list(ids[-self.n_ctx :]) or [get_encoding("gpt2").eot_token]
        with self._lock:
            logits = gpt2(ids, **self.params, n_head=self.n_head)[-1]  # [n_seq, n_vocab] -> [n_vocab]
        logits = logits.astype(np.float64)
        probs = np.exp(logits - logits.max())  # [n_vocab]; minus the max: exp cannot overflow
        probs /= probs.sum()
        best = np.argsort(-probs, kind="stable")[:k]  # [k]
        return [(int(i), float(probs[i])) for i in best]
