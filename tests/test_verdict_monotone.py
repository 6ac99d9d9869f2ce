"""The verdicts are monotone in the effect size (issue 33): a larger loss
(or gain) in every round or launch never moves a verdict towards "no
change".  A seeded random sweep (hypothesis is not among the pinned
packages): random rounds of noise, each scaled by a grid of effects, and
the verdict's rank must never fall as the effect grows."""

import random

import pytest

from netbench.judgement import knobs as judging_knobs
from netbench.judgement import model
from netbench.judgement.curve import curve_span, losses
from netbench.judgement.model import Bound, Estimate, Reference, Replicate
from netbench.report import compare
from netbench.tuning import decision

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

KNOBS = judging_knobs.load()
#: effects from a 3x gain to a 5x loss, finest around no change
EFFECTS = sorted({round(0.33 + 0.01 * i, 2) for i in range(0, 100)}
                 | {round(1.3 + 0.1 * i, 1) for i in range(0, 38)})
#: a paired verdict on the tuned side's slowdowns, worst last
RANK = {model.PASS: 0, model.UNDECIDED: 1, model.INCONCLUSIVE: 1, model.FAIL: 2}


def noise(rng, n, spread):
    """n rounds' ratios of a side against itself: each round's load
    moving its ratio by up to `spread` times either way."""
    return [spread ** rng.uniform(-1, 1) for _ in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_the_paired_verdict_never_improves_as_the_loss_grows(seed):
    rng = random.Random(seed)
    n = rng.choice([4, 5, 7, 10, 15, 20])
    base = noise(rng, n, rng.choice([1.01, 1.1, 1.5, 3.0]))
    ranks = [RANK[model.judge_paired([k * r for r in base], KNOBS, 4, 20).verdict]
             for k in EFFECTS]
    assert ranks == sorted(ranks), (n, base)
    # a loss every round beyond the change that counts is a fail (with
    # enough rounds to decide), whatever the rounds' spread
    limit = 1 + KNOBS.min_change["paired"]
    k = 1.01 * limit / min(base)
    assert model.judge_paired([k * r for r in base], KNOBS, 4, 20).verdict == model.FAIL


@pytest.mark.parametrize("seed", range(40))
def test_a_verdict_against_another_sessions_figure_never_improves_with_the_loss(seed):
    """model.judge of kind "session", as `netbench compare` calls it: B's
    launches, each slower by the effect, against A's best figure."""
    rng = random.Random(seed)
    launches = rng.randint(1, 4)
    reference = Reference(Bound("upper", 10.0), kind="session")
    base = []
    for _ in range(launches):
        value = 10 * noise(rng, 1, 1.3)[0]
        width = value * rng.uniform(0, 0.2)
        base.append((value, value - width, value + width))
    ranks = []
    for k in EFFECTS:
        replicates = [Replicate(Estimate(k * v, k * lo, k * hi)) for v, lo, hi in base]
        ranks.append(RANK[model.judge(replicates, reference, KNOBS).verdict])
    assert ranks == sorted(ranks), base


SIZES = [1 << i for i in range(0, 24, 2)]


def sessions(values):
    """One side's sessions as decision.launch_values gives them: one case,
    one curve, {size: value} per session."""
    return [{"case": decision.Launches({}, {("mpi", "usec"): (
        "us", {size: [Estimate.point(v)] for size, v in per_size.items()})})}
        for per_size in values]


def tuning(rng, rounds, spread, effect, at):
    """(before, after) sessions of `rounds` rounds: every size's figure
    moved by the host's noise in each session, the sizes `at` slower after
    the tuning by `effect` to the power of a round's own 1-2.5 (a loss of
    2x is 2-5.7x, as a tuning's cost varies with the round's load): every
    round's loss grows with `effect`."""
    before, after = [], []
    for _ in range(rounds):
        load = noise(rng, 1, spread)[0]           # a round's sessions share its load
        power = rng.uniform(1, 2.5)
        before.append({s: 10.0 * s ** 0.5 * load * noise(rng, 1, spread)[0] for s in SIZES})
        after.append({s: 10.0 * s ** 0.5 * load * noise(rng, 1, spread)[0]
                      * (effect ** power if s in at else 1.0) for s in SIZES})
    return before, after


#: a tuning's outcome: gain kept, nothing, loss reverted
OUTCOME = {decision.BETTER: -1, decision.NO_CHANGE: 0, decision.TOO_NOISY: 0,
           decision.WORSE: 1}


@pytest.mark.parametrize("seed", range(25))
def test_the_tuning_decision_is_monotone_in_the_effect(seed):
    rng = random.Random(seed)
    rounds = rng.choice([4, 5, 6])
    spread = rng.choice([1.01, 1.05, 1.2, 1.6])
    first = rng.randrange(len(SIZES) - 2)
    at = set(SIZES[first:first + rng.randint(2, 6)])
    state = rng.getstate()
    outcomes = []
    for effect in EFFECTS[::3]:
        rng.setstate(state)                        # the same noise, a larger effect
        before, after = tuning(rng, rounds, spread, effect, at)
        decided = decision.decide(sessions(before), sessions(after), knobs=KNOBS)
        outcomes.append((effect, OUTCOME[decided.code], decided.code))
    ranks = [o for _, o, _ in outcomes]
    assert ranks == sorted(ranks), outcomes
    # an effect beyond every round's noise is never "no change" either way
    beyond = spread ** 2 * (1 + KNOBS.min_change["paired"]) * 1.01
    assert all(o == 1 for e, o, _ in outcomes if e > beyond), outcomes
    assert all(o == -1 for e, o, _ in outcomes if e < 1 / beyond), outcomes


def test_the_size_call_is_monotone_at_one_size():
    rng = random.Random(7)
    for _ in range(200):
        pairs = [(10.0, 10.0 * r) for r in noise(rng, rng.choice([4, 6, 9]), 1.5)]
        calls = [{compare.BETTER: -1, None: 0, compare.WORSE: 1}[
            decision.size_call([(b, a * k) for b, a in pairs], "us", KNOBS)] for k in EFFECTS]
        assert calls == sorted(calls), pairs


@pytest.mark.parametrize("seed", range(20))
def test_compares_call_never_improves_as_b_grows_slower(seed):
    """`netbench compare`'s call at one size (compare.judged: the model,
    kind session), B's launches slower by a growing effect: from better
    through within noise (or too few launches) to worse, never back."""
    rng = random.Random(seed)
    rank = {compare.BETTER: 0, compare.FEW_LAUNCHES_CALLS[compare.BETTER]: 1,
            compare.NOISE: 2, compare.FEW_LAUNCHES_CALLS[compare.WORSE]: 3, compare.WORSE: 4}

    def launches(n):
        found = []
        for _ in range(n):
            value = 10 * noise(rng, 1, 1.3)[0]
            found.append((value, value * rng.uniform(0.8, 1), value * rng.uniform(1, 1.2)))
        return found

    a = tuple(Estimate(*e) for e in launches(rng.randint(1, 4)))
    b = launches(rng.randint(1, 4))
    calls = [compare.judged(a, tuple(Estimate(k * v, k * lo, k * hi) for v, lo, hi in b),
                            "lower", knobs=KNOBS)[2] for k in EFFECTS]
    ranks = [rank[c] for c in calls]
    assert ranks == sorted(ranks), calls


@pytest.mark.parametrize("seed", range(10))
def test_a_curve_that_fails_still_fails_when_its_sizes_do_worse(seed):
    """judgement.curve.curve_span, which the tuning decision (and the
    baseline) call: raising any size's verdict (pass, then not decided,
    then fail) never takes a failing curve back, and the sizes the tuning
    counts (curve.losses) are there exactly when it fails."""
    rng = random.Random(seed)
    ladder = (model.PASS, model.INCONCLUSIVE, model.FAIL)
    for _ in range(300):
        verdicts = [rng.choice(ladder) for _ in range(rng.randint(1, 12))]
        span = rng.randint(1, 4)
        raised = [ladder[min(2, ladder.index(v) + (rng.random() < 0.3))] for v in verdicts]
        before, after = (curve_span(v, span)[0] for v in (verdicts, raised))
        assert before != model.FAIL or after == model.FAIL, (verdicts, raised, span)
        for v in (verdicts, raised):
            assert (curve_span(v, span)[0] == model.FAIL) == bool(
                losses(v, span)), (v, span)
