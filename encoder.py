"""picoGPT's encoder.py (OpenAI's GPT-2 encoder): text <-> GPT-2's token ids, by OpenAI's algorithm.

A face over gpt2_numpy/encoder.py, under OpenAI's names:

    enc = get_encoder("124M", "models")     # the folder's encoder.json + vocab.bpe, else GPT-2's own
    ids = enc.encode("Not all heroes wear capes.")   # pattern, byte map, enc.bpe() over enc.bpe_ranks
    text = enc.decode(ids)
    enc.encoding.encode_ordinary(long_text)         # the same ids through the fast core, for long texts

This file is for running from a checkout and is not installed.
"""
from gpt2_numpy.encoder import Encoder, bytes_to_unicode, get_encoder, get_pairs

__all__ = ["Encoder", "bytes_to_unicode", "get_encoder", "get_pairs"]
