"""A case that no documented threshold judges fails, saying why, instead of
passing against reference 0 without bounds (issue #14, 6).

The checks read their thresholds from `thresholds_folder` (a ReFrame
variable, `-S thresholds_folder=DIR`): these tests judge the local
partition (class `intranode`) by copies of reframe_checks/references that
lack what it needs."""

import json
import shutil

import pytest
import yaml

from netbench import paths
from netbench.rfm import session

PINGPONG_SHM = "^PingPong%variant=blocking%transport=shm%placement=intranode$"
SENDRECV_SHM = "^Throughput%pattern=sendrecv%ranks=2%transport=shm%placement=intranode$"
TCP_BUFFERS = "^TcpSocketBuffer%sockbuf=(0|16384)%placement=intranode$"


def references_copy(folder, edit):
    shutil.copytree(paths.REFERENCES, folder)
    path = folder / "thresholds.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["classes"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def run(folder, *names):
    selection = [arg for name in names for arg in ("-n", name)]
    proc = session.run_reframe("local", *selection, "-p", "^mpich$",
                               "-S", f"thresholds_folder={folder}", "-S", "budget=0.02",
                               "--report-file", str(folder / "report.json"), timeout=900)
    report = json.loads((folder / "report.json").read_text())
    cases = {label(tc): tc for run in report["runs"] for tc in run["testcases"]
             if not tc["name"].startswith("NetbenchBuild")}
    return proc, cases


def label(tc):
    """PingPong, Throughput, TcpSocketBuffer (autotuned) or TcpSocketBuffer-16384."""
    name = tc["name"].split()[0]
    return f"{name}-16384" if "sockbuf=16384" in tc["display_name"] else name


@pytest.fixture
def without_class(tmp_path):
    """Thresholds without the local partition's class."""
    return references_copy(tmp_path / "refs", lambda classes: classes.pop("intranode"))


def test_a_class_without_thresholds_fails_every_case(without_class):
    proc, cases = run(without_class, PINGPONG_SHM, SENDRECV_SHM, TCP_BUFFERS)
    out = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode != 0, out
    assert sorted(cases) == ["PingPong", "TcpSocketBuffer", "TcpSocketBuffer-16384",
                             "Throughput"], out
    for name in ("PingPong", "TcpSocketBuffer", "Throughput"):
        tc = cases[name]
        assert tc["result"] == "fail", (tc["display_name"], out)
        assert tc["fail_phase"] == "sanity", (tc["display_name"], tc["fail_reason"])
        assert tc["fail_reason"].startswith(
            f"sanity error: not judged: interconnect class 'intranode' is not in "
            f"{without_class / 'thresholds.yaml'} (classes: "), (name, tc["fail_reason"])
    # the socket-buffer sweep beside the autotuned case is informational by
    # design: it is held to nothing, wherever it runs
    sweep = cases["TcpSocketBuffer-16384"]
    assert "not judged" not in (sweep["fail_reason"] or ""), sweep["fail_reason"]


def test_a_class_lacking_a_documented_group_fails_that_case(tmp_path):
    """`intranode` without TCP rows: the raw TCP run is not judged (other
    classes document it), MPI's shared memory still is; the Sendrecv chain
    is informational (no class documents collectives)."""
    folder = references_copy(tmp_path / "refs",
                             lambda classes: classes["intranode"].pop("tcp"))
    proc, by_name = run(folder, PINGPONG_SHM, SENDRECV_SHM, TCP_BUFFERS)
    out = proc.stdout[-4000:]
    tcp = by_name["TcpSocketBuffer"]
    assert tcp["result"] == "fail", out
    assert tcp["fail_reason"].startswith(
        "sanity error: not judged: interconnect class 'intranode' has no tcp thresholds "
        "for transport raw in "), tcp["fail_reason"]
    # judged by the copy's shared-memory rows (a failure here would be the
    # machine's load, not the judging: only its reason is checked)
    for name in ("PingPong", "Throughput", "TcpSocketBuffer-16384"):
        assert "not judged" not in (by_name[name]["fail_reason"] or ""), name
    assert by_name["PingPong"]["perfvalues"]["local:node:latency"][1] > 0
