"""Decoding: both cores' ``decode_bytes`` against tiktoken's, at every length where the fast core changes how it
looks ids up (one id, one itemgetter, itemgetters of DECODE_CHUNK_IDS ids with a last chunk of one), for every
kind of sequence a caller passes, and the same errors for ids that are not tokens."""

from __future__ import annotations

import numpy as np
import pytest
import tiktoken

from conftest import corpus_text
from tokenizer import get_encoding
from tokenizer.fast.core import DECODE_CHUNK_IDS

CHUNK = DECODE_CHUNK_IDS
LENGTHS = [0, 1, 2, 3, CHUNK - 1, CHUNK, CHUNK + 1, CHUNK + 2, 2 * CHUNK + 1, 3 * CHUNK + 17]


@pytest.fixture(scope="module", params=["gpt2", "cl100k_base", "o200k_base"])
def name_and_ids(request):
    name = request.param
    text = corpus_text("en_docs.txt", 60_000) + corpus_text("ja_manpages.txt", 30_000)
    ids = tiktoken.get_encoding(name).encode(text, allowed_special="all")
    assert len(ids) > max(LENGTHS)
    return name, ids


@pytest.mark.parametrize("core", ["fast", "reference"])
def test_decode_equals_tiktoken_at_every_length(name_and_ids, core):
    name, ids = name_and_ids
    oracle, ours = tiktoken.get_encoding(name), get_encoding(name, core=core)
    ids = ids[:-1] + [oracle.eot_token]  # a special token in the last chunk
    for length in LENGTHS:
        part = ids[-length:] if length else []
        expected = oracle.decode_bytes(part)
        assert ours.decode_bytes(part) == expected, length
        assert ours.decode(part) == oracle.decode(part), length
        assert ours.decode_bytes(tuple(part)) == expected
        assert ours.decode_bytes(np.array(part, dtype=np.uint32)) == expected
        assert ours.decode_bytes(np.array(part, dtype=np.int64)) == expected
        assert ours.decode_bytes(iter(part)) == expected
        assert ours.decode_bytes(range(len(part))) == oracle.decode_bytes(range(len(part)))
    batch = [ids[:n] for n in LENGTHS]
    assert ours.decode_batch(batch) == oracle.decode_batch(batch)


@pytest.mark.parametrize("at", [0, CHUNK - 1, CHUNK, 2 * CHUNK + 5])
@pytest.mark.parametrize("bad", [-1, 10**6, 10**30])
def test_an_id_that_is_not_a_token_is_named_wherever_it_is(at, bad):
    enc = get_encoding("gpt2")
    ids = [31373] * (2 * CHUNK + 10)
    ids[at] = bad
    with pytest.raises(KeyError, match=f"token id {bad} is not in the vocabulary"):
        enc.decode(ids)
    with pytest.raises(KeyError, match=f"token id {bad} is not in the vocabulary"):
        enc.decode_bytes(ids)


def test_an_unknown_id_is_named_as_the_number_it_is():
    # a .bin's ids come as NumPy integers (np.memmap): the message said "token id np.uint16(60000)"; an id of over
    # 4,300 digits, which Python will not write out, raised int()'s ValueError instead of the KeyError
    enc = get_encoding("gpt2")
    for bad, shown in ((np.uint16(60000), "60000"), (np.int64(-1), "-1"), (10**5000, "of 16,610 bits")):
        for decode in (enc.decode, enc.decode_bytes, enc.decode_tokens_bytes):
            with pytest.raises(KeyError, match=f"token id {shown} is not in the vocabulary of 'gpt2'"):
                decode(np.array([31373, bad]) if isinstance(bad, np.integer) else [31373, bad])


@pytest.mark.parametrize("at", [0, CHUNK + 3])
@pytest.mark.parametrize("bad", [1.0, "hello", None])
def test_an_id_that_is_not_an_integer_is_a_type_error(at, bad):
    enc = get_encoding("gpt2")
    ids = [31373] * (CHUNK + 10)
    ids[at] = bad
    with pytest.raises(TypeError, match="token ids must be integers"):
        enc.decode(ids)
