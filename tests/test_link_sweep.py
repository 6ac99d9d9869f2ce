"""The fabric sweep on real virtual clusters (issue #17): 5 nodes on
emulated 1 Gbit/s links, both wheel MPIs.  A healthy cluster names nobody
(how often, over repeated sweeps quiet and busy, is `make bench-verdict`'s
sweep part); a node degraded on purpose (`vcluster fault`)
is named, and only it, in the case's reason, suspects.json, drain.sh and
the report's heat map; a one-way fault and a smaller MTU are named too; and
through the cluster's Slurm the sweep is one job whose suspects are the
same as over ssh.  A node whose rank is killed mid-sweep is the first
suspect, unreachable; bad parameters and a node without sshd fail with
the cause in the reason (#23)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import require
from netbench import paths, vcluster
from netbench.fleet import judge as fleet_judge
from netbench.rfm import session
from helpers import conditions_differed
from helpers.browser import chromium, run_chromium
from helpers.vcluster import cluster

NODES = 5
MPIS = "^(mpich|openmpi)$"
#: 1 MiB keeps each sweep short; the 8 MiB default is the same rule
SHORT = ["-S", "LinkSweep.sizes=1048576"]


def sweep(system, *extra):
    started = time.monotonic()
    proc = session.run_reframe(system, "-t", "sweep", "-p", MPIS, *SHORT, *extra,
                               timeout=900)
    return proc, time.monotonic() - started


def sweep_cases(report):
    return [tc for run in report["runs"][-1:] for tc in run["testcases"]
            if tc["name"].startswith("LinkSweep")]


def named(tc):
    """(kind, names, direction) of every suspect of a case."""
    return {(s["kind"], tuple(s["names"]), s["direction"])
            for s in tc["record"]["fleet"]["suspects"]}


def identified(tc):
    """named(tc), and the nodes the sweep left unconfirmed because the host's
    conditions differed from a quiet host's while it measured (the
    verdicts' own mechanism, judgement.conditions): a detection the host's
    noise cannot turn red, which must still name the right node."""
    unconfirmed = tc["record"]["fleet"].get("unconfirmed", [])
    if unconfirmed:
        assert conditions_differed(tc["record"]["host"]), tc["record"]["host"]
    return named(tc) | {(s["kind"], tuple(s["names"]), s["direction"]) for s in unconfirmed}


def exit_code_of(cases):
    """1 when a case named a suspect, 3 when every node named is unconfirmed."""
    return 1 if any(named(tc) for tc in cases) else 3


@pytest.fixture(scope="module")
def gige():
    with cluster("h3swp", nodes=NODES, rate="1gbit", mtu=9000) as state:
        yield state


def test_a_healthy_cluster_names_nobody(gige):
    proc, elapsed = sweep(gige["system"])
    assert proc.returncode == 0, proc.stdout[-4000:]
    cases = sweep_cases(session.latest_report())
    assert {tc["environ"] for tc in cases} == {"mpich", "openmpi"}
    for tc in cases:
        assert tc["result"] == "pass" and not named(tc), tc.get("fail_reason")
        fleet = tc["record"]["fleet"]
        assert len(fleet["hosts"]) == NODES
        assert len(fleet["pairs"]) == NODES * (NODES - 1)
    print(f"healthy sweep: {elapsed:.0f} s")


def degraded(state, node, **fault):
    vcluster.set_fault(state["name"], node, **fault)
    try:
        return sweep(state["system"])
    finally:
        vcluster.set_fault(state["name"], node, clear_fault=True)


def assert_confirmed_against_healthy(suspect, victim, healthy):
    """The suspect's confirmation (suspects.json's form): the victim's
    figures against healthy partners, each below its bound."""
    confirmation = suspect["confirmation"]
    assert confirmation["code"] == "slow_with_healthy_partners", confirmation
    partners = {e["dst"] if e["src"] == victim else e["src"] for e in confirmation["evidence"]}
    assert partners and partners <= healthy, confirmation
    assert all(e["value"] < e["bound"] for e in confirmation["evidence"]), confirmation


def test_a_node_at_a_third_of_the_rate_is_the_one_suspect(gige, tmp_path):
    victim = gige["nodes"][2]["name"]
    proc, elapsed = degraded(gige, "3", rate="333mbit", direction="both")
    # confirmed before blame (issue #36), named or left unconfirmed by a
    # busy host: measured again in the same job against healthy partners
    for tc in sweep_cases(session.latest_report()):
        fleet = tc["record"]["fleet"]
        mine = [s for s in fleet["suspects"] + fleet["unconfirmed"] if s["names"] == [victim]]
        assert mine, fleet
        assert_confirmed_against_healthy(mine[0], victim,
                                         {n["name"] for n in gige["nodes"]} - {victim})
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert elapsed < 120 * 2, elapsed       # two MPIs, within 2 minutes each
    cases = sweep_cases(session.latest_report())
    for tc in cases:
        assert named(tc) == {("node", (victim,), "both")}, tc["fail_reason"]
        assert f"node {victim} (both)" in tc["fail_reason"]
        evidence = tc["record"]["fleet"]["suspects"][0]["evidence"]
        assert all(victim in (e["src"], e["dst"]) for e in evidence)
    latest = paths.REPORTS / "latest"
    suspects = json.loads((latest / "suspects.json").read_text())
    assert {tuple(s["names"]) for sw in suspects["sweeps"] for s in sw["suspects"]} == \
        {(victim,)}
    healthy = {n["name"] for n in gige["nodes"]} - {victim}
    for sw in suspects["sweeps"]:
        assert_confirmed_against_healthy(sw["suspects"][0], victim, healthy)
    for tc in cases:
        assert "confirmed: bad with the healthy partners measured again" in tc["fail_reason"]
    script = (latest / "drain.sh").read_text()
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    drained = re.findall(r"^# scontrol update NodeName=(\S+) State=DRAIN", script, re.M)
    assert drained and set(drained) == {victim}, script
    page = (latest / "index.html").read_text()
    heat = page[page.index('id="sweep"'):]
    assert heat.count("<svg") == len(cases) and victim in heat
    # the heat maps render in a browser: Chromium's DOM holds them
    require(chromium() is not None, "Debian's chromium is not installed")
    dom = run_chromium((latest / "index.html").resolve().as_uri(), tmp_path / "profile",
                       "--dump-dom").stdout
    rendered = dom[dom.index('id="sweep"'):]
    assert rendered.count("<svg") == len(cases), dom[-2000:]


def test_a_fault_in_one_direction_is_named_with_its_direction(gige):
    victim = gige["nodes"][1]["name"]
    proc, _ = degraded(gige, "2", rate="333mbit", direction="out")
    cases = sweep_cases(session.latest_report())
    assert proc.returncode == exit_code_of(cases), proc.stdout[-4000:]
    for tc in cases:
        assert identified(tc) == {("node", (victim,), "egress")}, tc["fail_reason"]


def test_a_node_with_a_smaller_mtu_is_named(gige):
    """Jumbo frames everywhere but one node's interface at 1000 bytes: this
    host's per-packet cost holds its links near half the rate.  (At 1500
    they ran at 0.67-0.75 of it, on the band's edge: one run named the node,
    the next one pair.)"""
    victim = gige["nodes"][3]["name"]
    proc, _ = degraded(gige, "4", mtu=1000)
    cases = sweep_cases(session.latest_report())
    # CI, 2026-11-24: Open MPI's sweep left the node unconfirmed at CPU
    # pressure 27 % (MPICH's, at 22 %, named it)
    assert proc.returncode == exit_code_of(cases), proc.stdout[-4000:]
    for tc in cases:
        assert {names for _, names, _ in identified(tc)} == {(victim,)}, tc["fail_reason"]


def test_on_a_saturated_host_a_suspect_is_unconfirmed_and_nothing_is_drained(gige):
    """Both cores kept busy by other work while a node runs at a third of
    the rate: across links that emulate only their rate (the host's CPUs)
    the miss cannot be told from the contention.  The node is named as
    unconfirmed, the case is inconclusive (exit 3), and drain.sh drains
    nobody.  (A healthy 5-node sweep at load 4-9 named a pair at 0.58 and
    0.69 of the fleet median in both passes, in 2 of 5 runs.)"""
    victim = gige["nodes"][2]["name"]
    # one more spinner than cores: two on two cores read 55-66 % (saturated
    # from 50), a margin too thin for a test
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range((os.cpu_count() or 2) + 1)]
    try:
        time.sleep(10)              # the pressure's 10 s average sees them
        proc, _ = degraded(gige, "3", rate="333mbit", direction="both")
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    cases = sweep_cases(session.latest_report())
    assert proc.returncode == 3, proc.stdout[-4000:]
    for tc in cases:
        fleet, host = tc["record"]["fleet"], tc["record"]["host"]
        assert host["cpu_pressure"] >= 50, host          # saturated: any miss
        assert tc["result"] == "pass" and tc["record"]["verdict"] == "inconclusive", \
            (tc["environ"], tc["record"]["verdict"], tc["fail_reason"], fleet, host)
        assert fleet["suspects"] == [], fleet["suspects"]
        # the victim is named, as a node, and it is the furthest miss; at
        # the virtual cluster's 0.90 floor a saturated host can also leave a
        # healthy pair at 0.80-0.89 unconfirmed (CI, 2026-11-28), never a node
        named = {tuple(s["names"]): s for s in fleet["unconfirmed"] if s["kind"] == "node"}
        assert list(named) == [(victim,)], fleet["unconfirmed"]
        worst = max(fleet["unconfirmed"], key=miss_of)
        assert worst["names"] == [victim], fleet["unconfirmed"]
        reason = tc["record"]["verdicts"]["suspects"]["reason"]
        assert "waited for a CPU" in reason and victim in reason
    script = (paths.REPORTS / "latest" / "drain.sh").read_text()
    assert not re.findall(r"^# scontrol update", script, re.M), script
    page = (paths.REPORTS / "latest" / "index.html").read_text()
    assert "Unconfirmed, not drained" in page and victim in page


def miss_of(suspect):
    """How many times a recorded suspect's figure misses the fleet median."""
    return fleet_judge.miss_of_median(suspect["metric"], suspect["value"],
                                      suspect["fleet_median"])


#: how Slurm reports a rank that crashed before it measured anything
MPI_INIT_CRASH = "Segmentation fault"


def test_through_slurm_the_sweep_is_one_job_with_the_same_suspect():
    with cluster("tswsl", nodes=NODES, rate="1gbit", mtu=9000, slurm=True) as state:
        victim = state["nodes"][2]["name"]
        vcluster.set_fault(state["name"], "3", rate="333mbit", direction="both")
        proc = session.run_reframe(state["slurm"]["reframe"]["srun"], "-t", "sweep",
                                   "-p", MPIS, *SHORT, timeout=900)
        cases = sweep_cases(session.latest_report())
        if any(MPI_INIT_CRASH in (tc.get("fail_reason") or "") for tc in cases):
            # Open MPI 5.0.11 (wheel) under srun now and then segfaults in
            # MPI_Init (mca_pml_ob1_recv_frag_callback_match), before any
            # measurement: 2 of about 10 Slurm sweeps this session, never
            # the same node.  The launcher's crash is no verdict on the
            # fabric: once more, and it must hold then
            proc = session.run_reframe(state["slurm"]["reframe"]["srun"], "-t", "sweep",
                                       "-p", MPIS, *SHORT, timeout=900)
            cases = sweep_cases(session.latest_report())
        assert proc.returncode == 1, proc.stdout[-4000:]
        assert {tc["environ"] for tc in cases} == {"mpich", "openmpi"}
        for tc in cases:
            assert named(tc) == {("node", (victim,), "both")}, tc["fail_reason"]
            # one allocation of every node for the whole sweep
            assert tc["jobid"] and len(tc["job_nodelist"]) == NODES, tc["job_nodelist"]


# ---- a node lost mid-sweep, bad parameters, a node without sshd (#23) ------------

def benchmark_pids(namespace):
    """The benchmark's processes in one node's network namespace."""
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                            text=True).stdout.split()
    found = []
    for pid in listed:
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"/netbench") and argv[1:2] == [b"sweep"]:
            found.append(int(pid))
    return found


def kill_ranks_of(namespace, stop, after=1.0):
    """SIGKILL every benchmark rank that starts in `namespace`, `after`
    seconds into its run (the sweep has measured some pairs by then)."""
    seen = {}
    while not stop.is_set():
        now = time.monotonic()
        for pid in benchmark_pids(namespace):
            seen.setdefault(pid, now)
        for pid, started in list(seen.items()):
            if started is not None and now - started >= after:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                seen[pid] = None
        time.sleep(0.05)


@pytest.fixture(scope="module")
def lossy():
    """A cluster of its own (not gige's name, which other checkouts' runs
    of this file use at the same time)."""
    with cluster("tlost", nodes=NODES, rate="1gbit", mtu=9000) as state:
        yield state


def test_a_node_whose_rank_is_killed_mid_sweep_is_the_first_suspect(lossy, tmp_path):
    """MPICH's hydra names the dead process every time (PID, which the
    benchmark's header maps to its node): the node is the first suspect,
    unreachable, in the reason, suspects.json, drain.sh and the page.  Open
    MPI's prterun names it when it sees the death before a surviving rank's
    abort (tests/data/sweep_lost/); when the survivor wins that race its
    output names no lost node, and then no node may be named wrongly and
    the reason carries Open MPI's words.  The pairs measured before the
    loss were measured once: a slowed node's among them is never blamed
    (with enough pairs to judge, it is shown undecided)."""
    victim, slowed = lossy["nodes"][2], lossy["nodes"][4]["name"]
    # another node at a quarter of the rate: its pairs measured before the
    # loss are outside the band in the one pass there is
    vcluster.set_fault(lossy["name"], slowed, rate="250mbit", direction="both")
    stop = threading.Event()
    killer = threading.Thread(target=kill_ranks_of, args=(victim["namespace"], stop))
    killer.start()
    try:
        proc, _ = sweep(lossy["system"])
    finally:
        stop.set()
        killer.join()
        vcluster.set_fault(lossy["name"], slowed, clear_fault=True)
    assert proc.returncode == 1, proc.stdout[-4000:]      # a suspect named: a loss shown
    cases = {tc["environ"]: tc for tc in sweep_cases(session.latest_report())}
    assert set(cases) == {"mpich", "openmpi"}
    for environ, tc in cases.items():
        assert tc["result"] == "fail"
        assert len(tc["record"]["fleet"]["hosts"]) == NODES
        suspects = tc["record"]["fleet"]["suspects"]
        # one pass, cut short: what its pairs measured while the job went
        # down is undecided (fleet.not_retested), never a pair blamed
        assert {s["direction"] for s in suspects} <= {"unreachable"}, tc["fail_reason"]
        if environ == "openmpi" and not suspects:
            assert re.search(r"did not finish its sweep: \S", tc["fail_reason"]), \
                tc["fail_reason"]
            continue
        first = suspects[0]
        assert (first["kind"], first["names"], first["direction"]) == \
            ("node", [victim["name"]], "unreachable"), tc["fail_reason"]
        assert f"node {victim['name']} (unreachable): stopped answering mid-sweep" in \
            tc["fail_reason"]
        fleet = tc["record"]["fleet"]
        if fleet["unconfirmed"]:
            # listed beside the lost node, with why they are not named
            assert fleet["unconfirmed_why"].startswith(
                "outside the band in the one whole pass the sweep made"), fleet
    latest = paths.REPORTS / "latest"
    sweeps = json.loads((latest / "suspects.json").read_text())["sweeps"]
    mpich = next(sw for sw in sweeps if sw["environ"] == "mpich")
    assert (mpich["suspects"][0]["names"], mpich["suspects"][0]["direction"]) == \
        ([victim["name"]], "unreachable")
    assert len(mpich["nodes"]) == NODES
    script = (latest / "drain.sh").read_text()
    assert re.search(rf"^# scontrol update NodeName={victim['name']} State=DRAIN", script,
                     re.M), script
    assert set(re.findall(r"^# scontrol update NodeName=(\S+)", script, re.M)) == \
        {victim["name"]}, script
    page = (latest / "index.html").read_text()
    section = page[page.index('id="sweep"'):]
    assert f"{NODES} nodes" in section and victim["name"] in section
    assert "unreachable" in section
    for tc in cases.values():
        if tc["record"]["fleet"]["unconfirmed"]:
            assert ("Unconfirmed, not drained: outside the band in the one whole pass the "
                    "sweep made") in section


@pytest.mark.parametrize("setting,named", [("partners=-2", "LinkSweep.partners"),
                                           ("min_samples=0", "LinkSweep.min_samples")])
def test_a_bad_parameter_is_refused_naming_it(lossy, setting, named):
    proc, _ = sweep(lossy["system"], "-S", f"LinkSweep.{setting}")
    assert proc.returncode == 2, proc.stdout[-4000:]      # did not run to the end
    for tc in sweep_cases(session.latest_report()):
        assert named in tc["fail_reason"], tc["fail_reason"]
        assert "did not finish" not in tc["fail_reason"]


def test_a_node_without_sshd_fails_with_the_launchers_word():
    with cluster("tsshd", nodes=3, rate="1gbit", mtu=9000) as state:
        os.kill(state["nodes"][2]["sshd_pid"], signal.SIGKILL)
        proc, _ = sweep(state["system"])
        # the node is named unreachable (#36): a loss shown, not a run that
        # gave no answer
        assert proc.returncode == 1, proc.stdout[-4000:]
        name = state["nodes"][2]["name"]
        for tc in sweep_cases(session.latest_report()):
            assert tc["result"] == "fail" and tc["record"]["verdict"] == "fail"
            first = tc["record"]["fleet"]["suspects"][0]
            assert (first["names"], first["direction"]) == ([name], "unreachable"), \
                tc["fail_reason"]
            assert "Connection refused" in first["reason"], first


def test_a_node_whose_link_is_down_before_the_sweep_is_named_unreachable():
    """#36: the sweep failed with ssh's "No route to host" for an address,
    suspects.json named nobody and the case's record said "pass".  Now the
    node is the suspect, unreachable, by its name with ssh's words, and the
    record's verdict is the case's result."""
    with cluster("drdown", nodes=3, rate="1gbit", mtu=9000) as state:
        victim = state["nodes"][2]
        vcluster.set_fault(state["name"], "3", link_down=True)
        proc = session.run_reframe(state["system"], "-t", "sweep", "-p", "^mpich$", *SHORT,
                                   timeout=600)
        assert proc.returncode != 0, proc.stdout[-4000:]
        (tc,) = sweep_cases(session.latest_report())
        assert tc["result"] == "fail" and tc["record"]["verdict"] == "fail", tc["fail_reason"]
        first = tc["record"]["fleet"]["suspects"][0]
        assert (first["kind"], first["names"], first["direction"]) == \
            ("node", [victim["name"]], "unreachable"), tc["fail_reason"]
        assert "No route to host" in first["reason"], first
        assert f"node {victim['name']} (unreachable)" in tc["fail_reason"]
        sweeps = json.loads((paths.REPORTS / "latest" / "suspects.json").read_text())["sweeps"]
        (named_there,) = [s["names"] for s in sweeps[0]["suspects"]]
        assert named_there == [victim["name"]]
        # every node of the job, though no rank started to name the others
        assert sweeps[0]["nodes"] == [n["name"] for n in state["nodes"]]
