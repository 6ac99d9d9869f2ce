"""Verdicts of whole sessions: the exit code tells a loss (1) from cases
that did not run to the end (2) and inconclusive cases (3), and a real
session ends inconclusive, reported as such, when its budget cannot
decide."""

import shutil

import pytest

from netbench import paths, report
from netbench.report import verdict
from netbench.rfm import session

SHM = "^PingPong%variant=blocking%transport=shm%placement=intranode$"


def case(result, phase=None, record=None):
    return {"name": "PingPong", "result": result, "fail_phase": phase,
            "record": record or {}}


def run_report(*cases):
    return {"runs": [{"testcases": list(cases)}]}


@pytest.mark.parametrize("cases, reframe_code, expected", [
    ([case("pass"), case("pass")], 0, 0),
    ([case("pass"), case("pass", record={"verdict": "inconclusive"})], 0, 3),
    ([case("fail", "performance"), case("pass", record={"verdict": "inconclusive"})], 1, 1),
    ([case("fail", "sanity")], 1, 2),
    ([case("fail", "setup"), case("fail", "run")], 1, 2),
    # a sweep's suspects and a container's parity are judged in sanity
    ([case("fail", "sanity", record={"verdict": "fail"}), case("fail", "run")], 1, 1),
    ([case("pass")], 130, 130),
])
def test_the_exit_code_tells_the_verdicts_apart(cases, reframe_code, expected):
    assert verdict.exit_code(run_report(*cases), reframe_code) == expected


def test_an_undecidable_case_is_inconclusive_never_pass_or_fail(tmp_path):
    """References whose peak no launch can reach, and a rule of one launch
    that needs two to fail: the budget is spent undecided.  ReFrame is told
    nothing it could pass or fail on; the record, the report and the exit
    code say inconclusive, naming the launches and the host's load."""
    judged_by = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, judged_by)
    (judged_by / "judging.yaml").write_text(
        "launches: 1\nmin_launches_to_fail: 2\nbaseline: {min_runs: 3, min_band: 0.05}\n"
        "contended_cpu_pressure: 25\ncontention_explains: 3\n")
    seed = judged_by / "seed000_e325_netpipe.yaml"
    seed.write_text(seed.read_text().replace("max_bandwidth_mbps: 7688",
                                             "max_bandwidth_mbps: 9999999"))
    proc = session.run_reframe("local", "-n", SHM, "-p", "^openmpi$", "-S",
                               f"thresholds_folder={judged_by}", timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == verdict.EXIT_INCONCLUSIVE, out[-3000:]
    (tc,) = [tc for run in session.latest_report()["runs"] for tc in run["testcases"]
             if tc["name"].startswith("PingPong")]
    record = tc["record"]
    assert record["verdict"] == "inconclusive", record.get("verdicts")
    peak = record["verdicts"]["peak_bw"]
    assert peak["verdict"] == "inconclusive" and peak["launches"] == 1
    assert "too noisy to tell" in peak["reason"] and "host load" in peak["reason"]
    assert len(record["runs"]["mpi"]) == 1
    # every column of the launch is kept, with its interval
    assert {"usec", "usec_lo", "usec_hi", "samples"} <= set(record["runs"]["mpi"][0]["rows"][0])
    # the run report: ReFrame judged nothing it could pass or fail on
    entry = next(v for k, v in tc["perfvalues"].items() if k.endswith(":peak_bw"))
    assert entry[2] is None and entry[3] is None
    s = report.load_session(paths.REPORTS / "latest" / "run-report.json")
    assert verdict.overall([s])["word"] == "inconclusive"
    (row,) = verdict.failures([s])
    assert row["stage"] == "inconclusive" and "peak_bw" in row["reason"]
    page = (paths.REPORTS / "latest" / "index.html").read_text()
    assert "Could not tell" in page and "inconclusive" in page
