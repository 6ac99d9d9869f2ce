"""The learned baseline's band and the per-size curve verdict
(netbench/judgement/baseline/) on known figures: the band is never
narrower than the case's pooled run-to-run noise; a loss along the
curve spans judging.yaml's min_span neighbouring sizes (judgement/curve.py)."""

import json
from pathlib import Path

import pytest

from netbench.judgement import baseline, curve as curves
from netbench.judgement.model import FAIL, INCONCLUSIVE, PASS, UNDECIDED, Bound, Decision

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside


def test_the_noise_at_a_size_is_pooled_with_its_neighbours():
    sizes = [1, 2, 4, 8, 16, 32, 64]
    spreads = [3.0, 3.0, 3.0, 1.1, 1.1, 1.2, 1.1]  # a noisy latency regime, a quiet link
    runs = [{s: 10.0 for s in sizes}, {s: 10.0 * f for s, f in zip(sizes, spreads)},
            {s: 10.0 for s in sizes}]
    noise = baseline.pooled_noise(runs, sizes)
    assert noise[1] == 3.0 and noise[64] == 1.1
    # the median of five neighbours: a size's own lucky agreement does not
    # narrow its band, and the noisy regime does not widen the quiet one's
    assert noise[16] == 1.1 and noise[32] == 1.1
    assert noise[4] == 3.0


def test_a_band_is_never_narrower_than_the_pooled_noise():
    # three runs that happened to agree at this size
    tight = baseline.band([100.0, 100.5, 101.0], min_band=0.05, noise=1.2)
    assert tight["centre"] == 100.5 and tight["high"] == 101.0
    assert tight["upper"] == 100.5 * 1.2
    # nor than the slowest run, nor than min_band
    assert baseline.band([100.0, 100.0, 150.0], 0.05, 1.1)["upper"] == 150.0
    assert baseline.band([100.0, 100.0, 100.0], 0.05, 1.0)["upper"] == 105.0


MIN_SPAN = 2


def decision(verdict, value):
    return Decision(verdict, value, value, value, 2, {FAIL: "beyond", PASS: "within"}.get(
        verdict, "too_noisy"))


def curve(verdicts, min_span=MIN_SPAN):
    """size decisions and bounds of a curve at 1, 2, 4 ... bytes: a failed
    size at 2x its bound, a passed one at 0.9x, another at 1.02x."""
    sizes = {baseline.variable(1 << i): decision(v, {FAIL: 2.0, PASS: 0.9}.get(v, 1.02))
             for i, v in enumerate(verdicts)}
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    return baseline.combine(sizes, bounds, "test.yaml", min_span)


def test_one_size_failing_alone_decides_nothing():
    combined, sizes = curve([PASS, PASS, FAIL, PASS, PASS])
    assert combined.verdict == PASS and combined.code == "curve_within"
    assert sizes[2]["verdict"] == FAIL and sizes[2]["alone"]
    assert combined.numbers["aside"] == [4.0]


def test_neighbouring_failed_sizes_are_a_loss():
    combined, sizes = curve([PASS, PASS, FAIL, FAIL, FAIL])
    assert (combined.verdict, combined.code) == (FAIL, "curve_beyond")
    assert [n["bytes"] for n in combined.numbers["named"]] == [4.0, 8.0, 16.0]
    assert combined.value == 2.0
    # a lone failure beside a loss is set aside, the loss still fails
    combined, sizes = curve([FAIL, PASS, FAIL, FAIL, PASS])
    assert combined.verdict == FAIL and sizes[0].get("alone")


def test_the_span_is_a_knob():
    assert curve([PASS, FAIL, FAIL, PASS], min_span=3)[0].verdict == PASS
    assert curve([PASS, FAIL, PASS], min_span=1)[0].verdict == FAIL


def test_a_curve_shorter_than_the_span_is_held_to_every_size():
    combined, _ = curve([FAIL], min_span=2)
    assert combined.verdict == FAIL


def test_one_size_too_noisy_alone_between_passing_sizes_passes():
    combined, each = curve([PASS, PASS, INCONCLUSIVE, PASS, PASS])
    assert combined.verdict == PASS and each[2]["alone"]
    # two neighbouring sizes too noisy to tell: the curve cannot tell either
    combined, _ = curve([PASS, PASS, INCONCLUSIVE, INCONCLUSIVE, PASS])
    assert combined.verdict == INCONCLUSIVE and combined.code == "curve_inconclusive"
    # a failed size beside a noisy one: not a loss spanning two sizes
    assert curve([PASS, FAIL, INCONCLUSIVE, PASS])[0].verdict == INCONCLUSIVE


def test_failures_with_only_unknown_sizes_between_are_no_loss():
    """Sizes that could not be told are unknowns, not part of a loss: two
    failures apart, with inconclusive or undecided sizes between, leave
    the curve not decided; the same two failures side by side fail it."""
    combined, _ = curve([PASS, FAIL, INCONCLUSIVE, FAIL, PASS])
    assert (combined.verdict, combined.code) == (INCONCLUSIVE, "curve_inconclusive")
    assert curves.curve_span([FAIL] + [UNDECIDED] * 8 + [FAIL], 2)[0] == UNDECIDED
    assert curves.losses([FAIL, INCONCLUSIVE, FAIL, FAIL], 2) == [2, 3]
    assert curve([PASS, FAIL, FAIL, INCONCLUSIVE, FAIL])[0].verdict == FAIL


def test_an_undecided_run_keeps_the_curve_undecided():
    assert curves.curve_span([PASS, UNDECIDED, INCONCLUSIVE, PASS], 2)[0] == UNDECIDED


def test_the_conditions_of_the_deciding_sizes_are_named_once():
    busy = {"code": "cpu_pressure", "node": "n2", "now": 40.0, "then": 3.0}
    sizes = {baseline.variable(1 << i): Decision(INCONCLUSIVE, 2.0, 1.9, 2.1, 4,
                                                 "conditions_differ", {"conditions": [busy]})
             for i in range(3)}
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    combined, _ = baseline.combine(sizes, bounds, "test.yaml", MIN_SPAN)
    assert combined.verdict == INCONCLUSIVE and combined.numbers["conditions"] == [busy]


def test_a_size_the_run_never_sent_is_named_missing():
    sizes = {baseline.variable(1): decision(PASS, 0.9), baseline.variable(2): decision(PASS, 0.9),
             baseline.variable(4): Decision(INCONCLUSIVE, float("nan"), float("nan"),
                                            float("nan"), 0, "no_launch")}
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    combined, _ = baseline.combine(sizes, bounds, "test.yaml", MIN_SPAN)
    assert combined.verdict == PASS and combined.numbers["missing"] == [4.0]


def recorded_curves():
    """The per-size decisions of make bench-verdict's detection under load
    (tests/data/judgement/curves-1gbit-loaded.json says what they are)."""
    path = Path(__file__).parent / "data" / "judgement" / "curves-1gbit-loaded.json"
    return json.loads(path.read_text())["curves"]


def combined_verdict(curve):
    sizes = {baseline.variable(s["bytes"]): Decision(s["verdict"], s["value"], s["lo"], s["hi"],
                                                     s["launches"], "recorded")
             for s in curve["sizes"]}
    bounds = {baseline.variable(s["bytes"]): Bound("upper", s["upper"]) for s in curve["sizes"]}
    return baseline.combine(sizes, bounds, "vcluster-vbench-nodes.yaml", MIN_SPAN)[0]


def test_recorded_curves_of_a_link_20_percent_slower_under_load():
    """The acceptance corpus: each recorded curve decided by the span rule
    (the sizes' own verdicts as recorded, under the old allowances)."""
    curves_ = recorded_curves()
    verdicts = {label: combined_verdict(c).verdict for label, c in curves_.items()}
    assert {k: v for k, v in verdicts.items() if k.startswith("healthy")} == {
        "healthy-1": INCONCLUSIVE, "healthy-2": INCONCLUSIVE, "healthy-3": INCONCLUSIVE}
    assert all(v != PASS for k, v in verdicts.items() if k.startswith("slower")), verdicts


def test_judging_renders_no_sizes_in_words():
    """The judgement gives numbers and the report names them: a message
    size in words has one definition, report/reasons.py's, which also
    names the emulated link's unjudged baseline sizes (checks/judging.py)."""
    from netbench.report import reasons
    judgement = Path(baseline.__file__).parents[1]
    renderers = [str(p) for p in judgement.rglob("*.py") if "def size_words" in p.read_text()]
    assert renderers == [] and not hasattr(baseline, "size_words"), renderers
    assert reasons.size_words(4096) == "4 KiB"
