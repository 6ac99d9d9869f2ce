"""Which node a sweep lost, decided from the launcher's own words (#54):
Slurm's "Node failure on X" (and the job's node list and task layout),
the MPI launchers' words about a remote daemon, never a rank that srun or
the launcher killed because another node failed.  On real output: this
machine's captures (tests/data/sweep_lost/) and published excerpts
(tests/data/launcher_lost/, each with its source in the README)."""

import json
import time
from pathlib import Path

import pytest

from netbench.fleet import reasons
from netbench.results.lost import (CANCELLED_FOR_NODE_FAILURE, JOB_NODES_LINE, hostlist_names,
                                   job_nodes_said, not_responding)
from netbench.results.sweep import SweepResult, lost_hosts, parse_sweep

DATA = Path(__file__).parent / "data"
SWEEP_LOST = DATA / "sweep_lost"
LAUNCHER_LOST = DATA / "launcher_lost"
SLURM_CAPTURES = ["slurm-link-down", "slurm-link-down-2"]


def captured(case):
    """(sweep, stdout, stderr) of a captured sweep that lost a node."""
    out = (SWEEP_LOST / f"{case}.out").read_text()
    return parse_sweep(out), out, (SWEEP_LOST / f"{case}.err").read_text()


def lost_in(case):
    return json.loads((SWEEP_LOST / "cases.json").read_text())[case]["lost"]


def orders(lines):
    """The captured stderr's lines in orders srun may print them in: as
    captured, the task lines (srun's "Terminated" for the ranks it killed)
    before Slurm's "Node failure on", and Slurm's line last."""
    failure = [line for line in lines if "Node failure on" in line]
    tasks = [line for line in lines if ": task" in line]
    rest = [line for line in lines if line not in failure + tasks]
    return {"as captured": lines,
            "tasks first": tasks + rest + failure,
            "node failure last": rest + tasks + failure,
            "reversed": lines[::-1]}


@pytest.mark.parametrize("case", SLURM_CAPTURES)
def test_slurm_s_node_failure_names_the_lost_node_in_any_order_of_srun_s_lines(case):
    """Both captures named a survivor before #54: the rank of srun's first
    "task N: Terminated" line, which srun killed because the node failed."""
    sweep, out, err = captured(case)
    victim = lost_in(case)
    lines = [line for line in err.splitlines() if line.strip()]
    assert any(f"Node failure on {victim}" in line for line in lines)
    for order, shuffled in orders(lines).items():
        assert lost_hosts(sweep, f"{out}\n" + "\n".join(shuffled)) == [victim], order


@pytest.mark.parametrize("case", SLURM_CAPTURES)
def test_a_rank_srun_terminated_or_the_batch_node_is_never_the_lost_node(case):
    """Without Slurm's "Node failure on" line, its other words name no
    node lost: the ranks srun terminated are survivors, and slurmstepd's
    "*** JOB 1 ON h2lnkd-n1 CANCELLED ... DUE TO NODE FAILURE" names the
    node that ran the batch script."""
    sweep, out, err = captured(case)
    rest = "\n".join(line for line in err.splitlines() if "Node failure on" not in line)
    assert "Terminated" in rest and "DUE TO NODE FAILURE" in rest
    assert lost_hosts(sweep, f"{out}\n{rest}") == []


def renamed(out, names):
    """The capture's stdout with its placement lines' host names replaced:
    nodes that call themselves otherwise than Slurm names them."""
    for old, new in names.items():
        out = out.replace(f" host {old} ", f" host {new} ")
    return out


def test_slurm_s_node_name_is_mapped_through_the_job_s_task_layout():
    """Slurm names its node `h2lnkd-n3`; the node calls itself
    `h2lnkd-n3.lab` (its placement line): the job's node list in Slurm's
    order, one task on each, says rank 2 ran there."""
    sweep, out, err = captured("slurm-link-down")
    nodes = [f"h2lnkd-n{i}" for i in (1, 2, 3, 4)]
    sweep = parse_sweep(renamed(out, {n: f"{n}.lab" for n in nodes}))
    assert sweep.hosts[2] == "h2lnkd-n3.lab"
    assert lost_hosts(sweep, f"{out}\n{err}", job_nodes=nodes) == ["h2lnkd-n3.lab"]


def test_a_node_failure_on_several_nodes_names_each_and_no_node_outside_the_job():
    sweep, out, err = captured("slurm-link-down")
    many = err.replace("Node failure on h2lnkd-n3", "Node failure on h2lnkd-n[3-4]")
    assert lost_hosts(sweep, f"{out}\n{many}") == ["h2lnkd-n3", "h2lnkd-n4"]
    # a node that is not the job's is no node of this sweep (srun itself
    # says "Node ... not part of this job step"); the survivors stay unnamed
    elsewhere = err.replace("Node failure on h2lnkd-n3", "Node failure on other-n9")
    assert lost_hosts(sweep, f"{out}\n{elsewhere}") == []


def test_a_hostlist_that_would_name_too_many_nodes_names_none_and_is_not_built():
    started = time.monotonic()
    assert hostlist_names("n[1-1000000]x[1-1000000]y[1-1000]") == []
    assert hostlist_names("n[١-٣]") == []          # Arabic-Indic digits: Slurm refuses them
    assert time.monotonic() - started < 1
    assert hostlist_names("h2lnkd-n[3-4,7]") == ["h2lnkd-n3", "h2lnkd-n4", "h2lnkd-n7"]


def test_the_rank_srun_saw_killed_is_lost_not_the_rank_that_exited_after_it():
    """test_slurm.py's real lines of a rank killed (SIGKILL) while its
    peer exited with MPICH's code: srun printed the survivor first."""
    sweep = unfinished_sweep(["sl-n1", "sl-n2"])
    err = ("srun: Job step aborted: Waiting up to 7 seconds for job step to finish.\n"
           "srun: error: sl-n1: task 0: Exited with exit code 14\n"
           "srun: error: sl-n2: task 1: Killed\n")
    assert lost_hosts(sweep, err) == ["sl-n2"]


def unfinished_sweep(hosts):
    """A sweep cut short, one rank on each of `hosts`, nothing measured."""
    return SweepResult(hosts=dict(enumerate(hosts)), by_rank={}, schedule=[], rounds=0,
                       pairs=0, sweep_seconds=None, order=None, cpu={})


LAUNCHER_CASES = json.loads((LAUNCHER_LOST / "cases.json").read_text())


def test_every_published_excerpt_has_its_case():
    assert {p.stem for p in LAUNCHER_LOST.glob("*.err")} == set(LAUNCHER_CASES)


@pytest.mark.parametrize("case", sorted(LAUNCHER_CASES))
def test_the_launcher_s_words_name_the_lost_node_and_never_a_survivor(case):
    """PRRTE's and ORTE's "lost communication with a remote daemon" name
    the remote daemon's node (never the HNP's, mpirun's own); ssh's
    "connect to host X" its host; Slurm's "Node failure on" (salloc's
    too) its node; hydra's "[mpiexec@host] ... assert (!closed) failed"
    and a proxy that exited under srun name nobody."""
    facts = LAUNCHER_CASES[case]
    text = (LAUNCHER_LOST / f"{case}.err").read_text()
    assert lost_hosts(unfinished_sweep(facts["hosts"]), text) == facts["lost"]


MPIRUN_CAPTURE = SWEEP_LOST / "slurm-mpirun" / "openmpi-link-down"


def test_a_batch_job_slurm_ended_for_a_node_failure_names_the_node_slurm_holds_down():
    """Through prterun inside the allocation no srun is told which node
    failed: slurmstepd's words name the batch node (a survivor) and the
    launcher's none.  The node Slurm holds DOWN, not responding, is the
    one; a node an administrator set down (it still responds) is not."""
    out = MPIRUN_CAPTURE.with_suffix(".out").read_text()
    err = MPIRUN_CAPTURE.with_suffix(".err").read_text()
    sweep = parse_sweep(out)
    nodes = [f"h2lnkd-n{i}" for i in (1, 2, 3, 4)]
    assert CANCELLED_FOR_NODE_FAILURE.search(err)
    assert lost_hosts(sweep, f"{out}\n{err}", job_nodes=nodes) == []
    sinfo = MPIRUN_CAPTURE.with_suffix(".sinfo").read_text()
    assert not_responding(sinfo, sweep.hosts, nodes) == ["h2lnkd-n3"]
    # the format's line of a node an administrator set down, beside it
    admin = sinfo.replace("h2lnkd-n2|idle|none", "h2lnkd-n2|down|admin: bad DIMM")
    assert not_responding(admin, sweep.hosts, nodes) == ["h2lnkd-n3"]
    # a node that is not the job's is none of its nodes
    assert not_responding(sinfo, sweep.hosts, nodes[:2] + nodes[3:]) == []


def test_the_job_s_node_list_is_the_batch_script_s_not_what_squeue_shows_after():
    """squeue's list of a job whose node failed lacked that node (live,
    2026-12-02: ReFrame's job.nodelist was h2lnkd-n1,h2lnkd-n2 of four):
    the list the batch script printed holds every node, the lost one too,
    and is no message of the benchmark's in the case's reason."""
    out = MPIRUN_CAPTURE.with_suffix(".out").read_text()
    sinfo = MPIRUN_CAPTURE.with_suffix(".sinfo").read_text()
    err = f"{JOB_NODES_LINE}h2lnkd-n[1-4]\n" + MPIRUN_CAPTURE.with_suffix(".err").read_text()
    nodes = job_nodes_said(err)
    assert nodes == [f"h2lnkd-n{i}" for i in (1, 2, 3, 4)]
    assert not_responding(sinfo, parse_sweep(out).hosts, nodes) == ["h2lnkd-n3"]
    assert JOB_NODES_LINE not in reasons.benchmark_message(err)
