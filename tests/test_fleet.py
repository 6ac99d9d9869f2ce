"""The sweep's judgement (netbench/fleet/): synthetic fleets with seeded
+-8 % noise; a healthy fleet names nothing, a slow node, direction, link or
latency is named as what it is, a transient is cleared by re-measurement,
a uniformly slow fleet is a fleet-level finding; drain.sh and suspects.json
are safe and round-trip."""

import dataclasses
import json
import os
import random
import shutil
import stat
import statistics
import subprocess
from pathlib import Path

import pytest

from helpers.fleet import LATENCY_US, LINE_MBPS, NOISE, SIZES, make_fleet
from netbench import paths, references
from netbench.datafiles import DataError
from netbench.fleet import attribution, drain, judge, reasons
from netbench.fleet import figures as fleet_figures
from netbench.results import suspects as suspects_format
from netbench.results.sweep import parse_sweep

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside


def named(verdict):
    return sorted((s.kind, s.names) for s in verdict.suspects)


@pytest.mark.parametrize("noise, profile", [(NOISE, None), (0.04, "virtual-cluster"),
                                            (0.05, "virtual-cluster")])
def test_healthy_fleets_name_nothing(noise, profile):
    """A quiet fabric's repetitions agree within +-2 % (ClusterKit's floor,
    netbench's default); a busy 2-core host's pairs within +-5 % in a pass
    (the virtual cluster's profile: docs/reference/calibration.md)."""
    rule = references.sweep_thresholds(profile=profile)
    for seed in range(200):
        n = 3 + seed % 6
        verdict = judge.judge(make_fleet(n, seed, noise=noise), reference_bw_mbps=LINE_MBPS,
                              reference_latency_us=LATENCY_US, rule=rule)
        assert verdict.suspects == [] and verdict.bad_pairs == [], (n, seed)
        assert verdict.within_noise == [] and verdict.noisy_pairs == [], (n, seed)
        assert verdict.findings == [], (n, seed)


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_a_node_at_a_third_of_the_rate_is_named_with_its_pairs(n):
    for seed in range(25):
        measurements = make_fleet(n, seed, slow=["node01"])
        verdict = judge.judge(measurements)
        assert named(verdict) == [("node", ("node01",))], (n, seed)
        suspect = verdict.suspects[0]
        assert suspect.direction == "both"
        assert suspect.metric == f"bw_Mbps@{SIZES[-1]}"
        assert suspect.value < 0.4 * suspect.fleet_median
        # evidence: every direction of its pairs at every size, nothing else
        expected = {(a, b) for a, b in measurements if "node01" in (a, b)}
        assert {(e.src, e.dst) for e in suspect.evidence} == expected
        assert {e.metric for e in suspect.evidence} == {f"bw_Mbps@{s}" for s in SIZES}


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_a_node_slow_only_when_sending_is_named_with_its_direction(n):
    for seed in range(25):
        verdict = judge.judge(make_fleet(n, seed, egress_only=["node02"]))
        assert named(verdict) == [("node", ("node02",))], (n, seed)
        assert verdict.suspects[0].direction == "egress"
        assert all(e.src == "node02" for e in verdict.suspects[0].evidence)


@pytest.mark.parametrize("n", [3, 4, 5, 8])
def test_a_node_with_three_times_the_latency_is_named_on_latency(n):
    for seed in range(25):
        verdict = judge.judge(make_fleet(n, seed, slow_latency=["node00"]))
        assert named(verdict) == [("node", ("node00",))], (n, seed)
        assert verdict.suspects[0].metric == "latency_us"
        assert verdict.suspects[0].value > 2.1 * verdict.suspects[0].fleet_median


def test_one_bad_cable_in_five_nodes_is_a_pair():
    for seed in range(25):
        verdict = judge.judge(make_fleet(5, seed, bad_cables=[("node01", "node03")]))
        assert named(verdict) == [("pair", ("node01", "node03"))], seed
        assert verdict.suspects[0].direction == "both"


def test_one_bad_direction_of_a_cable_is_named_with_its_direction():
    measurements = make_fleet(5, 7)
    for size in SIZES:
        measurements[("node03", "node01")]["bw_Mbps"][size] /= 3
    verdict = judge.judge(measurements)
    assert named(verdict) == [("pair", ("node01", "node03"))]
    assert verdict.suspects[0].direction == "node03->node01"


def test_a_transient_bad_pair_is_cleared_by_remeasurement():
    first = make_fleet(6, 3)
    first[("node02", "node04")]["bw_Mbps"][SIZES[-1]] /= 3
    verdict = judge.judge(first)
    assert named(verdict) == [("pair", ("node02", "node04"))]
    again_pairs = judge.pairs_to_remeasure(verdict)
    assert again_pairs == [("node02", "node04")]
    healthy = make_fleet(6, 99)
    again = {pair: healthy[pair] for pair in again_pairs}
    merged = judge.judge(judge.merge_passes([first, again]))
    assert merged.suspects == [] and merged.bad_pairs == []


def test_a_persistent_bad_node_stays_named_after_remeasurement():
    first = make_fleet(4, 5, slow=["node03"], slow_latency=["node03"])
    verdict = judge.judge(first)
    again_pairs = judge.pairs_to_remeasure(verdict)
    # latency was measured one way only: re-measure the direction that has it
    assert ("node00", "node03") in again_pairs and ("node03", "node00") in again_pairs
    second = make_fleet(4, 6, slow=["node03"], slow_latency=["node03"])
    merged = judge.judge(judge.merge_passes(
        [first, {pair: second[pair] for pair in again_pairs}]))
    assert named(merged) == [("node", ("node03",)), ("node", ("node03",))]
    assert sorted(s.metric for s in merged.suspects) == [f"bw_Mbps@{SIZES[-1]}",
                                                         "latency_us"]


def test_a_uniformly_slow_fleet_is_a_fleet_finding_not_a_suspect():
    measurements = make_fleet(6, 11, scale=1 / 3)
    verdict = judge.judge(measurements, reference_bw_mbps=LINE_MBPS)
    assert verdict.suspects == []
    assert [f.metric for f in verdict.findings] == [f"bw_Mbps@{SIZES[-1]}"]
    assert verdict.findings[0].reference == LINE_MBPS
    # the line rate stands in for a missing documented figure
    by_line_rate = judge.judge(measurements, line_rate_mbps=LINE_MBPS)
    assert by_line_rate.findings[0].reference == pytest.approx(
        LINE_MBPS * references.sweep_thresholds().line_rate_fraction)
    assert judge.judge(measurements).findings == []


@pytest.mark.parametrize("scale,finding", [(0.97, False), (0.74, False), (0.6, False),
                                           (0.5, True), (1 / 3, True)])
def test_the_fleet_is_held_to_the_sweeps_calibrated_line_rate_fraction(scale, finding):
    """Against the line rate, the fleet passes every healthy median measured
    (0.742-0.992 of it; 0.592 reported in issue #25) and fails at half rate."""
    verdict = judge.judge(make_fleet(6, 3, scale=scale, noise=0.02),
                          line_rate_mbps=LINE_MBPS)
    assert bool(verdict.findings) == finding, [f.text for f in verdict.findings]


def test_a_uniformly_slow_latency_is_a_fleet_finding():
    verdict = judge.judge(make_fleet(4, 2, slow_latency=[f"node{i:02d}" for i in range(4)]),
                          reference_latency_us=LATENCY_US)
    assert verdict.suspects == []
    assert [f.metric for f in verdict.findings] == ["latency_us"]


def test_the_baseline_leaves_the_bad_nodes_pairs_out():
    verdict = judge.judge(make_fleet(3, 1, slow=["node00"]))
    stat = verdict.stats[f"bw_Mbps@{SIZES[-1]}"]
    assert stat.left_out == "node00"
    assert stat.median < 0.5 * LINE_MBPS          # 4 of 6 directions are slow
    assert stat.fleet_median > 0.9 * LINE_MBPS


# -- suspects.json -------------------------------------------------------------

def test_suspects_json_round_trips_through_its_schema(tmp_path):
    verdict = judge.judge(make_fleet(5, 4, slow=["node01"], bad_cables=[("node02", "node04")]),
                          reference_bw_mbps=LINE_MBPS)
    path = tmp_path / "suspects.json"
    path.write_text(verdict.to_json())
    suspects, data = suspects_format.read_suspects(path)
    assert suspects == verdict.suspects
    assert data == json.loads(verdict.to_json())
    assert {s.kind for s in suspects} == {"node", "pair"}


def test_a_malformed_suspects_json_names_file_and_key(tmp_path):
    data = json.loads(judge.judge(make_fleet(4, 1, slow=["node01"])).to_json())
    data["suspects"][0]["kind"] = "rack"
    path = tmp_path / "suspects.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        suspects_format.read_suspects(path)
    assert str(err.value).startswith(f"{path}: suspects[0].kind: ")


# -- drain.sh ------------------------------------------------------------------

def _sh_parses(text, tmp_path):
    script = tmp_path / "drain.sh"
    script.write_text(text)
    return subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)


def test_drain_script_parses_and_names_only_suspect_nodes(tmp_path):
    verdict = judge.judge(make_fleet(5, 4, slow=["node01"], bad_cables=[("node02", "node04")]))
    text = drain.drain_script(verdict.suspects)
    assert text.startswith("#!/bin/sh\n")
    assert _sh_parses(text, tmp_path).returncode == 0
    scontrol = [line for line in text.splitlines() if "scontrol update" in line]
    assert scontrol == [line for line in scontrol if line.startswith("# scontrol ")]
    assert len(scontrol) == 1 and "NodeName=node01 " in scontrol[0]
    assert "never runs it" in text and "Review before running" in text
    assert "link between node02 and node04" in text
    # nothing outside comments: netbench never drains anything
    assert all(line == "" or line.startswith("#") for line in text.splitlines())


HOSTILE = ["a;rm -rf ~", "$(reboot)", "x\nscontrol update NodeName=all State=DOWN",
           "`id`", "n1' State=DOWN '", "-rf", ""]


def test_drain_script_survives_hostile_host_names(tmp_path):
    hosts = HOSTILE[:4] + ["good-node.example", HOSTILE[4]]
    measurements = make_fleet(0, 3, hosts=hosts)
    for pair, figures in measurements.items():
        if HOSTILE[1] in pair or "good-node.example" in pair:
            figures["bw_Mbps"] = {s: v / 3 for s, v in figures["bw_Mbps"].items()}
    suspects = judge.judge(measurements).suspects
    suspects.append(suspects_format.Suspect("node", (HOSTILE[5],), "latency_us", 1, 1))
    suspects.append(suspects_format.Suspect("node", (HOSTILE[6],), "latency_us", 1, 1))
    assert {s.names[0] for s in suspects if s.kind == "node"} >= {HOSTILE[1],
                                                                 "good-node.example"}
    text = drain.drain_script(suspects, reason_prefix="net\nbench $(id)")
    assert _sh_parses(text, tmp_path).returncode == 0
    assert all(line == "" or line.startswith("#") for line in text.splitlines())
    scontrol = [line for line in text.splitlines() if "scontrol update" in line]
    assert len(scontrol) == 1 and "NodeName=good-node.example " in scontrol[0]
    assert text.count("refused node name") == 3


def test_an_uncommented_drain_line_runs_scontrol_with_exactly_its_words(tmp_path):
    """Uncommenting the line an operator reviewed runs scontrol with four
    words, whatever the reason says."""
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$#" "$@" > "$OUT"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    suspect = suspects_format.Suspect("node", ("n7.rack-2",), "bw_Mbps@8388608", 300.0, 900.0)
    text = drain.drain_script([suspect], reason_prefix="it's $(id) `x`")
    line = next(l for l in text.splitlines() if l.startswith("# scontrol "))
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\n" + line[2:] + "\n")
    out = tmp_path / "args"
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}", OUT=str(out))
    subprocess.run(["sh", str(script)], check=True, env=env)
    args = out.read_text().splitlines()
    assert args[:4] == ["4", "update", "NodeName=n7.rack-2", "State=DRAIN"]
    assert args[4] == ("Reason=it's $(id) `x`: bw_Mbps@8388608 300 vs fleet median 900")


def test_no_suspects_no_scontrol(tmp_path):
    text = drain.drain_script([])
    assert _sh_parses(text, tmp_path).returncode == 0
    assert "scontrol update" not in text


# -- the rule's parameters in thresholds.yaml -------------------------------------

def test_sweep_thresholds_start_from_clusterkit():
    rule = references.sweep_thresholds()
    assert rule.latency_factor == 2.1
    assert rule.bandwidth_fraction == pytest.approx(0.93)
    assert rule.node_min_bad_pairs == 2
    # the virtual cluster's loose floor is its own profile's
    assert references.sweep_thresholds(profile="virtual-cluster").bandwidth_fraction == \
        pytest.approx(0.90)


def _broken_thresholds(tmp_path, old, new):
    folder = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, folder)
    path = folder / references.THRESHOLDS_FILE
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return folder, path


@pytest.mark.parametrize("old,new,key,problem", [
    ("latency_factor: 2.1", "latency_factor: 2.1\n  bandwidth_fraction: 0.75",
     "sweep.bandwidth_fraction", "unknown key"),
    ("latency_factor: 2.1", "latency_factor: fast", "sweep.latency_factor",
     "expected a finite number, got str 'fast'"),
    ("  mad_multiple: 4.0\n", "", "sweep.mad_multiple", "missing"),
    ("node_min_bad_pairs: 2", "node_min_bad_pairs: 2.5", "sweep.node_min_bad_pairs",
     "expected an integer, got float 2.5"),
    ("line_rate_fraction: 0.95", "line_rate_fraction: 0.95\n  slack: 1",
     "sweep.slack", "unknown key"),
])
def test_bad_sweep_thresholds_name_file_and_key(tmp_path, old, new, key, problem):
    folder, path = _broken_thresholds(tmp_path, old, new)
    with pytest.raises(DataError) as err:
        references.sweep_thresholds(folder)
    assert str(err.value).startswith(f"{path}: {key}: {problem}")
    assert len(str(err.value).splitlines()) == 1


@pytest.mark.parametrize("n", [6, 8])
def test_two_bad_nodes_are_both_named(n):
    """A second bad node must not widen the band that judges the first."""
    for seed in range(25):
        verdict = judge.judge(make_fleet(n, seed, slow=["node01", "node04"]))
        assert named(verdict) == [("node", ("node01",)), ("node", ("node04",))], (n, seed)


def test_two_nodes_with_a_slow_link_are_a_fleet_finding():
    """Two nodes are one pair: nothing to compare it with but the reference."""
    verdict = judge.judge(make_fleet(2, 1, bad_cables=[("node00", "node01")]),
                          reference_bw_mbps=LINE_MBPS)
    assert verdict.suspects == []
    assert [f.metric for f in verdict.findings] == [f"bw_Mbps@{SIZES[-1]}"]


def test_a_node_needs_at_least_two_bad_pairs():
    """Even a lax majority (a fifth of the partners) names no node for one
    bad cable: one pair cannot tell its two ends apart."""
    rule = dataclasses.replace(references.sweep_thresholds(), node_majority=0.2)
    verdict = judge.judge(make_fleet(5, 2, bad_cables=[("node00", "node03")]), rule=rule)
    assert named(verdict) == [("pair", ("node00", "node03"))]


def test_latency_is_remeasured_in_the_direction_that_measured_it():
    measurements = make_fleet(4, 8, slow_latency=["node02"])
    for (src, dst) in list(measurements):       # move latency to the src > dst direction
        if src < dst:
            measurements[(dst, src)]["latency_us"] = measurements[(src, dst)].pop("latency_us")
    verdict = judge.judge(measurements)
    assert named(verdict) == [("node", ("node02",))]
    assert judge.pairs_to_remeasure(verdict) == [("node02", "node00"), ("node02", "node01"),
                                                 ("node03", "node02")]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "900", None, True])
def test_a_figure_that_is_no_figure_is_refused_naming_its_pair(value):
    measurements = make_fleet(3, 1)
    measurements[("node01", "node02")]["bw_Mbps"][SIZES[0]] = value
    with pytest.raises(ValueError, match=f"node01->node02: bw_Mbps@{SIZES[0]}: expected"):
        judge.judge(measurements)


def test_a_sweep_whose_ranks_share_a_host_is_refused_in_one_line():
    """Ranks on one host measure no link between nodes: the judgement
    refuses such a sweep, naming the host, as fleet.remeasure does (its
    statistics once crashed with an IndexError on this recorded output,
    four ranks on one VM, and misjudged a fleet where one node held two)."""
    text = (Path(__file__).parent / "data" / "benchmark" / "sweep-4ranks.mpich-wheel.txt"
            ).read_text()
    with pytest.raises(ValueError) as err:
        judge.judge(parse_sweep(text).measurements())
    assert str(err.value) == ("ranks ran on one host (vm): a sweep measures the links "
                              "between nodes, one rank each")
    measurements = make_fleet(4, 1)
    measurements[("node01", "node01")] = dict(measurements[("node01", "node02")])
    with pytest.raises(ValueError, match=r"^ranks ran on one host \(node01\): [^\n]*$"):
        judge.judge(measurements)


def test_a_pair_that_moved_no_data_is_bad():
    measurements = make_fleet(5, 1)
    measurements[("node01", "node02")]["bw_Mbps"] = {s: 0 for s in SIZES}
    assert named(judge.judge(measurements)) == [("pair", ("node01", "node02"))]


@pytest.mark.parametrize("n, k", [(8, 2), (8, 4), (9, 3), (16, 4), (256, 6), (5, 8)])
def test_partner_pairs_cover_the_fleet_with_k_partners_each(n, k):
    pairs = attribution.partner_pairs(n, k)
    partners = {i: set() for i in range(n)}
    for a, b in pairs:
        assert a < b
        partners[a].add(b)
        partners[b].add(a)
    assert all(min(k, n - 1) <= len(p) <= k + 1 for p in partners.values()), partners
    # connected: every node reachable from node 0
    seen, todo = {0}, [0]
    while todo:
        for other in partners[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    assert seen == set(range(n))


def test_a_partial_sweep_names_a_node_bad_with_its_measured_partners():
    hosts = [f"n{i}" for i in range(8)]
    measurements = {}
    for a, b in attribution.partner_pairs(8, 4):
        for src, dst in ((hosts[a], hosts[b]), (hosts[b], hosts[a])):
            slow = "n3" in (src, dst)
            measurements[(src, dst)] = {"latency_us": 20.0,
                                        "bw_Mbps": {1048576: 320.0 if slow else 950.0}}
    result = judge.judge(measurements)
    assert [(s.kind, s.names) for s in result.suspects] == [("node", ("n3",))]


# -- scale (#23): the same verdicts from columns and one sort ----------------

def brute_force_leave_one_out(figures):
    """{host index: statistics.median of the figures without its pairs}, the
    O(n^3) way the judgement used to take it."""
    pairs = list(zip(figures.src.tolist(), figures.dst.tolist(), figures.values.tolist()))
    out = {}
    for i in range(len(figures.hosts)):
        rest = [v for a, b, v in pairs if i not in (a, b)]
        if rest:
            out[i] = statistics.median(rest)
    return out


def test_leave_one_out_medians_are_the_medians_of_the_rest():
    """Ties, partial sweeps, odd and even counts, hosts without figures."""
    rng = random.Random(23)
    for trial in range(150):
        n = rng.randint(2, 11)
        hosts = [f"h{i}" for i in range(n)]
        tied = trial % 3 == 0
        measurements = {}
        for a in hosts:
            for b in hosts:
                if a != b and rng.random() < 0.7:
                    value = rng.choice([1.0, 2.0, 3.0]) if tied else rng.uniform(0, 100)
                    measurements[(a, b)] = {"bw_Mbps": {64: value}}
        if not measurements:
            continue
        figures = fleet_figures.figures_by_metric(measurements)["bw_Mbps@64"]
        assert dict(fleet_figures.leave_one_out_medians(figures)) == \
            brute_force_leave_one_out(figures), trial


def test_the_verdict_does_not_depend_on_the_order_of_the_pairs():
    """Latency measured both ways (the lower is the pair's), pairs in any
    order: the verdict is that of the sorted input."""
    rng = random.Random(7)
    measurements = make_fleet(9, 4, slow=["node05"], bad_cables=[("node01", "node03")])
    for (src, dst), figures in measurements.items():
        if src > dst:
            figures["latency_us"] = LATENCY_US * rng.uniform(1.2, 1.5)
    shuffled = list(measurements.items())
    rng.shuffle(shuffled)
    verdict = judge.judge(dict(shuffled))
    assert verdict.to_json() == judge.judge(dict(sorted(measurements.items()))).to_json()
    assert named(verdict) == [("node", ("node05",)), ("pair", ("node01", "node03"))]
    assert verdict.stats["latency_us"].n == 9 * 8 // 2


def test_a_latency_that_is_no_figure_is_refused_naming_its_measured_direction():
    measurements = make_fleet(3, 1)
    measurements[("node02", "node01")]["latency_us"] = float("nan")
    with pytest.raises(ValueError, match="node02->node01: latency_us: expected"):
        judge.judge(measurements)


def test_a_large_fleet_names_its_slow_node_and_cable_only():
    """192 nodes (the issue's 7.8 s): one slow node, one bad cable."""
    measurements = make_fleet(192, 3, slow=["node100"], bad_cables=[("node007", "node042")],
                              hosts=[f"node{i:03d}" for i in range(192)])
    verdict = judge.judge(measurements)
    assert named(verdict) == [("node", ("node100",)), ("pair", ("node007", "node042"))]


# -- drain.sh against hostile text in every field of a suspect (#23) -------------

#: what a run report could put in any field: a newline that ends the
#: comment, command substitutions, a closing parenthesis, separators,
#: terminal escapes, carriage returns and non-ASCII line separators
HOSTILE_TEXT = ["both)\ntouch PWNED #", "$(touch PWNED)", "`touch PWNED`", ") ; touch PWNED",
                "x\rtouch PWNED", "\x1b]0;owned\x07\x1b[2J", "n\u2028touch PWNED", "né\u202e",
                "egress\n>PWNED", "1;touch PWNED"]
NODE = suspects_format.Suspect(
    "node", ("n7",), "bw_Mbps@8388608", 300.0, 900.0, None, "both",
    (suspects_format.Evidence("n7", "n8", "bw_Mbps@8388608", 300.0, 700.0),))
PAIR = dataclasses.replace(NODE, kind="pair", names=("n7", "n8"), direction="n7->n8")
FIELDS = ["kind", "names", "metric", "value", "fleet_median", "reference", "direction",
          "evidence"]


def hostile_suspects(field, text):
    """A node and a pair suspect whose `field` is hostile `text`."""
    value = {"names": (text,), "evidence": (text,)}.get(field, text)
    out = [dataclasses.replace(s, **{field: value}) for s in (NODE, PAIR)]
    if field == "names":
        out.append(dataclasses.replace(PAIR, names=("n7", text), direction=f"n7->{text}"))
    return out


def fake_scontrol(tmp_path):
    """A scontrol that writes its argument count and arguments to $OUT."""
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$#" "$@" >> "$OUT"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return fake


@pytest.mark.parametrize("field", FIELDS + ["reason_prefix"])
def test_drain_script_runs_nothing_whatever_a_suspect_holds(tmp_path, field):
    """Every field of a suspect, and the reason prefix, holds hostile text:
    the script parses, runs nothing (sh -x traces no command, no file is
    made), and each scontrol line, uncommented, runs scontrol alone with
    its four quoted words."""
    fake = fake_scontrol(tmp_path)
    for i, text in enumerate(HOSTILE_TEXT):
        if field == "reason_prefix":
            suspects, prefix = [NODE, PAIR], text
        else:
            suspects, prefix = hostile_suspects(field, text), "netbench"
        script_text = drain.drain_script(suspects, reason_prefix=prefix)
        assert all(ch == "\n" or " " <= ch <= "~" for ch in script_text), repr(script_text)
        assert all(l == "" or l.startswith("#") for l in script_text.split("\n")), script_text
        work = tmp_path / f"run-{i}"
        work.mkdir()
        script = work / "drain.sh"
        script.write_text(script_text)
        assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
        env = {"PATH": str(fake.parent), "OUT": str(tmp_path / f"args-{i}")}
        run = subprocess.run(["/bin/sh", "-x", str(script)], cwd=work, env=env,
                             capture_output=True, text=True)
        assert (run.returncode, run.stdout, run.stderr) == (0, "", ""), (text, run)
        assert sorted(p.name for p in work.iterdir()) == ["drain.sh"], text
        for line in [l for l in script_text.splitlines() if l.startswith("# scontrol ")]:
            (work / "one.sh").write_text(line[2:] + "\n")
            out = tmp_path / f"args-{i}"
            out.unlink(missing_ok=True)
            run = subprocess.run(["/bin/sh", "-x", str(work / "one.sh")], cwd=work, env=env,
                                 capture_output=True, text=True)
            traced = [l for l in run.stderr.splitlines() if l.startswith("+")]
            assert len(traced) == 1 and traced[0].startswith("+ scontrol "), (text, run.stderr)
            args = out.read_text().splitlines()
            assert args[:4] == ["4", "update", "NodeName=n7", "State=DRAIN"], (text, args)
            assert args[4].startswith("Reason=") and len(args) == 5, (text, args)
            (work / "one.sh").unlink()
        assert sorted(p.name for p in work.iterdir()) == ["drain.sh"], text


def test_drain_script_names_only_vocabulary_for_a_node_and_a_pair():
    text = drain.drain_script([NODE, PAIR, dataclasses.replace(NODE, direction="unreachable",
                                                               metric="answered_pairs")])
    assert "(both)" in text and "(n7->n8)" in text and "(unreachable)" in text
    assert "stopped answering mid-sweep after 300 of its pairs" in text
    hostile = drain.drain_script(hostile_suspects("direction", "both)\ntouch X #"))
    assert "touch" not in hostile and hostile.count("refused direction") == 2


def test_the_sweep_measures_again_by_the_judging_rule():
    from netbench.judgement import knobs
    first = make_fleet(4, 5, slow=["node03"])
    second = make_fleet(4, 6, slow=["node03"])
    bad = judge.pairs_to_remeasure(judge.judge(first))
    two_to_fail = dataclasses.replace(knobs.load(), launches=4, min_to_fail=2)
    assert judge.pairs_still_undecided([first], two_to_fail) == bad
    again = {pair: second[pair] for pair in bad}
    # bad in both passes: named, nothing left to measure
    assert judge.pairs_still_undecided([first, again], two_to_fail) == []
    # a site that asks three passes before naming gets a third
    three_to_fail = dataclasses.replace(two_to_fail, min_to_fail=3)
    assert judge.pairs_still_undecided([first, again], three_to_fail) == bad
    # a pair within the band in any pass is decided
    healthy = make_fleet(4, 7)
    assert judge.pairs_still_undecided([first, {p: healthy[p] for p in bad}],
                                       three_to_fail) == []


def test_a_slow_node_inside_a_band_the_fleets_noise_widened_is_too_noisy_to_tell():
    """Healthy pairs spread +-40 % (a saturated host): the band widens with
    the fleet's MAD until a node at a third of the rate lies inside it.
    It is then no suspect, but no pass either: its pairs are measured again
    and, still there, it is named as too noisy to tell (within_noise)."""
    rule = references.sweep_thresholds(profile="virtual-cluster")
    for seed in range(25):
        verdict = judge.judge(make_fleet(5, seed, slow=["node01"], noise=0.4), rule=rule)
        if verdict.suspects:        # this seed's noise left the node beyond
            continue
        assert ("node", ("node01",)) in {(s.kind, s.names) for s in verdict.within_noise}, seed
        again = set(judge.pairs_to_remeasure(verdict))
        assert {(a, b) for a, b in verdict.measurements if "node01" in (a, b)} <= again
        for e in verdict.noisy_pairs:
            assert e.value < rule.bandwidth_fraction * verdict.stats[e.metric].fleet_median
            assert e.value >= fleet_figures.pair_bound(verdict.stats[e.metric], rule)
        stat = verdict.stats[verdict.within_noise[0].metric]
        text = reasons.describe_within_noise(verdict.within_noise[0], stat,
                                             fleet_figures.pair_bound(stat, rule),
                                             rule.mad_multiple)
        assert text.startswith("within the fleet's own spread (4 x its MAD") and "node0" in text
        break
    else:
        pytest.fail("no seed widened the band past the slow node")
    # the same node on a quiet fleet's narrow band is a suspect, and nothing is left noisy
    quiet = judge.judge(make_fleet(5, 0, slow=["node01"]))
    assert named(quiet) == [("node", ("node01",))] and quiet.within_noise == []


def test_contention_leaves_a_cpu_bound_suspect_unconfirmed_and_a_lost_node_named():
    """A suspect named while some node's conditions differed from a quiet
    host's (judgement.conditions) is unconfirmed (named, not drained) when
    its figure is the CPUs' and its miss is within what they explain; a
    larger miss, a quiet fleet or a figure the link bounds keeps it."""
    from netbench.judgement import knobs
    limits = knobs.load().conditions
    verdict = judge.judge(make_fleet(5, 1, slow=["node01"]))
    (suspect,) = verdict.suspects
    assert suspect.fleet_median / suspect.value > 2.5                # about 3x

    def on(pressure):
        return {"nodes": {"node00": {"cpu_pressure": 1.0}, "node03": {"cpu_pressure": pressure}}}
    # 40 % of the time waiting for a CPU: at most 1/0.6 = 1.67x slower
    busy = limits.cpu_pressure_points + 15
    quiet = limits.cpu_pressure_points - 5
    saturated = limits.cores_short_pressure + 5
    every_figure = lambda metric: True                               # noqa: E731
    latency_only = lambda metric: metric == suspects_format.LATENCY  # noqa: E731
    slight = dataclasses.replace(suspect, value=suspect.fleet_median / 1.5)
    slightly = dataclasses.replace(verdict, suspects=[slight])

    left, unconfirmed = judge.unconfirmed(slightly, on(busy), knobs.load(), every_figure)
    assert left.suspects == [] and unconfirmed == [slight]
    # a 3x miss is more than 40 % pressure explains
    assert judge.unconfirmed(verdict, on(busy), knobs.load(), every_figure)[1] == []
    assert judge.unconfirmed(slightly, on(quiet), knobs.load(), every_figure)[1] == []
    assert judge.unconfirmed(slightly, on(busy), knobs.load(), latency_only)[1] == []
    # two nodes at 40 %: a pair of them holds its two cores at once a share
    # 0.6 x 0.6 of the time, which explains 2.78x, and the node furthest
    # from busy is not the pair's
    halved = dataclasses.replace(verdict, suspects=[
        dataclasses.replace(suspect, value=suspect.fleet_median / 2.5)])
    both = {"nodes": {"node00": {"cpu_pressure": busy}, "node03": {"cpu_pressure": busy},
                      "node04": {"cpu_pressure": busy - 1}}}
    assert judge.unconfirmed(halved, on(busy), knobs.load(), every_figure)[1] == []
    assert judge.unconfirmed(halved, both, knobs.load(), every_figure)[0].suspects == []
    # a node whose ranks could not have a core: any miss of a CPU-bound figure
    assert judge.unconfirmed(verdict, on(saturated), knobs.load(), every_figure)[1] == [suspect]
    # a node that stopped answering is no figure
    lost = dataclasses.replace(suspect, direction=suspects_format.UNREACHABLE)
    gone = dataclasses.replace(verdict, suspects=[lost])
    assert judge.unconfirmed(gone, on(saturated), knobs.load(), every_figure)[0].suspects == \
        [lost]



def test_a_suspect_of_a_sweep_cut_short_is_undecided_and_a_lost_node_still_named():
    """A pair is named only when outside the band in `min_to_fail` passes:
    a sweep that lost a node mid-pass is never measured again, so the
    figures of its one pass name nobody (CI once saw Open MPI's surviving
    rank report a closed socket and the pair the killed node measured last
    named as slow); the node that stopped answering is no figure and stays
    the first suspect, and a knob of one pass names what it found."""
    from netbench.judgement import knobs
    twice = knobs.load()
    assert twice.min_to_fail == 2
    verdict = judge.judge(make_fleet(5, 1, slow=["node01"]), lost=["node03"])
    lost, slow = verdict.suspects
    assert (lost.direction, slow.names) == (suspects_format.UNREACHABLE, ("node01",))
    left, once = judge.not_retested(verdict, 1, twice)
    assert left.suspects == [lost] and once == [slow]
    assert judge.not_retested(verdict, 2, twice) == (verdict, [])
    assert judge.not_retested(verdict, 1, dataclasses.replace(twice, min_to_fail=1)) == \
        (verdict, [])

# ---- a node the sweep cannot reach (#36) --------------------------------------

#: what netbench's launch writes when ssh cannot reach a node (rfm/supervise.py)
LAUNCH_LINES = (
    "[mpiexec@head] HYDU_sock_connect: unable to connect\n"
    "netbench.launch: the launcher started no rank; ssh to 198.18.0.13 (node vc-n3) "
    "fails: ssh: connect to host 198.18.0.13 port 22: No route to host\n"
    "netbench.launch: the launch lost a node; ssh to site-node7 fails: "
    "ssh: connect to host site-node7 port 22: Connection timed out\n")


def test_a_node_the_launch_cannot_reach_is_named_by_name_with_ssh_s_words():
    from netbench.results.sweep import unreachable_nodes
    assert unreachable_nodes(LAUNCH_LINES) == {
        "vc-n3": "ssh: connect to host 198.18.0.13 port 22: No route to host",
        # a site's hostfile names its hosts itself
        "site-node7": "ssh: connect to host site-node7 port 22: Connection timed out"}
    assert unreachable_nodes("ssh: connect to host 198.18.0.13 port 22: No route to host") \
        == {}
    # the other nodes, which no rank started on to name
    from netbench.results.sweep import reached_nodes
    assert reached_nodes(LAUNCH_LINES + "netbench.launch: ssh reaches vc-n1 vc-n2\n") == \
        ["vc-n1", "vc-n2"]
    assert reached_nodes("netbench.launch: ssh reaches no node\n") == []
    # a node that dropped out mid-sweep: its link went down, the job stalled
    stalled = ("netbench.launch: stopped the job 570 s into its 600 s time limit: no "
               "progress for 560 s; the link to node vc-n2 stopped carrying traffic 561 s "
               "ago (it is down); the link to node vc-n1 stopped carrying traffic 560 s ago; "
               "ranks not finished: 0 on vc-n1\n")
    assert unreachable_nodes(stalled) == {
        "vc-n2": "its link is down: it stopped carrying traffic 561 s before the launch ended"}


def test_an_unreachable_node_is_a_suspect_in_suspects_json_with_its_reason(tmp_path):
    """Before: nothing measured, no suspect; suspects.json listed nobody."""
    why = "ssh: connect to host 198.18.0.13 port 22: No route to host"
    for measurements in ({}, make_fleet(4, 1)):
        verdict = judge.judge(measurements, lost={"vc-n3": why})
        first = verdict.suspects[0]
        assert (first.kind, first.names, first.direction, first.reason) == \
            ("node", ("vc-n3",), suspects_format.UNREACHABLE, why)
        assert reasons.describe(first) == f"node vc-n3 (unreachable): {why}"
        # the case's reason says ssh's words once
        assert reasons.unfinished([first], None, LAUNCH_LINES + why + "\n") == \
            f"the sweep lost a node: node vc-n3 (unreachable): {why}"
        path = tmp_path / "suspects.json"
        path.write_text(verdict.to_json())
        read, data = suspects_format.read_suspects(path)
        assert read[0] == first and data["suspects"][0]["reason"] == why
    # a node lost mid-sweep without the launch's words keeps its old form
    lost = judge.judge(make_fleet(4, 1), lost=["node02"]).to_json()
    assert "reason" not in json.loads(lost)["suspects"][0]


def test_a_sweep_that_named_nobody_and_did_not_finish_is_no_answer_not_a_loss():
    """The record's verdict is the failed case's (#36), and the exit code
    still tells a loss shown (a node named, even unreachable) from a sweep
    that gave no answer."""
    from netbench.report.verdict import shows_a_loss
    named = {"result": "fail", "fail_phase": "sanity", "record": {
        "verdict": "fail", "fleet": {"suspects": [{"names": ["vc-n3"]}], "no_answer": None}}}
    unanswered = {"result": "fail", "fail_phase": "sanity", "record": {
        "verdict": "fail", "fleet": {"suspects": [], "no_answer": "the sweep did not finish"}}}
    assert shows_a_loss(named) and not shows_a_loss(unanswered)


def test_the_pairs_left_undecided_beside_a_lost_node_keep_their_reason():
    """A sweep cut short names its lost node and fails: it has no
    inconclusive verdict to carry why the pairs its one pass measured are
    listed but not named, so the fleet record keeps it, and the page says
    that reason, not the contention words of an older record."""
    import types
    from netbench.report import sweep as report_sweep
    why = ("outside the band in the one whole pass the sweep made, where a pair is named only "
           "after 2 (nothing was measured again)")
    fleet = {"hosts": ["vc-n1", "vc-n2", "vc-n3"], "pairs": [],
             "suspects": [{"kind": "node", "names": ["vc-n3"], "direction": "unreachable"}],
             "unconfirmed": [{"kind": "link", "names": ["vc-n1", "vc-n2"],
                              "direction": "out", "metric": "latency_us"}],
             "unconfirmed_why": why}
    tc = {"result": "fail", "system": "vc", "partition": "nodes", "environ": "mpich",
          "record": {"section": "sweep", "verdict": "fail", "fleet": fleet}}
    (section,) = report_sweep.sweep_sections([types.SimpleNamespace(testcases=[tc])])
    assert section["unconfirmed_why"] == why
    # a record written before the fleet kept it: its inconclusive verdict's
    old = dict(tc, record={**tc["record"], "fleet": {**fleet, "unconfirmed_why": None},
                           "verdicts": {"suspects": {"reason": "older words"}}})
    (section,) = report_sweep.sweep_sections([types.SimpleNamespace(testcases=[old])])
    assert section["unconfirmed_why"] == "older words"


def test_a_later_pass_cut_short_is_no_whole_pass():
    """A pass that measured again only some of the pairs it was to (its
    job lost a node) does not count toward `min_to_fail`: a pair it missed
    was outside the band in one pass alone.  Real outputs: a whole sweep
    of four ranks, and MPICH's sweep whose rank was killed mid-pass."""
    from netbench.results.sweep import parse_sweep
    data = Path(__file__).parent / "data"
    whole = parse_sweep((data / "benchmark" / "sweep-4ranks.mpich-wheel.txt").read_text())
    cut = parse_sweep((data / "sweep_lost" / "mpich-rank-killed.out").read_text())
    assert whole.finished and not cut.finished
    assert judge.whole_passes(whole, []) == 1
    assert judge.whole_passes(cut, []) == 1          # the first counts, cut short or not
    assert judge.whole_passes(whole, [whole]) == 2
    assert judge.whole_passes(whole, [cut]) == 1
    assert judge.whole_passes(whole, [cut, whole]) == 2
