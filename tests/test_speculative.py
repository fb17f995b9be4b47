"""Speculative decoding (gpt2_numpy/speculative.py): the tokens of plain decoding, fewer passes.

Greedy: the tokens equal kvcache.generate's, for models of several shapes, drafted by the model itself (every
draft kept), by a model of another shape (nearly none kept), by a slightly perturbed copy (some kept) and by
prompt lookup. Sampling: the accept/reject rule gives the model's distribution, checked by a chi-square bound
on fixed seeds (so the test cannot flake) that a wrong rule fails, here, beside the right one.
"""
import doctest
import math

import numpy as np
import pytest

from gpt2_numpy import cli, kvcache, model, speculative
from gpt2_numpy.speculative import Counts, DraftModel, PromptLookup
from test_gpt2 import ByteEncoder, fake_model, params, random_params, run_main  # noqa: F401 (fixtures)

PROMPT = [464, 3290, 286, 257, 1110, 318, 257, 3290, 286]  # a repeated bigram: something for the lookup to find
SHAPES = {  # name: (n_embd, n_head, n_layer), as the tests build them
    "tiny": (16, 2, 2),  # tests/tiny_checkpoint.py's
    "small": (64, 4, 2),  # test_gpt2.py's
    "wider": (128, 4, 3),
}


N_VOCAB = 4096  # GPT-2's 50257 makes the output head most of a tiny model's time; one test keeps it


def shaped(name, seed=0, n_vocab=N_VOCAB):
    n_embd, n_head, n_layer = SHAPES[name]
    return random_params(seed=seed, n_vocab=n_vocab, n_embd=n_embd, n_layer=n_layer), n_head


def perturbed(weights, scale, seed=7):
    """The params plus a little noise: a draft that agrees with the model often, not always."""
    rng = np.random.default_rng(seed)
    if isinstance(weights, dict):
        return {key: perturbed(value, scale, seed + i) for i, (key, value) in enumerate(weights.items())}
    if isinstance(weights, list):
        return [perturbed(value, scale, seed + i) for i, value in enumerate(weights)]
    return (weights + rng.standard_normal(weights.shape) * scale).astype(np.float32)


# ------------------------------------------------------------------------------ greedy
DRAFTS = ["itself", "other shape", "perturbed", "lookup 1", "lookup 3"]


def make_draft(kind, weights, n_head):
    if kind == "itself":
        return DraftModel(weights, n_head)
    if kind == "other shape":
        return DraftModel(*shaped("tiny", seed=5))
    if kind == "perturbed":
        return DraftModel(perturbed(weights, 0.05), n_head)
    return PromptLookup(int(kind.split()[1]))


# the everyday tier takes the two smaller shapes (and test_greedy_equals_plain_greedy_with_gpt2s_vocabulary)
@pytest.mark.parametrize("size", ["tiny", "small", pytest.param("wider", marks=pytest.mark.exhaustive)])
@pytest.mark.parametrize("kind", DRAFTS)
def test_greedy_equals_plain_greedy(size, kind):
    weights, n_head = shaped(size)
    plain = kvcache.generate(PROMPT, weights, n_head, 24)
    for k in (1, 3, 8):
        counts = Counts()
        drafted = speculative.generate(PROMPT, weights, n_head, 24, make_draft(kind, weights, n_head),
                                       draft_tokens=k, counts=counts)
        assert drafted == plain, (size, kind, k)
        if kind == "itself":  # every draft kept: 24 tokens in 1 + ceil(23 / (k + 1)) passes
            assert counts.accepted == counts.drafted and counts.passes == math.ceil(23 / (k + 1))
        if kind == "perturbed" and k == 3:  # the path where some drafts are kept and some not
            assert 0 < counts.accepted < counts.drafted, counts


def test_greedy_equals_plain_greedy_with_gpt2s_vocabulary():
    weights, n_head = shaped("small", n_vocab=50257)
    plain = kvcache.generate(PROMPT, weights, n_head, 16)
    for draft in (DraftModel(weights, n_head), DraftModel(*shaped("tiny", seed=5, n_vocab=50257)), PromptLookup(2)):
        assert speculative.generate(PROMPT, weights, n_head, 16, draft, draft_tokens=5) == plain


@pytest.mark.exhaustive
def test_greedy_equals_plain_greedy_at_124m_shape():
    rng = np.random.default_rng(0)
    target = random_params(n_embd=768, n_layer=3, n_ctx=128, scale=0.05)  # 124M's widths; fewer blocks
    draft = DraftModel(*shaped("wider", n_vocab=50257))
    plain = kvcache.generate(PROMPT, target, 12, 24)
    for draft in (draft, DraftModel(target, 12), PromptLookup(2)):
        k = int(rng.integers(2, 8))
        assert speculative.generate(PROMPT, target, 12, 24, draft, draft_tokens=k) == plain


def test_the_modules_examples_run():
    assert doctest.testmod(speculative).failed == 0


def test_lookup_finds_the_latest_earlier_occurrence():
    assert speculative.lookup([1, 2, 3, 1, 2, 4, 1, 2], n=2, k=5) == [4, 1, 2]  # the latest of two
    assert speculative.lookup([1, 2, 3, 1, 2, 4, 1, 2], n=3, k=5) == []
    assert speculative.lookup([7, 8, 7], n=1, k=4) == [8, 7]  # may run into the n-gram itself
    assert speculative.lookup([7, 7, 7], n=1, k=4) == [7]  # the latest: right before the last
    assert speculative.lookup([1, 2], n=2, k=4) == [] and speculative.lookup([1, 2, 1], n=1, k=0) == []


def test_extend_and_rollback_give_the_full_recomputes_logits():
    weights, n_head = shaped("small")
    decoder = kvcache.KVDecoder([PROMPT], weights, n_head, 8)
    decoder.prefill()
    first = decoder.extend([[5, 6, 7]])[0]  # [3, n_vocab]
    decoder.rollback(2)  # keeps 5
    second = decoder.extend([[8, 9]])[0]
    full = model.gpt2(PROMPT + [5, 8, 9], **weights, n_head=n_head)
    np.testing.assert_allclose(first, model.gpt2(PROMPT + [5, 6, 7], **weights, n_head=n_head)[-3:], atol=2e-5)
    np.testing.assert_allclose(second, full[-2:], atol=2e-5, rtol=0)
    with pytest.raises(ValueError, match="can roll back 0 to 3 generated positions, not 4"):
        decoder.rollback(4)  # the prompt stays
    with pytest.raises(ValueError, match="KV cache holds 5 more positions, not 6"):
        decoder.extend([[1] * 6])


def test_a_batch_or_a_draft_of_another_vocabulary_is_refused():
    weights, n_head = shaped("tiny")
    with pytest.raises(ValueError, match="runs one prompt .* not a batch"):
        speculative.generate([[1, 2], [3, 4]], weights, n_head, 4, PromptLookup(1))
    with pytest.raises(ValueError, match="runs one prompt"):
        speculative.generate([[1, 2], [3]], weights, n_head, 4, PromptLookup(1))
    small_vocab = random_params(n_vocab=100, n_embd=16, n_layer=1)
    with pytest.raises(ValueError, match=f"the draft model has 100 tokens and the model {N_VOCAB}"):
        speculative.generate(PROMPT, weights, n_head, 4, DraftModel(small_vocab, 2))
    for k in (0, 1.5):
        with pytest.raises(ValueError, match="draft_tokens must be a whole number >= 1"):
            speculative.generate(PROMPT, weights, n_head, 4, PromptLookup(1), draft_tokens=k)
    with pytest.raises(ValueError, match="n-gram length must be a whole number >= 1"):
        PromptLookup(0)


@pytest.mark.parametrize("draft_n_ctx", [12, 10, 9, 5])  # past the prompt's 9 tokens, at the very end, inside it
def test_a_draft_with_a_shorter_context_drafts_while_it_fits_then_the_model_goes_on_alone(draft_n_ctx):
    weights, n_head = shaped("tiny")
    plain = kvcache.generate(PROMPT, weights, n_head, 16)  # positions up to 25, past every draft's context
    short = {**weights, "wpe": weights["wpe"][:draft_n_ctx]}  # the model itself, cut short: it drafts right
    for k in (1, 3):
        counts = Counts()
        assert speculative.generate(PROMPT, weights, n_head, 16, DraftModel(short, n_head), draft_tokens=k,
                                    counts=counts) == plain, (draft_n_ctx, k)
        # it drafts (every draft kept) while its context holds the positions, the tokens it predicts at most up
        # to its last position's, and none after
        n_fits = draft_n_ctx - len(PROMPT)
        assert (0 < counts.drafted <= n_fits if n_fits > 0 else counts.drafted == 0), (draft_n_ctx, k, counts)
        assert counts.accepted == counts.drafted


def test_stop_at_eot_and_zero_tokens():
    weights, n_head = shaped("tiny")
    plain = kvcache.generate(PROMPT, weights, n_head, 12)
    stopper = plain[5]  # stop at a token of the output, as if it were <|endoftext|>
    cut = plain[: plain.index(stopper)]
    original = speculative.EOT_ID
    try:
        speculative.EOT_ID = stopper
        assert speculative.generate(PROMPT, weights, n_head, 12, DraftModel(weights, n_head), stop_at_eot=True) == cut
    finally:
        speculative.EOT_ID = original
    assert speculative.generate(PROMPT, weights, n_head, 0, DraftModel(weights, n_head)) == []


# ------------------------------------------------------------------------------ sampling: the rule
def chi_square(counts, probs):
    """Pearson's statistic of counts against probs, and its degrees of freedom. Cells expected fewer than 5
    times are pooled into one (the chi-square approximation's rule of thumb); a count where probs is 0 is
    impossible, so it makes the statistic infinite."""
    counts, probs = np.asarray(counts, float).ravel(), np.asarray(probs, float).ravel()
    if counts[probs == 0].any():
        return math.inf, 1
    expected = probs * counts.sum()
    small = expected < 5
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    observed, expected = observed[keep], expected[keep]
    return float(((observed - expected) ** 2 / expected).sum()), len(observed) - 1


def chi_square_bound(df):
    """The chi-square value with df degrees of freedom that chance exceeds once in a million (Wilson and
    Hilferty's approximation; z = 4.753 is the normal's one-in-a-million upper quantile)."""
    return df * (1 - 2 / (9 * df) + 4.753 * math.sqrt(2 / (9 * df))) ** 3


def assert_distributed_as(counts, probs):
    statistic, df = chi_square(counts, probs)
    assert statistic < chi_square_bound(df), (statistic, df, chi_square_bound(df))


# p at three positions, and the draft's q at the first two; q puts weight where p has none and p where q has none
P = np.array([[0.5, 0.2, 0.15, 0.1, 0.05, 0.0], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3], [0.3, 0.0, 0.3, 0.1, 0.1, 0.2]])
Q = np.array([[0.1, 0.4, 0.05, 0.05, 0.2, 0.2], [0.0, 0.1, 0.3, 0.3, 0.2, 0.1]])


def rule_counts(rule, n):
    """How often each token comes out first, second (when the first draft was kept) and third (both kept), over
    n rounds of a rule on P and Q, drafts drawn from Q: each should be distributed as P's row."""
    rng = np.random.default_rng(0)
    counts = np.zeros_like(P)
    tokens = np.arange(P.shape[1])
    for _ in range(n):
        drafted = [speculative.draw(tokens, q, rng) for q in Q]
        for position, token in enumerate(rule(drafted, list(Q), lambda i: P[i], rng)):
            counts[position, token] += 1
    return counts


def residual_from_p(drafted, draft_dists, target_dist, rng):
    """A wrong rule: a rejected draft is replaced by a draw from p itself, not from max(0, p - q)."""
    for i, (x, q) in enumerate(zip(drafted, draft_dists)):
        p = target_dist(i)
        if rng.random() * (1.0 if q is None else q[x]) >= p[x]:
            return [*drafted[:i], speculative.draw(np.arange(len(p)), p, rng)]
    return [*drafted, speculative.draw(np.arange(P.shape[1]), target_dist(len(drafted)), rng)]


def test_the_accept_reject_rule_gives_the_models_distribution_and_a_wrong_rule_does_not():
    counts = rule_counts(speculative.accepted_sampled, n=12_000)
    for position in range(3):  # first token; second, given the first draft kept; third, given both kept
        assert_distributed_as(counts[position], P[position])
    assert counts[2].sum() > 1000  # the all-kept path (and its extra token) ran often enough to be checked
    wrong = rule_counts(residual_from_p, n=6000)
    statistic, df = chi_square(wrong[0], P[0])
    assert statistic > 10 * chi_square_bound(df)  # the bound is one a wrong rule fails by far


def test_a_certain_draft_is_kept_with_the_models_probability():
    rng = np.random.default_rng(1)
    counts = np.zeros((3, P.shape[1]))
    for _ in range(10_000):  # a lookup's drafts: q one-hot, written None
        for position, token in enumerate(speculative.accepted_sampled([0, 4], [None, None], lambda i: P[i], rng)):
            counts[position, token] += 1
    assert_distributed_as(counts[0], P[0])
    assert_distributed_as(counts[1], P[1])


# ------------------------------------------------------------------------------ sampling: end to end
V = 4  # a tiny vocabulary: the first three tokens have 64 outcomes, each seen often
TINY = random_params(n_vocab=V, n_embd=8, n_layer=1, n_ctx=16, scale=0.5)
FILTERS = {"plain": dict(temperature=1.0), "filtered": dict(temperature=0.8, top_k=3, top_p=0.9)}


def exact_first_tokens(weights, n_head, prompt, options, n=3):
    """P(t1, ..., tn) after prompt, from the full recompute's filtered distributions: [V] * n."""
    joint = np.zeros((V,) * n)
    for outcome in np.ndindex(*joint.shape):
        probability = 1.0
        for i, token in enumerate(outcome):
            logits = model.gpt2(prompt + list(outcome[:i]), **weights, n_head=n_head)[-1]
            probability *= speculative.dense_distribution(logits, **{"top_k": None, "top_p": None, **options})[token]
        joint[outcome] = probability
    return joint


def first_tokens_counts(make, options, runs, prompt=(1, 2, 1)):
    """Counts of the first three tokens over `runs` seeds, four tokens generated with k = 2 (so the first pass
    after the prompt's verifies two drafted tokens)."""
    weights = kvcache.DecodingWeights(TINY)
    counts = np.zeros((V,) * 3)
    for seed in range(runs):
        tokens = speculative.generate(list(prompt), weights, 2, 4, make(), draft_tokens=2, seed=seed, **options)
        counts[tuple(tokens[:3])] += 1
    return counts


DRAFTERS = {"model": lambda: DraftModel(kvcache.DecodingWeights(perturbed(TINY, 0.6)), 2),
            "lookup": lambda: PromptLookup(1)}


def assert_sampled_as_the_model(drafter, filters, runs):
    options = FILTERS[filters]
    exact = exact_first_tokens(TINY, 2, [1, 2, 1], options)
    assert_distributed_as(first_tokens_counts(DRAFTERS[drafter], options, runs=runs), exact)


@pytest.mark.parametrize("drafter, filters", [("model", "filtered"), ("lookup", "plain")])  # all four: below
def test_sampled_tokens_have_the_models_distribution(drafter, filters):
    assert_sampled_as_the_model(drafter, filters, runs=600)


@pytest.mark.exhaustive
@pytest.mark.parametrize("drafter", DRAFTERS)
@pytest.mark.parametrize("filters", FILTERS)
def test_sampled_tokens_have_the_models_distribution_over_many_seeds(drafter, filters):
    assert_sampled_as_the_model(drafter, filters, runs=3000)  # 5x the everyday runs; a wrong rule fails at 600


@pytest.mark.exhaustive
@pytest.mark.parametrize("drafter", DRAFTERS)
def test_the_end_to_end_bound_fails_a_wrong_rule(drafter, monkeypatch):
    exact = exact_first_tokens(TINY, 2, [1, 2, 1], FILTERS["plain"])
    monkeypatch.setattr(speculative, "accepted_sampled", residual_from_p)
    statistic, df = chi_square(first_tokens_counts(DRAFTERS[drafter], FILTERS["plain"], runs=600), exact)
    assert statistic > chi_square_bound(df)


# ------------------------------------------------------------------------------ the gpt2 command
def test_the_command_with_a_draft_or_lookup_prints_plain_decodings_text(fake_model):
    plain = run_main(["hi hi hi", "--n_tokens_to_generate", "12"])
    assert plain[0] == 0 and len(plain[1]) > 1
    for options in (["--draft", "124M"], ["--lookup", "1", "--draft_tokens", "6"], ["--draft", "124M", "--stream"]):
        assert run_main(["hi hi hi", "--n_tokens_to_generate", "12", *options]) == plain
    assert fake_model.loads[-2:] == [("124M", fake_model.loads[-1][1])] * 2  # the model, then the draft
    ids = fake_model.encoder.encode("hi")
    sampled = speculative.generate(ids, fake_model.params, 4, 8, PromptLookup(2), draft_tokens=3, seed=5,
                                   temperature=0.9)
    argv = ["hi", "--n_tokens_to_generate", "8", "--lookup", "2", "--draft-tokens", "3", "--seed", "5",
            "--temperature", "0.9"]
    assert run_main(argv) == (0, fake_model.encoder.decode(sampled) + "\n", "")


@pytest.mark.parametrize("argv, named", [
    (["hi", "--lookup", "0"], "--lookup 0: expected the number of tokens to match, a whole number >= 1"),
    (["hi", "--lookup", "x"], "expected a whole number (digits 0-9), got 'x'"),
    (["hi", "--lookup", "2", "--draft_tokens", "0"], "--draft_tokens 0: expected a whole number >= 1"),
    (["hi", "--draft_tokens", "3"], "--draft_tokens goes with --draft or --lookup, which is not given: add "
                                    "--draft or --lookup, or drop --draft_tokens"),
    (["hi", "--draft", "124M", "--lookup", "2"], "--draft and --lookup are two ways to draft tokens; give one"),
    (["hi", "--draft", "no/such/folder"], "--draft 'no/such/folder' is neither a GPT-2 size"),
    (["--score", "f.txt", "--lookup", "2"], "--lookup goes with a PROMPT"),
    (["--serve", "--draft", "124M"], "--draft goes with a PROMPT"),
])
def test_bad_draft_options_are_one_line_and_exit_2_before_loading(fake_model, argv, named):
    status, out, err = run_main(argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and named in err, err
    assert fake_model.loads == []


def test_the_command_with_a_draft_of_a_shorter_context_prints_plain_decodings_text(fake_model, monkeypatch):
    plain = run_main(["hi hi hi", "--n_tokens_to_generate", "40"])  # positions up to 48
    short = {**fake_model.params, "wpe": fake_model.params["wpe"][:20]}

    def load(name, models_dir):
        return fake_model.encoder, {"n_head": 4, "n_ctx": 20 if name == "124M" else 64}, \
            short if name == "124M" else fake_model.params

    monkeypatch.setattr(cli, "load_encoder_hparams_and_params", load)
    assert plain[0] == 0 and run_main(["hi hi hi", "--n_tokens_to_generate", "40", "--model", "355M",
                                       "--draft", "124M"]) == plain


def test_a_draft_of_another_vocabulary_is_one_line_and_exit_2(fake_model, monkeypatch):
    other = ByteEncoder()
    other.decoder = {**other.decoder, 7: "x"}

    def load(name, models_dir):
        return (other if name == "355M" else fake_model.encoder), {"n_head": 4}, fake_model.params

    monkeypatch.setattr(cli, "load_encoder_hparams_and_params", load)
    status, out, err = run_main(["hi", "--draft", "355M"])
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "--draft 355M: its vocabulary differs from --model 124M's" in err
