"""The face and its two cores: the reference core is the readable one, and it loads nothing of the fast tier.

The ids of both cores are compared with tiktoken's in the parity suites (test_parity.py, test_special.py); here:
what choosing a core means, and what the reference core does not load.
"""

from __future__ import annotations

import doctest
import pickle
import subprocess
import sys

import pytest

import tokenizer.core
import tokenizer.fast.core
from conftest import REPO, corpus_text
from tokenizer import Encoding, get_encoding


def test_doctests():
    for module in (tokenizer.core, tokenizer.fast.core):
        result = doctest.testmod(module)
        assert result.failed == 0 and (module is tokenizer.fast.core or result.attempted > 0)


def test_the_reference_core_loads_neither_numpy_nor_the_fast_tier():
    # A fresh process: anything imported by get_encoding or by encoding shows in sys.modules.
    script = (
        "import sys, tokenizer\n"
        "enc = tokenizer.get_encoding('cl100k_base', core='reference')\n"
        "text = 'hello world <|endoftext|> 中文字符 ' * 2000\n"
        "assert enc.decode(enc.encode(text, allowed_special='all')) == text\n"
        "enc.encode_batch(['a b', 'c'] * 100)\n"
        "loaded = [m for m in sys.modules if m == 'numpy' or m.startswith(('numpy.', 'tokenizer.fast'))]\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_fast_core_is_the_default_and_each_core_is_its_own_shared_encoding():
    fast, reference = get_encoding("gpt2"), get_encoding("gpt2", core="reference")
    assert isinstance(fast.core, tokenizer.fast.core.FastCore)
    assert isinstance(reference.core, tokenizer.core.ReferenceCore)
    assert get_encoding("gpt2", core="reference") is reference and get_encoding("gpt2", core="fast") is fast
    text = corpus_text("de_manpages.txt", 50_000)
    assert reference.encode(text) == fast.encode(text)


def test_a_core_survives_pickling():
    for core in ("fast", "reference"):
        registered = pickle.loads(pickle.dumps(get_encoding("gpt2", core=core)))
        assert registered.core_name == core and registered is get_encoding("gpt2", core=core)
        vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab"}
        made = Encoding.from_vocab_merges(vocab, [(b"a", b"b")], core=core)
        copy = pickle.loads(pickle.dumps(made))
        assert copy.core_name == core and copy.encode("abc") == made.encode("abc") == [256, 99]


def test_an_unknown_core_is_a_clear_error():
    with pytest.raises(ValueError, match="core must be one of 'fast', 'reference', got 'quick'"):
        get_encoding("gpt2", core="quick")
    with pytest.raises(ValueError, match="core must be one of"):
        Encoding("x", pat_str=r"\w+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={},
                 core="quick")


@pytest.mark.parametrize("whole_piece_tokens", [True, False])
def test_both_rules_of_whole_pieces_in_both_cores(whole_piece_tokens):
    vocab = {i: bytes([i]) for i in range(256)} | {256: b"ab", 257: b"abc"}  # no merge makes "abc"
    encodings = [Encoding.from_vocab_merges(vocab, [(b"a", b"b")], whole_piece_tokens=whole_piece_tokens, core=core)
                 for core in ("fast", "reference")]
    expected = [257] if whole_piece_tokens else [256, 99]
    assert [enc.encode("abc") for enc in encodings] == [expected, expected]


def test_a_lone_surrogate_is_u_fffd_in_both_cores():
    for core in ("fast", "reference"):
        enc = get_encoding("cl100k_base", core=core)
        assert enc.encode("a\ud800b") == enc.encode("a\ufffdb")


@pytest.mark.parametrize(
    "name, corpus, keeps_cutting",
    [
        ("gpt2", "zh_manpages.txt", True),
        ("gpt2", "de_manpages.txt", True),
        ("cl100k_base", "zh_manpages.txt", False),
        ("o200k_base", "zh_manpages.txt", False),
    ],
)
def test_the_fast_core_keeps_cutting_long_pieces_only_where_it_pays(name, corpus, keeps_cutting):
    # gpt2 knows few Chinese tokens: nearly every long Chinese piece falls apart where no merge can cross, into
    # single characters, and the cached parts pay; its German pieces fall into short, mostly ASCII words, which
    # repeat too. cl100k_base cuts Chinese into parts of two characters or more, which repeat less; o200k_base
    # knows Chinese well: few of its pieces fall apart. After their trial, the fast core starts those pieces whole
    # from their characters (characters_first.py). Every way, the ids are the reference core's and tiktoken's,
    # before and after the decision.
    import tiktoken

    text = corpus_text(corpus, 200_000 if corpus.startswith("de") else 60_000)
    messages = [text[at : at + 300] for at in range(0, len(text), 300)]
    fast = Encoding(name, pat_str=get_encoding(name).pat_str, mergeable_ranks=dict(get_encoding(name).token_ids),
                    special_tokens={})
    ours = [fast.encode_ordinary(message) for message in messages]
    trial = tokenizer.fast.core.UNCROSSABLE_TRIAL
    assert fast.core._cutting_trial.pieces == trial and (fast.core._uncrossable is not False) == keeps_cutting
    oracle = tiktoken.get_encoding(name)
    assert ours == [oracle.encode_ordinary(message) for message in messages]
    assert ours == get_encoding(name, core="reference").encode_ordinary_batch(messages)


def test_a_mid_size_text_whose_pieces_the_cache_holds_skips_the_array_path():
    # A conversation encoded again at every turn: once its messages have been encoded, the whole (over
    # ARRAY_MIN_CHARS) goes through the piece cache, and the array path's tables are never loaded; on a new
    # Encoding the same text takes the array path. Both give tiktoken's ids; so do the messages joined by a
    # special token, and in one batch.
    import tiktoken

    text = corpus_text("en_docs.txt", 100_000).replace("<|endoftext|>", "")
    messages = [text[at : at + 1500] for at in range(0, 45_000, 1500)]
    conversation = "\n".join(messages)
    assert tokenizer.fast.core.ARRAY_MIN_CHARS <= len(conversation) < tokenizer.fast.core.CACHE_PATH_MAX_CHARS
    expected = tiktoken.get_encoding("cl100k_base").encode(conversation)

    def fresh() -> Encoding:
        enc = get_encoding("cl100k_base")
        return Encoding("copy", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens={})

    cold = fresh()
    assert cold.encode(conversation) == expected and cold.core._pair_table is not None
    warm = fresh()
    for message in messages:
        warm.encode(message)
    assert warm.encode(conversation) == expected and warm.core._pair_table is None
    # the same for the messages joined by a special token, and for all of them in one batch
    oracle = tiktoken.get_encoding("cl100k_base")
    joined = "<|endoftext|>".join(messages)
    special = Encoding("copy", pat_str=warm.pat_str, mergeable_ranks=dict(warm.token_ids),
                       special_tokens={"<|endoftext|>": 100257})
    for message in messages:
        special.encode(message)
    assert special.encode(joined, allowed_special="all") == oracle.encode(joined, allowed_special="all")
    assert special.encode_ordinary_batch(messages) == oracle.encode_ordinary_batch(messages)
    assert special.core._pair_table is None
    cold = fresh()
    assert cold.encode_ordinary_batch(messages) == oracle.encode_ordinary_batch(messages)
    assert cold.core._pair_table is not None


@pytest.mark.parametrize("name", ["gpt2", "o200k_base"])
def test_a_short_call_of_several_texts_takes_the_one_pass_of_a_short_text(name, monkeypatch):
    # a chat message between special tokens, or a small batch, as short together as one short text: each text in
    # one pass over its pieces (a new piece encoded on the spot), not the collect-then-fill of long calls; the
    # ids of tiktoken and of the reference core
    import tiktoken

    enc = get_encoding(name)
    oracle, reference = tiktoken.get_encoding(name), get_encoding(name, core="reference")
    fresh = Encoding("copy", pat_str=enc.pat_str, mergeable_ranks=dict(enc.token_ids), special_tokens=enc.special_tokens)
    monkeypatch.setattr(fresh.core, "_add_missing", lambda pieces: pytest.fail("a short call collected its pieces"))
    text = corpus_text("de_manpages.txt", 200_000)
    turns = [text[at : at + 700] for at in range(0, 7000, 700)]
    assert sum(map(len, turns)) < min(tokenizer.fast.core.ARRAY_MIN_CHARS, tokenizer.fast.core.BATCH_MIN_CHARS)
    chat = "".join(f"<|endoftext|>user\n{turn}" for turn in turns[:3]) + "<|endoftext|>"
    assert fresh.encode(chat, allowed_special="all") == oracle.encode(chat, allowed_special="all")
    assert fresh.encode_ordinary_batch(turns) == oracle.encode_ordinary_batch(turns)
    assert fresh.encode_ordinary_batch(turns) == reference.encode_ordinary_batch(turns)
    assert fresh.encode_ordinary_batch(["", turns[0], ""]) == [[], oracle.encode_ordinary(turns[0]), []]
