"""Special tokens: the allowed/disallowed matrix against tiktoken, its errors, and overlapping tokens."""

from __future__ import annotations

import doctest
import itertools
import pickle

import pytest
import tiktoken

import tokenizer.encoding
from tokenizer import Encoding, get_encoding, special_advice
from tokenizer.jobs.dataset import PieceEncoder
from tokenizer.special_advice import SpecialSpelling, SpecialTokenRefusal, refusal_of

TEXTS = [
    "",
    "hello <|endoftext|> world",
    "<|endoftext|><|endoftext|>",
    "<|fim_prefix|>a<|fim_middle|>b<|fim_suffix|>c<|endofprompt|>",
    "<|endoftext|x <|endof <|endoftext|",
    "no specials at all",
]
ALLOWED = [set(), "all", {"<|endoftext|>"}, {"<|fim_prefix|>", "<|endofprompt|>"}, {"not-a-special"}]
DISALLOWED = ["all", (), {"<|endoftext|>"}, {"<|endofprompt|>"}]


def outcome(enc, text, allowed, disallowed):
    try:
        return enc.encode(text, allowed_special=allowed, disallowed_special=disallowed)
    except ValueError:
        return "ValueError"


@pytest.mark.parametrize("core", ["fast", "reference"])
@pytest.mark.parametrize("name", ["gpt2", "p50k_edit", "cl100k_base", "o200k_base"])
def test_matrix_equals_tiktoken(name, core):
    ours, oracle = get_encoding(name, core=core), tiktoken.get_encoding(name)
    for text, allowed, disallowed in itertools.product(TEXTS, ALLOWED, DISALLOWED):
        assert outcome(ours, text, allowed, disallowed) == outcome(oracle, text, allowed, disallowed), (
            text, allowed, disallowed,
        )


def test_disallowed_error_says_what_to_pass():
    enc = get_encoding("gpt2")
    with pytest.raises(ValueError) as info:
        enc.encode("a <|endoftext|>")
    message = str(info.value)
    assert "<|endoftext|>" in message and "allowed_special" in message and "disallowed_special=()" in message


def test_a_token_both_allowed_and_named_disallowed_gets_advice_that_changes_an_argument():
    """allowed_special="all" with disallowed_special={token} was told to pass allowed_special={token} (or "all"),
    already passed, and to pass disallowed_special=() to encode it as plain text, which gives its id. The advice
    now names the argument still to change (tokenizer.special_advice), as the command line's does in its flags;
    tiktoken's advice, for the default disallowed_special="all", is kept word for word."""
    enc = get_encoding("gpt2")
    text = "a <|endoftext|>"
    refused = {"encode": lambda **rule: enc.encode(text, **rule),
               "encode_batch": lambda **rule: enc.encode_batch([text], **rule),
               "encode_to_numpy": lambda **rule: enc.encode_to_numpy(text, **rule),
               "encode_with_unstable": lambda **rule: enc.encode_with_unstable(text, **rule),
               "encode_iterable": lambda **rule: list(enc.encode_iterable([text], **rule))}
    advice = ("The text contains the special token '<|endoftext|>', which is disallowed. allowed_special allows it, "
              "but disallowed_special names it, which refuses it: to encode it as the special token, pass "
              "disallowed_special=() (or leave '<|endoftext|>' out of it); to encode it as plain text, leave it out "
              "of allowed_special as well (allowed_special=set()).")
    for name, call in refused.items():
        for allowed in ("all", {"<|endoftext|>"}):
            with pytest.raises(ValueError) as info:
                call(allowed_special=allowed, disallowed_special={"<|endoftext|>"})
            assert str(info.value) == advice, name
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == (
            "The text contains the special token '<|endoftext|>', which is disallowed. To encode it as the special "
            "token, pass allowed_special={'<|endoftext|>'} (or \"all\"); to encode it as plain text, pass "
            "disallowed_special=() (or enc.special_tokens_set - {'<|endoftext|>'} to keep checking the others)."), name
    # the advice, followed, does what it says
    assert enc.encode(text, allowed_special="all", disallowed_special=()) == enc.encode(text, allowed_special="all")
    assert enc.encode(text, allowed_special=set(), disallowed_special=()) == enc.encode_ordinary(text)


@pytest.mark.parametrize("threads_in_parallel", [False, True])
def test_a_token_named_disallowed_and_not_allowed_gets_advice_that_changes_both(monkeypatch, threads_in_parallel):
    """disallowed_special={token} with nothing allowed was told tiktoken's default advice: to pass allowed_special
    alone (which still raises: the token stays named) to get its id. The advice says both are to change, by every
    method (encode_batch's threads too: True runs the pool a free-threaded Python uses)."""
    monkeypatch.setattr(tokenizer.encoding, "THREADS_RUN_IN_PARALLEL", threads_in_parallel)
    enc = get_encoding("gpt2")
    text = "a <|endoftext|>"
    advice = ("The text contains the special token '<|endoftext|>', which is disallowed. disallowed_special names "
              "it, which refuses it whatever allowed_special says: to encode it as plain text, pass "
              "disallowed_special=() (or leave '<|endoftext|>' out of it); to encode it as the special token, leave "
              "it out of disallowed_special and pass allowed_special={'<|endoftext|>'} (or \"all\") as well.")
    refused = {"encode": lambda **rule: enc.encode(text, **rule),
               "encode_batch": lambda **rule: enc.encode_batch(["b", text], **rule),
               "encode_to_numpy": lambda **rule: enc.encode_to_numpy(text, **rule),
               "encode_with_unstable": lambda **rule: enc.encode_with_unstable(text, **rule),
               "encode_iterable": lambda **rule: list(enc.encode_iterable(["a <|endof", "text|>"], **rule))}
    for name, call in refused.items():
        for named in ({"<|endoftext|>"}, ["<|endoftext|>"], iter(["<|endoftext|>"]), enc.special_tokens_set):
            with pytest.raises(ValueError) as info:
                call(disallowed_special=named)
            assert str(info.value) == advice, (name, named)
        # allowed_special alone, as tiktoken's advice said, does not do it: the advice no longer says it does
        with pytest.raises(ValueError):
            call(allowed_special="all", disallowed_special={"<|endoftext|>"})
    # the advice, followed, does what it says
    assert enc.encode(text, disallowed_special=()) == enc.encode_ordinary(text)
    assert enc.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=()) == [64, 220, 50256]


def test_text_named_disallowed_that_is_no_special_token_gets_advice_that_can_work():
    # tiktoken refuses any text disallowed_special names, special token or not; the advice said to pass
    # allowed_special to "encode it as the special token", which gpt2 has no such token to do
    enc = get_encoding("gpt2")
    text = "a <|endofprompt|>"
    for rule in ({}, {"allowed_special": "all"}, {"allowed_special": {"<|endofprompt|>"}}):
        with pytest.raises(ValueError) as info:
            enc.encode_batch([text], disallowed_special={"<|endofprompt|>"}, **rule)
        assert str(info.value) == (
            "The text contains '<|endofprompt|>', which is disallowed: disallowed_special names it, though it is no "
            "special token of gpt2. To encode it as plain text, the one way it can be encoded, pass "
            "disallowed_special=() (or leave '<|endofprompt|>' out of it).")
        assert enc.encode(text, disallowed_special=(), **rule) == enc.encode_ordinary(text)  # followed, it works


def test_a_refusal_keeps_its_facts_so_that_each_caller_can_say_it_in_its_own_words():
    """The advice's meaning is kept once, in the refusal the ValueError holds: which option names the token and
    whether it is allowed. A command line rewords it in its flags (a SpecialSpelling) without reading the message,
    also once a file's name is put before it, and after it crossed from a worker process."""
    assert doctest.testmod(special_advice).failed == 0
    enc = get_encoding("gpt2")
    with pytest.raises(ValueError) as info:
        PieceEncoder(enc, "data.txt", set(), {"<|endoftext|>"}).text_ids("a <|endoftext|>")
    error = pickle.loads(pickle.dumps(info.value))  # what a worker process sends back
    assert type(error) is ValueError and str(error) == str(info.value)  # tiktoken's type, the message as was
    assert refusal_of(error) == SpecialTokenRefusal("<|endoftext|>", allowed=False, named=True, place="data.txt: ",
                                                    encoding="gpt2")
    assert str(error).startswith("data.txt: The text contains the special token '<|endoftext|>', which is "
                                 "disallowed. disallowed_special names it")
    spelling = SpecialSpelling(allowed="[A]", disallowed="[D]", allow_it="[A {token}]", allow_none="[A none]",
                               refuse_none="[D none]", refuse_all_but_it="")
    assert refusal_of(error).advice(spelling) == (
        "data.txt: The text contains the special token '<|endoftext|>', which is disallowed. [D] names it, which "
        "refuses it whatever [A] says: to encode it as plain text, pass [D none] (or leave '<|endoftext|>' out of "
        "it); to encode it as the special token, leave it out of [D] and pass [A '<|endoftext|>'] as well.")
    # a caller that names the place in its own ValueError (from None keeps the refusal as its context)
    try:
        try:
            enc.encode("<|endoftext|>")
        except ValueError as e:
            raise ValueError(f"line 3: {e}") from None
    except ValueError as e:
        assert refusal_of(e) == SpecialTokenRefusal("<|endoftext|>", place="line 3: ", encoding="gpt2")
        assert refusal_of(e).advice(spelling) == (
            "line 3: The text contains the special token '<|endoftext|>', which is disallowed. To encode it as the "
            "special token, pass [A '<|endoftext|>']; to encode it as plain text, pass [D none].")
    assert refusal_of(ValueError("which is disallowed.")) is None


def test_allowed_special_all_gives_ids():
    enc = get_encoding("cl100k_base")
    assert enc.encode("<|endoftext|><|endofprompt|>", allowed_special="all") == [100257, 100276]


def test_bad_option_types_are_clear_errors():
    enc = get_encoding("gpt2")
    with pytest.raises(TypeError, match="allowed_special"):
        enc.encode("x", allowed_special="<|endoftext|>")
    with pytest.raises(TypeError, match="disallowed_special"):
        enc.encode("x", disallowed_special="none")


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_disallowed_special_none_checks_nothing_as_in_tiktoken(name):
    ours, theirs = get_encoding(name), tiktoken.get_encoding(name)
    text = "a<|endoftext|>b<|endofprompt|>"
    want = theirs.encode(text, disallowed_special=None)
    assert want == theirs.encode(text, disallowed_special=())  # tiktoken: special tokens as plain text
    assert ours.encode(text, disallowed_special=None) == want
    assert ours.encode_to_numpy(text, disallowed_special=None).tolist() == want
    assert ours.encode(text, allowed_special="all", disallowed_special=None) == theirs.encode(
        text, allowed_special="all", disallowed_special=None)


def test_overlapping_specials_longest_first():
    # bytes only, no merges: only the special-token splitting is under test
    specials = ["<|endoftext|>", "<|endoftext|><|endoftext|>"]
    enc = Encoding.from_vocab_merges({i: bytes([i]) for i in range(256)}, [], specials)
    double, single = enc.encode_single_token("<|endoftext|><|endoftext|>"), enc.encode_single_token("<|endoftext|>")
    assert double != single
    text = "a<|endoftext|><|endoftext|><|endoftext|>b"
    ids = enc.encode(text, allowed_special="all")
    assert ids == [ord("a"), double, single, ord("b")]
    assert enc.decode(ids) == text
    # only the short one allowed: the long one is not matched, and the text is split into two singles
    ids = enc.encode("<|endoftext|><|endoftext|>", allowed_special={"<|endoftext|>"}, disallowed_special=())
    assert ids == [single, single]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base", "o200k_harmony"])
def test_the_default_call_answers_as_the_general_path(name):
    # encode(text) with its defaults takes the sets special_token_sets made once; the same refusal or ids as the
    # same sets given explicitly (built at the call), with many special tokens (harmony) or few
    enc = get_encoding(name)
    every = frozenset(enc.special_tokens_set)
    texts = ["hello world", "", "a <|endoftext|> b", "<|endoftext", *sorted(every)[:12], "x" + sorted(every)[-1]]
    for text in texts:
        assert outcome(enc, text, set(), "all") == outcome(enc, text, frozenset(), every)
        # and allowed_special="all", whose sets are made once too
        assert outcome(enc, text, "all", "all") == outcome(enc, text, every, frozenset())
    assert enc.special_token_sets(allowed_special="all") == (every, frozenset())
    assert enc.encode("hello world") == tiktoken.get_encoding(name).encode("hello world")
