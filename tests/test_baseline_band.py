"""The learned baseline's band and the per-size curve verdict
(netbench/judgement/baseline.py) on known figures: the band is never
narrower than the case's pooled run-to-run noise; one size failing alone
is not a loss; a band learned under contention already holds it."""

import json
from pathlib import Path

from netbench.judgement import baseline
from netbench.judgement.rule import (FAIL, INCONCLUSIVE, PASS, Bound, Decision,
                                     allowing_for_contention, load_rule)


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


def decision(verdict, value):
    return Decision(verdict, value, value, value, 2, "")


def curve(verdicts):
    """size decisions and bounds of a curve at 1, 2, 4 ... bytes: a failed
    size at 2x its bound, a passed one at 0.9x."""
    sizes = {baseline.variable(1 << i): decision(v, 2.0 if v == FAIL else 0.9)
             for i, v in enumerate(verdicts)}
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    return baseline.combine(sizes, bounds, "test.yaml")


def test_one_size_failing_alone_is_inconclusive_not_a_loss():
    combined, sizes = curve([PASS, PASS, FAIL, PASS, PASS])
    assert combined.verdict == INCONCLUSIVE
    assert sizes[2]["verdict"] == INCONCLUSIVE and sizes[2]["isolated"]
    assert "4 B (slower alone" in combined.reason


def test_neighbouring_failed_sizes_are_a_loss():
    combined, sizes = curve([PASS, PASS, FAIL, FAIL, FAIL])
    assert combined.verdict == FAIL
    assert [s["verdict"] for s in sizes] == [PASS, PASS, FAIL, FAIL, FAIL]
    assert "4 B (2.00x" in combined.reason and "16 B" in combined.reason
    # an isolated failure beside a confirmed loss is not named as one
    combined, sizes = curve([FAIL, PASS, FAIL, FAIL, PASS])
    assert combined.verdict == FAIL and sizes[0]["verdict"] == INCONCLUSIVE


def test_a_curve_too_short_for_neighbours_fails_on_one_size():
    combined, _ = curve([PASS, FAIL])
    assert combined.verdict == FAIL


def test_a_band_learned_under_contention_already_holds_it():
    rule = load_rule()
    assert baseline.measured_under_contention({"cpu_pressure": 70.0}, rule)
    assert not baseline.measured_under_contention({"cpu_pressure": 3.0}, rule)
    assert not baseline.measured_under_contention({}, rule)
    assert not baseline.measured_under_contention(None, rule)
    records = [{"host": {"cpu_pressure": p}} for p in (60.0, 80.0)] + [{"host": {}}, {}]
    assert baseline.accepted_pressure(records) == 70.0
    assert baseline.accepted_pressure([{}]) is None


def straddling(value=1.02):
    """A size whose launches straddled its bound (1.0): inconclusive, its
    best launch's interval reaching within the band."""
    return Decision(INCONCLUSIVE, value, 0.97, 1.08, 4, "")


def test_one_size_too_noisy_alone_between_passing_sizes_passes():
    sizes = {baseline.variable(1 << i): decision(PASS, 0.9) for i in range(5)}
    sizes[baseline.variable(4)] = straddling()
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    combined, each = baseline.combine(sizes, bounds, "test.yaml")
    assert combined.verdict == PASS, combined
    assert each[2]["verdict"] == INCONCLUSIVE and each[2]["alone"]
    assert "at 4 of 5 sizes" in combined.reason and "4 B" in combined.reason
    # two neighbouring sizes too noisy to tell: the curve cannot tell either
    sizes[baseline.variable(8)] = straddling()
    combined, _ = baseline.combine(sizes, bounds, "test.yaml")
    assert combined.verdict == INCONCLUSIVE
    # a size that failed in every launch and was excused (its interval wholly
    # beyond the band) is no straddler: the curve stays inconclusive
    sizes[baseline.variable(8)] = decision(PASS, 0.9)
    sizes[baseline.variable(4)] = Decision(INCONCLUSIVE, 1.3, 1.25, 1.35, 4, "excused")
    combined, _ = baseline.combine(sizes, bounds, "test.yaml")
    assert combined.verdict == INCONCLUSIVE
    # nor is a failure alone, which is inconclusive already (unconfirmed)
    combined, _ = curve([PASS, PASS, FAIL, PASS, PASS])
    assert combined.verdict == INCONCLUSIVE


def test_a_neighbour_whose_every_launch_leaned_beyond_confirms_a_failed_size():
    sizes = {baseline.variable(1 << i): decision(PASS, 0.9) for i in range(5)}
    sizes[baseline.variable(4)] = decision(FAIL, 2.0)
    sizes[baseline.variable(8)] = straddling(1.02)      # every median beyond, one interval within
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    combined, each = baseline.combine(sizes, bounds, "test.yaml")
    assert combined.verdict == FAIL, combined
    assert "4 B (2.00x" in combined.reason
    assert "beside them every launch's median lay beyond the band at 8 B" in combined.reason
    # a neighbour whose best launch's median lay within the band confirms nothing
    sizes[baseline.variable(8)] = straddling(0.99)
    combined, each = baseline.combine(sizes, bounds, "test.yaml")
    assert combined.verdict == INCONCLUSIVE and each[2]["isolated"]
    # nor one that failed in every launch and was excused by the host's
    # contention or cores' mode: what excused it explains it
    sizes[baseline.variable(8)] = Decision(INCONCLUSIVE, 1.3, 1.25, 1.35, 4, "excused")
    combined, each = baseline.combine(sizes, bounds, "test.yaml", excused={baseline.variable(8)})
    assert combined.verdict == INCONCLUSIVE and each[2]["isolated"] and each[3]["excused"]


def test_a_leaning_neighbour_the_hosts_allowances_explain_confirms_nothing():
    """A neighbour that leaned beyond the band by no more than contention
    (or the cores' mode) excuses would be excused had it failed: it is
    contention's as much as the loss's, and the failed size stays alone."""
    rule = load_rule()
    sizes = {baseline.variable(1 << i): decision(PASS, 0.9) for i in range(5)}
    sizes[baseline.variable(4)] = decision(FAIL, 4.0)
    sizes[baseline.variable(8)] = straddling(1.3)
    bounds = {var: Bound("upper", 1.0) for var in sizes}
    busy = {"cpu_pressure": rule.contended_cpu_pressure + 10, "host_load": 3.0}
    quiet = {"cpu_pressure": 1.0, "host_load": 0.5}

    def allow_on(host):
        return lambda var, d, bound: allowing_for_contention(d, host, True, rule, bound)
    assert baseline.leaning_explained(sizes, bounds, allow_on(busy)) == [baseline.variable(8)]
    combined, each = baseline.combine(sizes, bounds, "test.yaml",
                                      excused=baseline.leaning_explained(sizes, bounds,
                                                                         allow_on(busy)))
    assert combined.verdict == INCONCLUSIVE and each[2]["isolated"], combined
    # on a quiet host nothing excuses it, and it confirms the failure
    assert baseline.leaning_explained(sizes, bounds, allow_on(quiet)) == []
    assert baseline.combine(sizes, bounds, "test.yaml")[0].verdict == FAIL
    # a lean beyond what contention explains still confirms (4.0x > contention_explains)
    sizes[baseline.variable(8)] = straddling(rule.contention_explains + 1)
    assert baseline.leaning_explained(sizes, bounds, allow_on(busy)) == []
    # a neighbour within the band is no lean, whatever the host
    sizes[baseline.variable(8)] = straddling(0.99)
    assert baseline.leaning_explained(sizes, bounds, allow_on(busy)) == []


def recorded_curves():
    """The per-size decisions of make bench-verdict's detection under load
    (tests/data/judgement/curves-1gbit-loaded.json says what they are)."""
    path = Path(__file__).parent / "data" / "judgement" / "curves-1gbit-loaded.json"
    return json.loads(path.read_text())["curves"]


def combined_verdict(curve):
    sizes = {baseline.variable(s["bytes"]): Decision(s["verdict"], s["value"], s["lo"], s["hi"],
                                                     s["launches"], "")
             for s in curve["sizes"]}
    bounds = {baseline.variable(s["bytes"]): Bound("upper", s["upper"]) for s in curve["sizes"]}
    return baseline.combine(sizes, bounds, "vcluster-vbench-nodes.yaml")[0]


def test_a_link_20_percent_slower_under_load_fails_and_healthy_links_do_not():
    """Two of the three slowed runs were inconclusive when a failed size
    needed a failed neighbour: 8 MiB failed in every launch, 4 MiB's best
    launch's median lay beyond its band with an interval reaching in."""
    curves = recorded_curves()
    verdicts = {label: combined_verdict(curve).verdict for label, curve in curves.items()}
    assert verdicts == {"slower-1": FAIL, "slower-2": FAIL, "slower-3": FAIL,
                        "healthy-1": INCONCLUSIVE, "healthy-2": INCONCLUSIVE,
                        "healthy-3": INCONCLUSIVE}
    assert [c["recorded_verdict"] for c in curves.values()] == \
        [FAIL] + [INCONCLUSIVE] * 5
    assert "8 MiB" in combined_verdict(curves["slower-3"]).reason


def test_an_inconclusive_curve_names_only_what_excused_its_sizes():
    rule, host = load_rule(), {"cpu_pressure": 51.0, "host_load": 3.0}
    case = {"cpu_pressure": 13.0, "core_round_trip_ns": 120.0}
    bound = Bound("upper", 100.0)
    failed = Decision(FAIL, 130.0, 125.0, 135.0, 4, "all 4 launches beyond the bound")
    by_contention = allowing_for_contention(failed, baseline.host_beside_baseline(host, case),
                                            True, rule, bound)
    assert by_contention.verdict == INCONCLUSIVE
    words = baseline.excuses({baseline.variable(65536): by_contention,
                              baseline.variable(32768): by_contention})
    assert len(words) == 1 and words[0].startswith("other work waited for a CPU 51 %")
    assert "38 points more than when the baseline was accepted" in words[0]
    # the cores' mode is named only where it excused a size
    assert not any("cores" in w for w in words)
    slow = {**host, "cpu_pressure": 13.0, "core_round_trip_ns": 520.0}
    small = Decision(FAIL, 101.0, 100.5, 101.5, 4, "all 4 launches beyond the bound")
    by_mode = baseline.allowing_for_host_mode(small, case, slow, rule, bound, True)
    words = baseline.excuses({baseline.variable(8): by_mode,
                              baseline.variable(65536): by_contention})
    assert words[0].startswith("the host's cores ran 4.3x slower") and len(words) == 2
