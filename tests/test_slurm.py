"""Slurm on the virtual cluster, for real: munged, slurmctld on a controller
namespace, a slurmd in every node; ReFrame submits through sbatch and its
`squeue` scheduler, ranks start through srun (PMI-2 for MPICH, PMIx for Open
MPI) or through the MPI's own launcher inside the allocation.  Failures
(a rank that dies, a node whose link goes down, the time limit) must come
back as failed checks with Slurm's reason, and the session goes on."""

import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest

from conftest import require
from netbench import checks, paths, vcluster
from helpers import conditions_differed
from netbench.rfm.session import NO_FAILURE, latest_report, run_reframe
from netbench.vcluster import netns, slurm
from helpers.reports import sweep_report
from helpers.suite import cases_of, perf
from netbench.report import publish
from helpers.vcluster import NETBENCH, cluster, netbench_cli

MiB = 1024 * 1024
SHORT = ["-S", "budget=0.01", "-S", "max_bytes=1048576"]


def slurm_environment(state):
    """What a Slurm client of this cluster needs."""
    return {"SLURM_CONF": state["slurm"]["conf"]}


def slurm_pids(state):
    """The daemons of the cluster's Slurm."""
    return list(state.get("slurm", {}).get("pids", {}).values())


def namespace_pids(ns):
    """The processes in network namespace `ns`, by the namespace's identity."""
    wanted = netns.namespace_id(f"/run/netns/{ns}")
    return [pid for pid in netns.all_pids() if wanted and
            netns.namespace_id(f"/proc/{pid}/ns/net") == wanted]


def require_slurm():
    require(all(shutil.which(tool) for tool in (*slurm.DAEMONS, *slurm.CLIENTS)),
            "Slurm missing: apt-get install slurm-wlm munge")


def slurm_cmd(state, *argv, timeout=30):
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **slurm_environment(state)})


def node_states(state):
    out = slurm_cmd(state, "sinfo", "-h", "-N", "-o", "%N %T").stdout
    return dict(line.split() for line in out.splitlines())


#: the module's Slurm cluster
SLURMED = "h2slrm"


@pytest.fixture(scope="module")
def slurm_cluster():
    """A 3-node cluster with Slurm for the module; its bring-up is timed."""
    require_slurm()
    started = time.monotonic()
    with cluster(SLURMED, nodes=3, slurm=True, rate="1gbit", mtu=9000) as state:
        state["bringup_s"] = time.monotonic() - started
        yield state
    assert not any(netns.alive(pid) for pid in slurm_pids(state))


def test_bring_up_shows_the_nodes_in_sinfo_and_status(slurm_cluster):
    state = slurm_cluster
    print(f"Slurm on 3 nodes up in {state['bringup_s']:.1f} s")
    assert state["bringup_s"] < 15
    assert node_states(state) == {f"{SLURMED}-n{i}": "idle" for i in (1, 2, 3)}
    # jobs run inside the nodes: their hostnames, not the host's
    hosts = slurm_cmd(state, "srun", "-N3", "hostname").stdout.split()
    assert sorted(hosts) == [f"{SLURMED}-n{i}" for i in (1, 2, 3)]
    status = json.loads(netbench_cli("vcluster", "status", "--json").stdout)
    mine = next(c for c in status if c["name"] == SLURMED)
    assert mine["healthy"], mine["problems"]
    assert mine["slurm"]["conf"] == state["files"]["slurm_conf"]
    # configuration, state, spool and key: root's, in the cluster's folder
    assert mine["slurm"]["conf"] == f"{vcluster.CLUSTERS}/{SLURMED}/slurm/slurm.conf"
    key = os.stat(f"{vcluster.CLUSTERS}/{SLURMED}/slurm/munge/munge.key")
    assert key.st_uid == 0 and key.st_mode & 0o777 == 0o600
    settings = dict(line.split("=", 1) for line in open(mine["slurm"]["conf"])
                    if "=" in line and not line.startswith(("#", "NodeName", "PartitionName")))
    # not Slurm's default ports (6817, 6818)
    assert (settings["SlurmctldPort"].strip(), settings["SlurmdPort"].strip()) == (
        str(slurm.CTLD_PORT), str(slurm.SLURMD_PORT))
    # the controller listens in its own namespace, on no address of the host
    assert mine["slurm"]["controller"]["namespace"] in netns.namespaces()
    listening = subprocess.run(["ss", "-Htln"], capture_output=True, text=True).stdout
    assert f":{slurm.CTLD_PORT} " not in listening


@pytest.mark.parametrize("path", ["srun", "mpirun"])
def test_internode_checks_run_through_slurm_on_both_mpis(slurm_cluster, path):
    state = slurm_cluster
    system = state["slurm"]["reframe"][path]
    # (native is left out: on namespace nodes of one host the MPICH wheel's
    # UCX takes shared memory, which test_provenance_live proves fails)
    # seed 002's per-node layouts at their widest, one and two ranks a
    # node on all three nodes: the two-node allocations are the ping-pongs'
    proc = run_reframe(system, "-p", "^(mpich|openmpi)$",
                       "-n", "^PingPong%variant=blocking",
                       "-n", "ThroughputPerNode%pattern=sendrecv%layout=(1ppn-3|2ppn-6)",
                       "-n", "^MtuPingPong%mtu=(1500|9000)%variant=blocking",
                       "-x", "intranode|shm|native", *SHORT)
    out = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode in NO_FAILURE, out
    cases = [tc for tc in cases_of(latest_report()) if tc["result"] != "skip"]
    assert all(tc["result"] == "pass" for tc in cases), out
    assert {f'{tc["system"]}:{tc["partition"]}' for tc in cases} == {system}
    assert {tc["environ"] for tc in cases} == {"mpich", "openmpi"}
    names = {tc["name"].split()[0] for tc in cases}
    assert names == {"PingPong", "ThroughputPerNode", "MtuPingPong"}, names
    for tc in cases:
        # the bytes crossed the veths (counted on the host)
        assert perf(tc, "link_traffic") > 2 * MiB / 1e6, tc["display_name"]
        job = os.path.join(tc["outputdir"], "rfm_job.sh")
        script = open(job).read()
        assert "#SBATCH --exclusive" in script and "#SBATCH --time=" in script
        assert f"#SBATCH --partition={state['slurm']['partition']}" in script
        mpi_type = {"mpich": "pmi2", "openmpi": "pmix"}[tc["environ"]]
        assert f"export SLURM_MPI_TYPE={mpi_type}" in script
        launcher = "srun " if path == "srun" else "netbench.rfm.launch --allocation"
        assert launcher in script, script
    # the MTU checks change the host's links from a job inside a node: each
    # job says so on its stderr (the set_mtu command fails the job if a
    # link refuses), and the bytes crossed those links.  Seed 004's claim,
    # that jumbo frames win, is test_vcluster_suite's, on its full sweep: on a
    # shaped link the gain is the headers' few per cent, which this short
    # sweep's spread on a busy host can hide (docs/validation.md)
    mtu_cases = [tc for tc in cases if tc["name"].startswith("MtuPingPong")]
    assert {(tc["environ"], tc["mtu"]) for tc in mtu_cases} == {
        (env, mtu) for env in ("mpich", "openmpi") for mtu in (1500, 9000)}
    for tc in mtu_cases:
        said = open(os.path.join(tc["outputdir"], "rfm_job.err")).read()
        assert f"MTU {tc['mtu']} on every link" in said, (tc["display_name"], said[-2000:])
        assert perf(tc, "bw_1MiB") > 0
    # seed 002's layouts: one and two processes per node, placed by Slurm
    per_node = {tc["num_tasks_per_node"] for tc in cases
                if tc["name"].startswith("ThroughputPerNode")}
    assert per_node == {1, 2}
    assert {tc["num_tasks"] // tc["num_tasks_per_node"] for tc in cases
            if tc["name"].startswith("ThroughputPerNode")} == {3}


def until(find, timeout, what):
    """find()'s first answer that is not empty, asked every 0.2 s;
    AssertionError saying `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(what)


def next_running_job(state, seen):
    """(job id, name, nodes) of a running job not in `seen`, or None."""
    out = slurm_cmd(state, "squeue", "-h", "-t", "R", "-o", "%i|%j|%N").stdout
    for line in out.splitlines():
        jobid, name, nodes = line.split("|")
        if jobid not in seen:
            return jobid, name, slurm_cmd(state, "scontrol", "show", "hostnames",
                                          nodes).stdout.split()
    return None


def wait_for_running_job(state, seen, timeout=60):
    """(job id, name, nodes) of the next job that runs, not in `seen`."""
    return until(lambda: next_running_job(state, seen), timeout, "no job started running")


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:             # it ended meanwhile
        return None


def rank_pids(state, node_name):
    """The benchmark's ranks in a node."""
    node = next(n for n in state["nodes"] if n["name"] == node_name)
    return [pid for pid in namespace_pids(node["namespace"]) if comm(pid) == "netbench"]


def wait_for_rank(state, node_name, timeout=30):
    until(lambda: rank_pids(state, node_name), timeout, f"no netbench rank in {node_name}")


def kill_rank(state, node_name):
    """SIGKILL the benchmark's rank in a node (a rank that dies)."""
    pids = rank_pids(state, node_name)
    assert pids, f"no netbench rank in {node_name}"
    os.kill(pids[0], 9)


def test_a_dying_rank_and_a_failing_node_come_back_as_failures(slurm_cluster):
    """Two long runs in one session: the first loses a rank, the second a
    node (its link goes down).  Both fail with Slurm's reason, the second
    runs although the first failed, and nothing waits for the time limit."""
    state = slurm_cluster
    actions = {}

    def sabotage():
        seen = set()
        for action in ("kill_rank", "link_down"):
            jobid, _, nodes = wait_for_running_job(state, seen)
            seen.add(jobid)
            time.sleep(1.5)             # the ranks are up and talking
            victim = nodes[-1]
            if action == "kill_rank":
                kill_rank(state, victim)
            else:
                node = next(n for n in state["nodes"] if n["name"] == victim)
                netns.run(["ip", "link", "set", node["veth"], "down"])
            actions[jobid] = (action, victim)

    saboteur = threading.Thread(target=sabotage, daemon=True)
    saboteur.start()
    started = time.monotonic()
    try:
        proc = run_reframe(state["slurm"]["reframe"]["srun"], "-p", "^(mpich|openmpi)$",
                           "-n", "^PingPong%variant=blocking%transport=ofi-tcp",
                           "-x", "intranode", "-S", "budget=20")
        elapsed = time.monotonic() - started
        saboteur.join(timeout=5)
    finally:
        for node in state["nodes"]:
            netns.run(["ip", "link", "set", node["veth"], "up"])
    out = proc.stdout[-5000:] + proc.stderr[-2000:]
    assert len(actions) == 2, out
    cases = [tc for tc in cases_of(latest_report())]
    assert len(cases) == 2 and all(tc["result"] == "fail" for tc in cases), out
    for tc in cases:
        action, victim = actions[str(tc["jobid"])]
        assert tc["fail_phase"] == "sanity"
        if action == "kill_rank":
            assert f"Slurm ended the job: {victim}: task 1: Killed" in tc["fail_reason"]
        else:
            assert "DUE TO NODE FAILURE" in tc["fail_reason"], tc["fail_reason"]
            assert f"Node failure on {victim}" in tc["fail_reason"], tc["fail_reason"]
    # well before the checks' 2-minute time limit, each
    print(f"two sabotaged runs ended in {elapsed:.0f} s")
    assert elapsed < 120
    # the node rejoins once its link is back (ReturnToService=2), when the
    # controller's next ping reaches it: 30 s was too short on a loaded host
    deadline = time.monotonic() + 90
    while set(node_states(state).values()) != {"idle"} and time.monotonic() < deadline:
        time.sleep(1)
    assert set(node_states(state).values()) == {"idle"}, node_states(state)


def test_the_time_limit_ends_a_job_that_runs_too_long(slurm_cluster):
    """A job past its time limit is ended by Slurm, and the case says so.
    The check asks for 1 minute (Slurm counts in whole minutes); once the
    job runs, the test sets its limit to 0, as an administrator may, so
    that Slurm ends it at its next look at the limits (every 30 s) instead
    of a minute and up to 30 s later: the same end, TIMEOUT, sooner."""
    state = slurm_cluster
    ended = {}

    def end_its_time():
        try:
            jobid, _, nodes = wait_for_running_job(state, set())
            # once its step runs: a job ended before would say that its
            # step could not be created
            wait_for_rank(state, nodes[-1])
            ended["update"] = slurm_cmd(state, "scontrol", "update", f"JobId={jobid}",
                                        "TimeLimit=0")
        except AssertionError as err:   # said by the test, not lost in the thread
            ended["error"] = str(err)

    limiter = threading.Thread(target=end_its_time, daemon=True)
    limiter.start()
    started = time.monotonic()
    proc = run_reframe(state["slurm"]["reframe"]["srun"], "-p", "^mpich$",
                       "-n", "^PingPong%variant=blocking%transport=ofi-tcp", "-x", "intranode",
                       "-S", "budget=1000", "-S", "time_limit=1m")
    elapsed = time.monotonic() - started
    limiter.join(timeout=5)
    print(f"a job whose limit was set to 0 ended after {elapsed:.0f} s")
    assert "update" in ended, ended.get("error", "the limit was never set")
    assert ended["update"].returncode == 0, ended["update"].stderr
    (case,) = cases_of(latest_report())
    script = open(os.path.join(case["stagedir"], "rfm_job.sh")).read()
    assert "#SBATCH --time=0:1:0" in script, script
    assert case["result"] == "fail", proc.stdout[-3000:]
    assert "Slurm ended the job: DUE TO TIME LIMIT" in case["fail_reason"]
    assert elapsed < 90


def another_cluster_s_conf(folder):
    """The slurm.conf of a cluster that is not up, a file as another
    cluster's is: a missing one makes Slurm's clients retry it for a minute
    (ReFrame's `srun --version` at setup, before the check's refusal)."""
    other = {"name": "other", "folder": str(folder), "network": "198.18.250.0/24",
             "nodes": [{"name": "other-n1", "address": "198.18.250.11"}]}
    return slurm.write_config(other, {"name": "other-ctl", "address": "198.18.250.2"},
                              folder / "slurm")


def test_checks_refuse_a_slurm_conf_of_another_cluster(slurm_cluster, tmp_path):
    state = slurm_cluster
    proc = run_reframe(state["slurm"]["reframe"]["srun"], "-p", "^mpich$",
                       "-n", "^PingPong%variant=blocking%transport=ofi-tcp", "-x", "intranode",
                       *SHORT, env={"SLURM_CONF": str(another_cluster_s_conf(tmp_path))})
    (case,) = cases_of(latest_report())
    assert proc.returncode != 0 and case["result"] == "fail"
    assert f"export SLURM_CONF={state['slurm']['conf']}" in case["fail_reason"]


# ---- without root: the configuration and the failure reasons --------------------

def test_slurm_conf_names_every_node_with_its_address_and_project_paths(tmp_path):
    state = {"name": "demo", "folder": str(tmp_path), "network": "198.18.7.0/24",
             "nodes": [{"name": "demo-n1", "address": "198.18.7.11"},
                       {"name": "demo-n2", "address": "198.18.7.12"}]}
    ctl = {"name": "demo-ctl", "address": "198.18.7.2"}
    conf = slurm.write_config(state, ctl, tmp_path / "slurm").read_text()
    assert "SlurmctldHost=demo-ctl(198.18.7.2)" in conf
    assert "NodeName=demo-n1 NodeAddr=198.18.7.11" in conf
    assert "NodeName=demo-n2 NodeAddr=198.18.7.12" in conf
    assert "PartitionName=demo Nodes=demo-n1,demo-n2" in conf
    assert f"AuthInfo=socket={tmp_path}/slurm/munge/munge.socket" in conf
    assert "AccountingStorageType=accounting_storage/none" in conf
    for line in conf.splitlines():
        if line.split("=")[0] in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldLogFile"):
            assert line.split("=", 1)[1].startswith(str(tmp_path))
    key = tmp_path / "slurm" / "munge" / "munge.key"
    assert key.stat().st_mode & 0o777 == 0o600 and key.stat().st_size == 1024


@pytest.mark.parametrize("stderr,reason", [
    # real job stderr of the runs above (a node whose link went down; a
    # rank killed, its peer exiting after it; the time limit)
    ("srun: error: Node failure on sl-n2\n"
     "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
     "slurmstepd-sl-n1: error: *** JOB 13 ON sl-n1 CANCELLED AT 2026-11-21T11:12:44 DUE TO "
     "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
     "srun: error: sl-n1: task 0: Terminated\n",
     "DUE TO NODE FAILURE; Node failure on sl-n2"),
    ("srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
     "srun: error: sl-n1: task 0: Exited with exit code 14\n"
     "srun: error: sl-n2: task 1: Killed\n",
     "sl-n2: task 1: Killed"),
    ("slurmstepd-sl-n1: error: *** JOB 15 ON sl-n1 CANCELLED AT 2026-11-21T11:14:41 DUE TO "
     "TIME LIMIT ***\n"
     "srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
     "slurmstepd-sl-n1: error: *** STEP 15.0 ON sl-n1 CANCELLED AT 2026-11-21T11:14:41 DUE TO "
     "TIME LIMIT ***\n"
     "srun: got SIGCONT\nsrun: forcing job termination\n"
     "srun: error: sl-n1: task 0: Terminated\n"
     "srun: launch/slurm: _step_signal: Terminating StepId=15.0\n"
     "srun: error: sl-n2: task 1: Terminated\n", "DUE TO TIME LIMIT"),
    # MPICH's UCX address refused by Slurm's PMI-2 server (CI, intermittent):
    # the tasks' exit code 15 says nothing; the server's line does
    ("slurmstepd-tslurm-n2: error: mpi/pmi2: value not properly terminated in client request\n"
     "slurmstepd-tslurm-n1: error: mpi/pmi2: value not properly terminated in client request\n"
     "slurmstepd-tslurm-n1: error: mpi/pmi2: request not begin with 'cmd='\n"
     "srun: error: tslurm-n1: task 0: Exited with exit code 15\n"
     "srun: launch/slurm: _step_signal: Terminating StepId=9.1\n"
     "srun: error: tslurm-n2: task 1: Terminated\n",
     "mpi/pmi2: value not properly terminated in client request"),
    ("# launch: mpirun -np 2 ./netbench\n", None),
])
def test_slurm_failure_reason_names_the_cause(stderr, reason):
    assert checks.slurm_failure(stderr) == reason


# ---- netbench drain and resume: the Slurm loop closed (#36) --------------------

def drain_cli(state, *args):
    return netbench_cli(*args, env={**os.environ, **slurm_environment(state)})


def node_reasons(state):
    """{node: (state, reason)} as sinfo shows them (without the `*` of a
    node that missed the controller's last ping: a loaded host's)."""
    out = slurm_cmd(state, "sinfo", "-h", "-N", "-o", "%N|%T|%E").stdout
    return {name: (st.rstrip("*"), reason) for name, st, reason in
            (line.split("|", 2) for line in out.splitlines())}


def test_drain_and_resume_close_the_loop_and_leave_the_administrator_s_node(tmp_path):
    """A node at a third of the rate is named by a sweep through Slurm,
    drained by `netbench drain` with netbench's reason; a node an
    administrator drained keeps its state and reason through drain and
    resume; while the fault lasts the node fails its re-test and stays
    drained; once it is cleared `netbench resume` returns it, with the
    evidence in its report."""
    require_slurm()
    with cluster("h2drlp", nodes=4, slurm=True, rate="100mbit") as state:
        victim, admins = state["nodes"][2]["name"], state["nodes"][1]["name"]
        vcluster.set_fault(state["name"], "3", rate="33mbit")
        # this cluster's Slurm, named: the module's other cluster may be up;
        # 64 KiB streams reach the 100 Mbit/s links' rate, as 1 MiB ones, sooner
        proc = run_reframe(state["slurm"]["reframe"]["srun"], "-t", "sweep", "-p", "^mpich$",
                           "-S", "LinkSweep.sizes=65536", timeout=600,
                           env=slurm_environment(state))
        (case,) = [tc for tc in cases_of(latest_report()) if tc["name"].startswith("LinkSweep")]
        fleet = case["record"]["fleet"]
        report = paths.REPORTS / "latest"
        session = json.loads((report / "suspects.json").read_text())["session"]
        if not fleet["suspects"] and fleet.get("unconfirmed"):
            # a saturated host leaves the suspect unconfirmed (named, not
            # drained: fleet.judge.unconfirmed), and its CPU load is the
            # other developers' to choose: the sweep's own measured
            # suspect, as a quiet host would have named it, is the report
            assert conditions_differed(case["record"]["host"]), case["record"]["host"]
            # drain takes a published session alone: the run report with
            # those suspects, published beside the tests' own
            data = latest_report()
            for tc in cases_of(data):
                if tc["name"].startswith("LinkSweep"):
                    tc["record"]["fleet"]["suspects"] = fleet["unconfirmed"]
            raw = tmp_path / "run-report.json"
            raw.write_text(json.dumps(data))
            (tmp_path / "reports").mkdir()
            report = publish(raw, tmp_path / "reports", results_db=tmp_path / "none.db")
            session = report.name
            fleet = {**fleet, "suspects": fleet["unconfirmed"]}
        assert [s["names"] for s in fleet["suspects"]] == [[victim]], proc.stdout[-3000:]
        slurm_cmd(state, "scontrol", "update", f"nodename={admins}", "state=drain",
                  "reason=admin: bad DIMM")
        admin_before = node_reasons(state)[admins]

        shown = drain_cli(state, "drain", str(report), "--dry-run")
        assert shown.returncode == 0, shown.stderr
        assert f"would run: scontrol update nodename={victim} state=drain" in shown.stdout
        assert node_reasons(state)[victim][0] == "idle"          # a dry run changes nothing
        done = drain_cli(state, "drain", str(report))
        assert done.returncode == 0, done.stdout + done.stderr
        st, reason = node_reasons(state)[victim]
        assert st.startswith("drain") and reason.startswith(f"netbench: {session}: "), reason
        assert node_reasons(state)[admins] == admin_before

        evidence = tmp_path / "resume.json"
        failed = drain_cli(state, "resume", "--system", state["system"], "--evidence", str(evidence))
        st, reason = node_reasons(state)[victim]
        assert st.startswith("drain") and reason.startswith("netbench: "), reason
        if failed.returncode == 3:
            # a saturated host: the re-test is judged with the sweep's
            # conditions rule, as the sweep is above, and decides nothing
            assert_undecided_by_the_host(evidence, victim, failed)
        else:
            assert failed.returncode == 1, failed.stdout + failed.stderr
            assert f"{victim}: fail against" in failed.stdout, failed.stdout

        vcluster.set_fault(state["name"], "3", clear_fault=True)
        passed = drain_cli(state, "resume", "--system", state["system"], "--evidence", str(evidence))
        assert node_reasons(state)[admins] == admin_before
        assert f"left alone: {admins} is drained by someone else (admin: bad DIMM)" in \
            passed.stdout
        if passed.returncode == 3:
            assert_undecided_by_the_host(evidence, victim, passed)
            assert node_reasons(state)[victim][0].startswith("drain")
            return
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert node_reasons(state)[victim][0] == "idle"
        (retest,) = json.loads(evidence.read_text())["nodes"]
        assert (retest["node"], retest["verdict"], retest["action"]) == \
            (victim, "pass", "resumed")
        assert len(retest["pairs"]) == 6 and admins not in retest["partners"]


def take_the_link_down_mid_sweep(state, victim, done, after=2.0):
    """Once the sweep's job runs and its rank in `victim` is up, `after`
    seconds later, the victim's link goes down (`vcluster fault
    --link-down`: a cable pulled mid-sweep); what happened goes into `done`."""
    try:
        jobid, _, _ = wait_for_running_job(state, set(), timeout=120)
        wait_for_rank(state, victim, timeout=60)
        time.sleep(after)
        vcluster.set_fault(state["name"], victim, link_down=True)
        done["job"] = jobid
    except AssertionError as err:       # said by the test, not lost in the thread
        done["error"] = str(err)


def unreachable_named(suspects):
    """The node names of the suspects named unreachable (lost)."""
    return [s["names"] for s in suspects if s["direction"] == "unreachable"]


@pytest.mark.parametrize("path,mpi", [("srun", "mpich"), ("mpirun", "openmpi"),
                                      ("mpirun", "mpich")])
def test_a_node_whose_link_goes_down_mid_sweep_is_the_one_named_lost(path, mpi):
    """#54: with a node's link down mid-sweep under Slurm, a surviving node
    was named unreachable in the reason, suspects.json and the drain list
    (2 of 2 runs): srun's first "task 1: Terminated" line, a rank srun
    killed because the node failed, was read as the lost node, beside the
    "Node failure on" line that names it.  Slurm's own words decide now,
    through srun's ranks and through the MPIs' own launchers inside the
    allocation (whose daemons srun starts)."""
    require_slurm()
    with cluster("h2lnkd", nodes=4, slurm=True, rate="100mbit") as state:
        victim = state["nodes"][2]["name"]
        others = {n["name"] for n in state["nodes"]} - {victim}
        done = {}
        saboteur = threading.Thread(target=take_the_link_down_mid_sweep,
                                    args=(state, victim, done), daemon=True)
        saboteur.start()
        try:
            proc = run_reframe(state["slurm"]["reframe"][path], "-t", "sweep", "-p",
                               f"^{mpi}$", "-S", "LinkSweep.sizes=65536", timeout=600,
                               env=slurm_environment(state))
            saboteur.join(timeout=5)
        finally:
            vcluster.set_fault(state["name"], victim, clear_fault=True)
        assert "job" in done, done.get("error", proc.stdout[-3000:])
        (case,) = [tc for tc in cases_of(latest_report()) if tc["name"].startswith("LinkSweep")]
        assert case["result"] == "fail", proc.stdout[-3000:]
        reason = case["fail_reason"]
        job_err = open(os.path.join(case["stagedir"], "rfm_job.err")).read()
        assert "DUE TO NODE FAILURE" in job_err, job_err[-3000:]
        if path == "srun" or mpi == "mpich":
            # Slurm said which node it lost to srun, ours or the one that
            # started hydra's proxies (the reason quotes it)
            assert f"Node failure on {victim}" in job_err, job_err[-3000:]
        else:
            # prterun's daemons: Slurm ended the batch job and told no srun
            # which node; it holds the node DOWN, not responding, as the
            # check asked it
            said = open(os.path.join(case["stagedir"], "slurm_nodes.out")).read()
            assert f"{victim}|down*|" in said, said
        fleet = case["record"]["fleet"]
        assert unreachable_named(fleet["suspects"]) == [[victim]], (reason, job_err[-3000:])
        assert f"node {victim} (unreachable)" in reason, reason
        for survivor in others:
            assert f"node {survivor} (unreachable)" not in reason, reason
        report = paths.REPORTS / "latest"
        sweeps = json.loads((report / "suspects.json").read_text())["sweeps"]
        assert [unreachable_named(sw["suspects"]) for sw in sweeps] == [[[victim]]], sweeps
        # Slurm holds the victim DOWN until its link is back and its slurmd
        # registers again (ReturnToService=2): then it is the one to drain
        until(lambda: set(node_states(state).values()) == {"idle"}, 90,
              f"the nodes are not all idle again: {node_states(state)}")
        shown = drain_cli(state, "drain", str(report), "--dry-run")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        drained = re.findall(r"scontrol update nodename=(\S+) state=drain", shown.stdout)
        assert drained == [victim], shown.stdout
        script = (report / "drain.sh").read_text()
        assert set(re.findall(r"^# scontrol update NodeName=(\S+)", script, re.M)) == \
            {victim}, script


def published_sweep(tmp_path, hosts, suspect):
    """A session publish made of a run report whose sweep over `hosts`
    named `suspect`, unreachable."""
    data = sweep_report([{"kind": "node", "names": [suspect], "metric": "answered_pairs",
                          "value": 0, "fleet_median": 2, "reference": None,
                          "direction": "unreachable", "evidence": []}])
    data["runs"][0]["testcases"][0]["record"]["fleet"]["hosts"] = hosts
    raw = tmp_path / "run-report.json"
    raw.write_text(json.dumps(data))
    (tmp_path / "reports").mkdir()
    return publish(raw, tmp_path / "reports", results_db=tmp_path / "none.db")


def assert_undecided_by_the_host(evidence, victim, proc):
    """The re-test of `victim` left inconclusive by the host's conditions
    (CPU pressure on a loaded host), the node drained with netbench's
    "re-test inconclusive" reason, its partners named as nothing."""
    (retest,) = json.loads(evidence.read_text())["nodes"]
    assert (retest["node"], retest["verdict"]) == (victim, "inconclusive"), proc.stdout
    assert retest["why"].startswith("re-test inconclusive: outside the band, but "), \
        retest["why"]
    assert retest["action"].startswith("stays drained: netbench: re-test inconclusive: ")
    assert all(s["names"] == [victim] for s in retest["suspects"])


def test_drain_of_another_cluster_s_report_drains_nothing_and_says_which(tmp_path):
    require_slurm()
    with cluster("h2drot", nodes=2, slurm=True) as state:
        folder = published_sweep(tmp_path, [f"elsewhere-n{i}" for i in (1, 2, 3)],
                                 "elsewhere-n1")
        proc = drain_cli(state, "drain", str(folder))
        assert proc.returncode == 2
        assert "hosts this cluster does not have: elsewhere-n1; nothing drained" in proc.stderr
        assert {st for st, _ in node_reasons(state).values()} == {"idle"}
        # a suspects.json crafted to name every node of this cluster, in a
        # session that named none of them: refused, nothing drained
        nodes = [n["name"] for n in state["nodes"]]
        crafted = json.loads((folder / "suspects.json").read_text())
        crafted["sweeps"][0].update(nodes=nodes, suspects=[
            dict(crafted["sweeps"][0]["suspects"][0], names=[n]) for n in nodes])
        (folder / "suspects.json").write_text(json.dumps(crafted, indent=2) + "\n")
        proc = drain_cli(state, "drain", str(folder / "suspects.json"))
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        assert proc.stderr == (f"netbench: {folder / 'suspects.json'}: is not the suspects of "
                               f"its session's run report ({folder / 'run-report.json'}): a "
                               f"suspects file is drained only as the session published "
                               f"it\n"), proc.stderr
        assert {st for st, _ in node_reasons(state).values()} == {"idle"}


# ---- netbench resume: a transaction with Slurm (#54) ----------------------------

OURS = "netbench: S54: bw_Mbps@65536 19.9 vs fleet median 94.1"


def drained(state, node, reason):
    proc = slurm_cmd(state, "scontrol", "update", f"nodename={node}", "state=drain",
                     f"reason={reason}")
    assert proc.returncode == 0, proc.stderr


def resume_jobs(state):
    """The allocations `netbench resume` holds (its partners)."""
    out = slurm_cmd(state, "squeue", "-h", "-n", "netbench-resume", "-o", "%i|%T").stdout
    return [line for line in out.splitlines() if line.strip()]


def resume_process(state, tmp_path, *args):
    """`netbench resume` running, its temporary folders in tmp_path/tmp."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return subprocess.Popen([*NETBENCH, "resume", "--system", state["system"], *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=paths.REPO, env={**os.environ, **slurm_environment(state),
                                                 "TMPDIR": str(tmp)})


def lock_held(path):
    """Whether another process holds the partition's lock (flock(1), as
    the sweep's job script takes it)."""
    return subprocess.run(["flock", "-n", "-s", str(path), "true"]).returncode != 0


#: the resume tests' cluster: 4 nodes, links at 100 Mbit/s
RESUMED = "h2rstx"


@pytest.fixture(scope="module")
def resume_cluster():
    require_slurm()
    with cluster(RESUMED, nodes=4, slurm=True, rate="100mbit") as state:
        yield state


@pytest.fixture
def drained_n1(resume_cluster):
    """The cluster with its first node drained by netbench, the others idle
    and every link at its rate (as each test leaves it, whatever it did)."""
    state = resume_cluster
    names = [n["name"] for n in state["nodes"]]
    slurm_cmd(state, "scontrol", "update", f"nodename={','.join(names[1:])}", "state=resume")
    drained(state, names[0], OURS)
    until(lambda: all(st == "idle" for n, (st, _) in node_reasons(state).items()
                      if n != names[0]), 60, "the nodes did not come back to idle")
    # no rank of an earlier test's re-test left (the tests wait for one)
    until(lambda: not any(rank_pids(state, n) for n in names), 60,
          "a netbench rank of an earlier test is still running")
    yield state
    vcluster.set_fault(state["name"], "1", clear_fault=True)
    slurm_cmd(state, "scontrol", "update", f"nodename={','.join(names)}", "state=resume")


def partition_lock(state):
    lock = vcluster.CLUSTERS / state["name"] / "partition.lock"
    assert lock.is_file()
    return lock


def test_resume_refuses_one_partner_and_an_evidence_folder_changing_nothing(drained_n1,
                                                                             tmp_path):
    """`--partners 1` was accepted; `--evidence DIR` re-tested and resumed
    the node, then failed with a traceback, the record of it lost."""
    state = drained_n1
    before = node_reasons(state)
    for args, said in ((["--partners", "1"], "netbench: --partners: 1: use 2 or more"),
                       (["--evidence", str(tmp_path)], f"--evidence: {tmp_path}: a folder")):
        proc = drain_cli(state, "resume", "--system", state["system"], *args)
        assert proc.returncode == 2 and said in proc.stderr, proc.stdout + proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert node_reasons(state) == before


def test_resume_while_a_sweep_holds_the_partition_is_refused(drained_n1):
    """A sweep (the ssh partition's: its job holds the partition's lock
    with flock for its whole run) is running: resume waits at most --wait
    seconds, then refuses in one line, nothing changed, no allocation;
    the sweep is not disturbed.  (resume took no lock, and the sweep
    failed on the re-test's traffic.)"""
    state = drained_n1
    lock = partition_lock(state)
    before = node_reasons(state)
    sweep = {}
    sweeper = threading.Thread(target=lambda: sweep.update(proc=run_reframe(
        state["system"], "-t", "sweep", "-p", "^mpich$", "-S", "LinkSweep.sizes=65536",
        timeout=600)), daemon=True)
    sweeper.start()
    until(lambda: lock_held(lock), 120, "the sweep never held the partition")
    refused = drain_cli(state, "resume", "--system", state["system"], "--wait", "3")
    still_held = lock_held(lock)
    sweeper.join(timeout=600)
    assert still_held, "the sweep ended before resume's refusal: too short to tell"
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "the partition is held by another job" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert node_reasons(state) == before and resume_jobs(state) == []
    (case,) = [tc for tc in cases_of(latest_report()) if tc["name"].startswith("LinkSweep")]
    assert "not held" not in (case["fail_reason"] or ""), case["fail_reason"]


def test_a_slowed_node_with_one_healthy_partner_stays_drained(drained_n1, tmp_path):
    """n1 at a fifth of its rate, n2 and n3 drained by an administrator:
    one idle partner (n4), against which n1 "passed" and was resumed.  It
    stays drained, inconclusive, with netbench's reason saying why."""
    state = drained_n1
    n1, n2, n3, _ = (n["name"] for n in state["nodes"])
    vcluster.set_fault(state["name"], "1", rate="20mbit")
    drained(state, n2, "admin: bad DIMM")
    drained(state, n3, "admin: firmware")
    evidence = tmp_path / "one.json"
    one = drain_cli(state, "resume", "--system", state["system"], "--evidence", str(evidence))
    assert one.returncode == 3, one.stdout + one.stderr
    assert node_reasons(state)[n1] == (
        "drained", "netbench: re-test inconclusive: only 1 healthy partner(s) in service")
    assert node_reasons(state)[n2] == ("drained", "admin: bad DIMM")
    (record,) = json.loads(evidence.read_text())["nodes"]
    assert (record["node"], record["verdict"]) == (n1, "inconclusive")


def test_sigterm_during_resume_gives_back_what_it_took(drained_n1, tmp_path):
    """SIGTERM while the re-test runs: the partners' allocation, the lock
    and the temporary folders given back (netbench-resume-* folders were
    left behind), the node as it was."""
    state = drained_n1
    n1 = state["nodes"][0]["name"]
    proc = resume_process(state, tmp_path)
    try:
        wait_for_rank(state, n1, timeout=120)
        proc.terminate()
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert list((tmp_path / "tmp").glob("netbench-resume-*")) == [], out + err
    assert not lock_held(partition_lock(state))
    until(lambda: not resume_jobs(state), 30, "the partners' allocation stayed")
    until(lambda: not rank_pids(state, n1), 30, "the re-test's rank outlived resume")
    assert node_reasons(state)[n1] == ("drained", OURS)


def test_an_administrator_s_drain_during_resume_survives(drained_n1, tmp_path):
    """An administrator drains n1 with their own reason while resume
    re-tests it: resume read Slurm's list once and returned the node to
    service.  It reads it again, sees the reason is not its own, and
    leaves it."""
    state = drained_n1
    n1 = state["nodes"][0]["name"]
    evidence = tmp_path / "admin.json"
    proc = resume_process(state, tmp_path, "--evidence", str(evidence))
    try:
        wait_for_rank(state, n1, timeout=120)
        drained(state, n1, "admin: reseat the cable")
        out, err = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert node_reasons(state)[n1] == ("drained", "admin: reseat the cable"), out + err
    assert f"left alone: {n1} is now drained (admin: reseat the cable)" in out, out + err
    (record,) = json.loads(evidence.read_text())["nodes"]
    assert record["node"] == n1 and record["action"].startswith("left alone: ")
    assert resume_jobs(state) == []
