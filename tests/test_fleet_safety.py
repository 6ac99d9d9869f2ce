"""The sweep's outputs against hostile and broken input (issue #23): host
names with terminal escapes or math text, suspects that are no suspects,
figures that are no figures, a run report nested thousands deep, a node
that stopped answering mid-sweep (real launcher output, tests/data/
sweep_lost/), and `report -o ''`."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from netbench import cli, report
from netbench.fleet import drain, judge, reasons
from netbench.report import plots
from netbench.results import suspects as suspects_format
from netbench.results.sweep import lost_hosts, parse_sweep
from netbench.textsafe import printable
from helpers.fleet import make_fleet
from helpers.reports import one_line_error, sweep_report

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = Path(__file__).parent / "data" / "sweep_lost"
ESC_HOST = "n3\x1b]0;owned\x07\x1b[31m"
SUSPECT = {"kind": "node", "names": ["n3"], "metric": "bw_Mbps@8388608", "value": 300.0,
           "fleet_median": 950.0, "reference": None, "direction": "both",
           "evidence": [{"src": "n1", "dst": "n3", "metric": "bw_Mbps@8388608",
                         "value": 300.0, "bound": 712.5}]}


# ---- item 4: terminal escapes in host names ------------------------------------

def no_control(text):
    return not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for c in text)


def test_printable_shows_every_control_character_as_its_escape():
    assert printable(ESC_HOST) == "n3\\x1b]0;owned\\x07\\x1b[31m"
    assert printable("a\nb\rc\u202ed é") == "a\\x0ab\\x0dc\\u202ed é"
    assert printable(42) == "42"


def test_a_suspects_reason_escapes_its_host_names():
    measurements = make_fleet(0, 3, hosts=["n1", "n2", ESC_HOST, "n4"], slow=[ESC_HOST])
    verdict = judge.judge(measurements)
    assert [s.names for s in verdict.suspects] == [(ESC_HOST,)]
    reason = reasons.describe(verdict.suspects[0])
    assert no_control(reason) and "n3\\x1b]0;owned" in reason, reason
    lost = judge.judge(measurements, lost=[ESC_HOST]).suspects[0]
    assert no_control(reasons.describe(lost))
    text = reasons.unfinished([lost], f"rank 2 (on {ESC_HOST}) was killed", "")
    assert no_control(text) and "\n" not in text


def test_a_launcher_failure_in_a_reason_is_escaped():
    from netbench.checks.slurm import job_failure
    out = (f"prterun noticed that process rank 1 with PID 42 on node {ESC_HOST} exited on\n"
           f"signal 9 (Killed).\n")
    reason = job_failure("", out)
    assert reason and no_control(reason) and "\\x1b" in reason, reason


def test_vcluster_status_escapes_what_other_checkouts_wrote(capsys):
    class Registry:          # what `status` read from the machine-wide registry
        @staticmethod
        def status():
            return [{"name": "vc", "owner": f"/home/x/{ESC_HOST}", "uid": 0, "mine": False,
                     "healthy": False, "problem": f"broken\x1b[2J{ESC_HOST}"}]
    assert cli.vcluster_status(Registry, type("Args", (), {"json": False, "name": None})) == 0
    out = capsys.readouterr().out
    assert no_control(out.replace("\n", "")) and "\\x1b[2J" in out, out


# ---- item 8: math text in host names ---------------------------------------------

@pytest.mark.parametrize("host", ["$\\foo$", "a$b", "$x^{$", "_$\\frac{1}$"])
def test_a_heat_map_draws_any_host_name_as_plain_text(host):
    hosts = ["n1", host, "n3"]
    values = np.full((3, 3), 900.0)          # sender x receiver, hosts' order
    np.fill_diagonal(values, np.nan)
    svg = plots.heat_maps(hosts, [("bandwidth", "Mbit/s", values, True)], highlight={host})
    assert svg.startswith("<svg") and host.replace("&", "&amp;") in svg


def test_a_sweep_with_a_math_text_host_name_publishes_its_page(tmp_path):
    data = sweep_report([dict(SUSPECT, names=["$\\foo$"],
                              evidence=[dict(SUSPECT["evidence"][0], dst="$\\foo$")])])
    fleet = data["runs"][0]["testcases"][0]["record"]["fleet"]
    for pair in fleet["pairs"]:
        pair.update({k: "$\\foo$" for k in ("src", "dst") if pair[k] == "n3"})
    fleet["hosts"] = ["n1", "n2", "$\\foo$"]
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(data))
    folder = report.publish(raw, tmp_path)
    assert {p.name for p in folder.iterdir()} >= {"index.html", "suspects.json", "drain.sh"}
    assert "refused node name" in (folder / "drain.sh").read_text()


# ---- item 10: suspects, nesting and remeasure input: one line ----------------------

BAD_SUSPECTS = {
    "missing key": (lambda s: s.pop("fleet_median"), "suspects[0].fleet_median"),
    "string value": (lambda s: s.update(value="300"), "suspects[0].value"),
    "evidence not objects": (lambda s: s.update(evidence=["n1->n3"]),
                             "suspects[0].evidence[0]"),
    "evidence not a list": (lambda s: s.update(evidence="n1->n3"), "suspects[0].evidence"),
    "NaN value": (lambda s: s.update(value=float("nan")), "suspects[0].value"),
    "infinite median": (lambda s: s.update(fleet_median=float("inf")),
                        "suspects[0].fleet_median"),
    "unknown kind": (lambda s: s.update(kind="rack"), "suspects[0].kind"),
    "direction with a command": (lambda s: s.update(direction="both)\ntouch X #"),
                                 "suspects[0].direction"),
}


@pytest.mark.parametrize("command", ["publish", "report"])
@pytest.mark.parametrize("change,key", BAD_SUSPECTS.values(), ids=BAD_SUSPECTS.keys())
def test_a_malformed_suspect_is_one_line_naming_file_and_field(tmp_path, capsys, command,
                                                               change, key):
    suspect = json.loads(json.dumps(SUSPECT))
    change(suspect)
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(sweep_report([suspect])))       # NaN as Python writes it
    argv = [command, str(raw)] + (["--reports-dir", str(tmp_path / "reports")]
                                  if command == "publish" else ["-o", str(tmp_path / "out")])
    (tmp_path / "reports").mkdir()
    assert cli.main(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(raw) in line and f"record.fleet.{key}" in line, line
    assert list((tmp_path / "reports").iterdir()) == []


@pytest.mark.parametrize("command", ["publish", "report"])
def test_a_run_report_nested_thousands_deep_is_one_line(tmp_path, capsys, command):
    raw = tmp_path / "run-report.json"
    raw.write_text('{"session_info": ' + "[" * 100000 + "]" * 100000 + "}")
    argv = [command, str(raw)] + (["--reports-dir", str(tmp_path)] if command == "publish"
                                  else ["-o", str(tmp_path / "out")])
    assert cli.main(argv) == 2
    line = one_line_error(capsys.readouterr().err)
    assert str(raw) in line and "nested too deeply" in line, line


def run_remeasure(*args):
    return subprocess.run([sys.executable, "-m", "netbench.fleet.remeasure", *args],
                          capture_output=True, text=True, timeout=60)


def sweep_output(tmp_path, text):
    path = tmp_path / "sweep.out"
    path.write_text(text)
    return path


@pytest.mark.parametrize("edit,named", [
    (lambda t: t.replace(" 18078.746 ", " nan ", 1), "expected a finite figure"),
    (lambda t: t.replace(" 18078.746 ", " inf ", 1), "expected a finite figure"),
    (lambda t: "\n".join(l for l in t.splitlines() if not l.startswith("# rank 1 host")),
     "no '# rank R host H' line for rank 1"),
])
def test_remeasure_on_broken_output_is_one_line(tmp_path, edit, named):
    text = (Path(__file__).parent / "data" / "benchmark" / "sweep-3ranks.mpich-wheel.txt"
            ).read_text()
    path = sweep_output(tmp_path, edit(text))
    proc = run_remeasure(str(path))
    assert proc.returncode == 2 and proc.stdout == "", proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and named in lines[0], proc.stderr


def test_remeasure_on_a_missing_file_is_one_line(tmp_path):
    proc = run_remeasure(str(tmp_path / "nothing.out"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"netbench.fleet.remeasure: {tmp_path / 'nothing.out'}: cannot read: "
        f"No such file or directory"]


# ---- item 12: strict JSON, -o '' -------------------------------------------------------

def strict_loads(text):
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_suspects_json_is_strict_json_whatever_the_references():
    verdict = judge.judge(make_fleet(4, 1, slow=["node01"]), reference_latency_us=float("nan"),
                          reference_bw_mbps=float("inf"), line_rate_mbps=float("nan"))
    data = strict_loads(verdict.to_json())
    assert data["suspects"] and all(s["reference"] is None for s in data["suspects"])
    assert suspects_format.strict_json({"x": float("nan")}) == '{\n  "x": null\n}\n'


def test_report_refuses_an_empty_output_folder(tmp_path, capsys, monkeypatch):
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(sweep_report([SUSPECT])))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert cli.main(["report", str(raw), "-o", ""]) == 2
    assert "--output" in one_line_error(capsys.readouterr().err)
    assert list(work.iterdir()) == []


# ---- item 5: a node that stopped answering (launcher output captured here) -----------

LOST_CASES = sorted(p.stem for p in DATA.glob("*.out") if not p.stem.startswith("finished"))


def test_the_captured_lost_node_cases_are_there():
    assert {"mpich-rank-killed", "openmpi-rank-killed", "openmpi-sshd-killed"} <= \
        set(LOST_CASES), LOST_CASES


@pytest.mark.parametrize("case", LOST_CASES)
def test_a_node_lost_mid_sweep_is_the_first_suspect(case):
    facts = json.loads((DATA / "cases.json").read_text())[case]
    out = (DATA / f"{case}.out").read_text()
    err = (DATA / f"{case}.err").read_text()
    sweep = parse_sweep(out)
    assert not sweep.finished
    lost = lost_hosts(sweep, f"{out}\n{err}")
    assert lost == [facts["lost"]]
    verdict = judge.judge(sweep.measurements(), lost=lost)
    first = verdict.suspects[0]
    assert (first.kind, first.names, first.direction) == ("node", (facts["lost"],),
                                                          "unreachable")
    # what its pairs measured before it went silent
    measured = {p for p in sweep.measurements() if facts["lost"] in p}
    assert {(e.src, e.dst) for e in first.evidence} == \
        {p for p in measured if sweep.measurements()[p]["bw_Mbps"]}
    assert first.value == len({tuple(sorted(p)) for p in measured})
    data = strict_loads(verdict.to_json())
    assert data["suspects"][0]["direction"] == "unreachable"
    script = drain.drain_script(verdict.suspects)
    assert f"# scontrol update NodeName={facts['lost']} State=DRAIN" in script
    assert "stopped answering mid-sweep" in reasons.unfinished([first], None, err)


def test_a_finished_sweep_lost_nobody():
    text = (Path(__file__).parent / "data" / "benchmark" / "sweep-4ranks.mpich-wheel.txt"
            ).read_text()
    sweep = parse_sweep(text)
    assert sweep.finished and lost_hosts(sweep, "Connection to x closed by remote host") == []


def test_the_benchmarks_own_message_is_the_reason():
    err = "# launch: mpirun ...\nnetbench: -m: expected 1 or more samples, got 0\nmore\n"
    assert reasons.unfinished([], None, err) == (
        "the benchmark did not finish its sweep: netbench: -m: expected 1 or more samples, "
        "got 0")
    assert reasons.unfinished([], "rank 1 (on n2) was killed by signal 9", "") == (
        "the benchmark did not finish its sweep: rank 1 (on n2) was killed by signal 9")
    # a node whose sshd is gone (hydra's stderr), after netbench's own notes
    err = ("# launch: ip netns exec nb-x-hd mpirun ...\n"
           "ssh: connect to host 198.18.1.13 port 22: Connection refused\n"
           "[mpiexec@vm] main (mpiexec.c:270): process manager error waiting for completion\n"
           "netbench.fleet.remeasure: rfm_job.out: the sweep did not finish: nothing is "
           "measured again\n")
    assert reasons.unfinished([], None, err) == (
        "the benchmark did not finish its sweep: ssh: connect to host 198.18.1.13 port 22: "
        "Connection refused")


def test_remeasure_judges_by_the_checks_references_and_profile(tmp_path):
    """The job's re-measurement holds pairs to the check's band: the
    references folder and judging profile it is given are the ones read
    (a broken one is named), never netbench's own in their place."""
    import shutil
    from netbench import paths
    text = (Path(__file__).parent / "data" / "benchmark" / "sweep-4ranks.mpich-wheel.txt"
            ).read_text()
    # (recorded with every rank on this host: one node each, as a sweep runs)
    for rank in range(4):
        text = text.replace(f"# rank {rank} host vm ", f"# rank {rank} host n{rank} ")
    path = sweep_output(tmp_path, text)
    default = run_remeasure(str(path))
    assert default.returncode == 0, default.stderr
    site = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, site, ignore=shutil.ignore_patterns("baselines"))
    same = run_remeasure("--references", str(site), "--profile", "virtual-cluster", str(path))
    assert same.returncode == 0, same.stderr
    knobs_file = site / "judging.yaml"
    knobs_file.write_text(knobs_file.read_text().replace("launches: 4 ", "launches: many "))
    broken = run_remeasure("--references", str(site), str(path))
    assert broken.returncode == 2 and broken.stdout == ""
    (line,) = broken.stderr.strip().splitlines()
    assert f"{site / 'judging.yaml'}: replicates" in line, line
    missing = run_remeasure("--profile", "no-such-profile", str(path))
    assert missing.returncode == 2 and "no-such-profile" in missing.stderr


def test_remeasure_refuses_ranks_that_share_a_host_with_one_line(tmp_path):
    """A sweep's ranks one a node: ranks sharing a host measure no link
    (the fleet's statistics once crashed on such output)."""
    text = (Path(__file__).parent / "data" / "benchmark" / "sweep-4ranks.mpich-wheel.txt"
            ).read_text()
    proc = run_remeasure(str(sweep_output(tmp_path, text)))
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "ranks 0, 1, 2, 3 ran on one host (vm)" in line, line
