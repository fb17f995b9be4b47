"""picoGPT's encoder.py (OpenAI's GPT-2 encoder interface): text <-> GPT-2's token ids.

A face over gpt2_numpy/encoder.py, under OpenAI's names:

    enc = get_encoder("124M", "models")     # the folder's encoder.json + vocab.bpe, else GPT-2's own
    ids = enc.encode("Not all heroes wear capes.")
    text = enc.decode(ids)

This file is for running from a checkout and is not installed.
"""
from gpt2_numpy.encoder import Encoder, bytes_to_unicode, get_encoder

__all__ = ["Encoder", "bytes_to_unicode", "get_encoder"]
