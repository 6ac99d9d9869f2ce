"""Verdicts of whole sessions: the exit code tells a loss (1) from cases
that did not run to the end (2) and inconclusive cases (3), and a real
session ends inconclusive, reported as such, when its budget cannot
decide."""

import contextlib
import copy
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from netbench import paths, report
from netbench.report import sessions, verdict
from netbench.rfm import session

from helpers import write_knobs

SHM = "^PingPong%variant=blocking%transport=shm%placement=intranode$"


CASE_NUMBERS = itertools.count()
def case(result, phase=None, record=None):
    """A case of its own (ReFrame's unique_name tells cases apart)."""
    return {"name": "PingPong", "unique_name": f"PingPong_{next(CASE_NUMBERS)}",
            "result": result, "fail_phase": phase, "record": record or {}}


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
    """References whose peak no launch can reach, under knobs by which any
    cache-line round trip between ranks 0 and 1 (the benchmark times one
    whenever they share a host) counts as ranks taking turns on a CPU, a
    condition that explains any CPU-bound miss (intranode peak bandwidth
    is the cores' copy): the figure misses in every launch but cannot be
    told from the conditions.  ReFrame is told nothing it could pass or
    fail on; the record, the report and the exit code say inconclusive,
    naming the condition."""
    judged_by = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, judged_by)
    write_knobs(judged_by, replicates={"launches": 2, "min_to_fail": 1},
                conditions={"time_slice_ns": 1})
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
    assert peak["verdict"] == "inconclusive" and peak["launches"] == 2
    assert peak["code"] == "conditions_differ", peak
    assert "time_sliced" in {d["code"] for d in peak["numbers"]["conditions"]}, peak
    assert "took turns on a CPU" in peak["reason"]
    assert len(record["runs"]["mpi"]) == 2
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


RETRIED = Path(__file__).parent / "data" / "verdict" / "retried-run-report.json"
FIRST_RUN_SLOW = Path(__file__).parent / "data" / "verdict" / "first_run_slow.py"


def test_the_last_run_of_a_retried_case_decides():
    """A real session with --max-retries 1 (tests/data/verdict): the case
    failed in performance, passed on its retry; ReFrame said PASSED."""
    report = json.loads(RETRIED.read_text())
    first, retry = ([tc["result"] for tc in run["testcases"]] for run in report["runs"])
    assert first == ["fail"] and retry == ["pass"]
    assert verdict.exit_code(report, 0) == verdict.EXIT_PASS
    # the page says the same of it
    (tc,) = sessions.Session(report, {}, str(RETRIED)).testcases
    assert tc["result"] == "pass"
    # failed again on its retry: a loss shown
    again = copy.deepcopy(report)
    again["runs"][1]["testcases"][0].update(result="fail", fail_phase="performance")
    assert verdict.exit_code(again, 1) == verdict.EXIT_LOSS


def test_a_case_aborted_showed_no_loss():
    report = run_report(case("pass"), case("abort"))
    assert verdict.exit_code(report, 1) == verdict.EXIT_NOT_RUN
    # nor a pass: the headline says the session did not finish
    found = verdict.overall([sessions.Session(report, {}, "")])
    assert (found["word"], found["aborted"]) == ("unfinished", 1), found
    assert found["text"].startswith("Not finished: 1 of 2 cases were stopped")


def reframe(*args, marker, popen=False, tmpdir=None):
    """ReFrame with netbench's configuration on the tiny check of
    tests/data/verdict, as a user runs it; `tmpdir`: its TMPDIR."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    if tmpdir:
        clean["TMPDIR"] = str(tmpdir)
    argv = [str(session.BIN / "reframe"), "-C", str(paths.CONFIG), "-c", str(FIRST_RUN_SLOW),
            "-p", "^openmpi$", "-S", f"marker={marker}", *args]
    if popen:
        return subprocess.Popen(argv, cwd=paths.REPO, env=clean, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(argv, cwd=paths.REPO, env=clean, capture_output=True, text=True,
                          timeout=600)


def start_up_logs(tmpdir):
    """The logs ReFrame makes of its start-up in its TMPDIR
    (rfm.logs.remove_the_start_up_log_at_exit)."""
    return sorted(path.name for path in tmpdir.glob("rfm-*.log"))


def test_a_case_that_passed_on_its_retry_exits_0(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = reframe("--system", "local", "-r", "--max-retries", "1",
                   marker=tmp_path / "marker", tmpdir=tmpdir)
    out = proc.stdout + proc.stderr
    assert "retried 1 time(s) and  passed" in out, out[-3000:]
    assert proc.returncode == verdict.EXIT_PASS, out[-3000:]
    # the session's log is in the checkout: the start-up's is gone
    assert start_up_logs(tmpdir) == [], out[-3000:]


@pytest.mark.parametrize("args", [["--system", "local", "-n", "NoSuchCheck", "-r"],
                                  ["--system", "nosuchsystem", "-r"]])
def test_a_session_that_ran_no_case_is_not_a_loss(tmp_path, args):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = reframe(*args, marker=tmp_path / "marker", tmpdir=tmpdir)
    out = proc.stdout + proc.stderr
    assert proc.returncode == verdict.EXIT_NOT_RUN, out[-3000:]
    assert not (tmp_path / "marker").exists()
    if "nosuchsystem" in args:
        # the configuration never loaded: the start-up's log is the one
        # ReFrame names, and it stays
        assert [f"Log file(s) saved in '{tmpdir / name}'" for name in start_up_logs(tmpdir)] \
            == [line for line in out.splitlines() if line.startswith("Log file(s)")], out
    else:
        assert start_up_logs(tmpdir) == [], out[-3000:]


def processes_naming(text):
    """The processes whose command line holds `text`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and text.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_an_interrupted_session_exits_130(tmp_path):
    """Ctrl-C while a case runs: ReFrame aborts it and exits 1; no loss was
    shown, the session was interrupted.  Nothing of the launch outlives it:
    ReFrame SIGKILLs the job's process group as soon as the job script's
    shell has exited, and the Open MPI rank (a process group of its own) was
    left running with the launch's TMPDIR (CI, 2026-11-28)."""
    marker = tmp_path / "marker"
    marker.touch()               # the case would pass
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = reframe("--system", "local", "-r", "-S", "sleep=120", marker=marker, popen=True,
                   tmpdir=tmpdir)
    try:
        seen = ""
        while "RUN" not in seen:
            line = proc.stdout.readline()
            assert line, seen[-3000:]
            seen += line
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            session.stop_gracefully(proc)
    assert "ABORT" in seen + out, (seen + out)[-3000:]
    assert proc.returncode == verdict.EXIT_INTERRUPTED == 130, (seen + out)[-3000:]
    assert "netbench: Interrupted: 0 of 1 cases ran (Ctrl-C)" in out, out[-3000:]
    # the launch ends after ReFrame: give it the supervisor's few seconds
    deadline = time.monotonic() + 15
    while (processes_naming(str(marker)) or list(tmpdir.glob("netbench-launch-*"))) \
            and time.monotonic() < deadline:
        time.sleep(0.5)
    left = processes_naming(str(marker))
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert left == [] and list(tmpdir.glob("netbench-launch-*")) == []
    assert start_up_logs(tmpdir) == []
