"""The parity check's arithmetic and evidence
(netbench.results.container_parity), on figures and /proc texts as the
job records them; the real runs are in tests/test_containers.py."""

import random

import pytest

from netbench.judgement import knobs as judging_knobs
from netbench.judgement import parity as judgement_parity
from netbench.results import container_parity as parity
from netbench.rfm import container

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

V1_HOST = """12:rdma:/
4:memory:/process_api/c57d21da
1:cpu,cpuacct:/
0::/
"""
V1_PODMAN_DEFAULT = "1:cpu,cpuacct:/libpod_parent/libpod-b565\n0::/libpod_parent/libpod-b565\n"
V1_UNDER_CALLER = "1:cpu,cpuacct:/libpod-0c87\n0::/libpod-0c87\n"
V2_SESSION = "0::/user.slice/user-0.slice/session-4.scope\n"
KNOBS = judging_knobs.load()
STATUS = "Name:\tcat\nCapEff:\t00000000a80c25fb\nSeccomp:\t0\nCpus_allowed:\t3\n"


def test_slowdowns_are_the_median_of_each_rounds_ratio():
    runs = {"native": [(1.0, 100.0), (1.0, 100.0), (0.8, 125.0)],
            "container": [(1.02, 99.0), (1.04, 98.0), (1.0, 100.0)]}
    slow = parity.slowdowns(runs)
    # round 3's lucky host run (0.8 us) gives a ratio of 1.25: one round of
    # three, it does not move the median, where best over best would be 1.25
    assert slow["latency"] == pytest.approx(1.04)
    assert slow["bandwidth"] == pytest.approx(100 / 98)


def test_a_round_one_side_did_not_finish_pairs_nothing_else():
    runs = {"native": [(1.0, 100.0), None, (1.0, 100.0)],
            "container": [(1.1, 90.0), (0.5, 200.0), (1.1, 90.0)]}
    assert parity.paired_rounds(runs) == [((1.0, 100.0), (1.1, 90.0))] * 2
    assert parity.slowdowns(runs)["latency"] == pytest.approx(1.1)
    assert parity.slowdowns({"native": [None], "container": [(1.0, 1.0)]}) == {}


@pytest.mark.parametrize("text, path", [
    (V1_HOST, "/"), (V1_PODMAN_DEFAULT, "/libpod_parent/libpod-b565"),
    (V2_SESSION, "/user.slice/user-0.slice/session-4.scope"),
    # /proc/self/status and cgroup lines in one text: only cgroup lines count
    (STATUS + V1_UNDER_CALLER, "/libpod-0c87"), ("", None), (None, None)])
def test_the_cgroup_the_scheduler_groups_by(text, path):
    assert parity.cgroup_path(text) == path


def test_levels_the_container_adds():
    assert parity.levels_added("/libpod_parent/libpod-b565", "/") == 2
    assert parity.levels_added("/slurm/job_5/step_0/libpod-1", "/slurm/job_5/step_0") == 1
    assert parity.levels_added(None, "/") is None


PTRACE_NO_FILTER = "CapEff:\t00000000a80c25fb\nSeccomp:\t0\n"
DEFAULT_PODMAN = "CapEff:\t00000000a80425fb\nSeccomp:\t2\n"


def causes(cgroup="1:cpu,cpuacct:/libpod-0c87\n", status=PTRACE_NO_FILTER, shares=2048,
           family="mpich"):
    evidence = status + cgroup + (f"cpu.shares {shares}\n" if shares else "cpu.shares \n")
    return parity.likely_causes(evidence, "", "", family, "3.70 2.1 1.9 2/300 77\n",
                                   native_status=V1_HOST, ranks=2)


def test_podmans_default_cgroup_parent_is_named_as_a_cause():
    (cause,) = causes(cgroup=V1_PODMAN_DEFAULT)
    assert cause.startswith("the ranks run 2 cgroup levels below the host run's "
                            "(/libpod_parent/libpod-b565 against /)")
    assert "--cgroup-parent" in cause


def test_one_level_below_the_caller_with_a_weight_per_rank_is_no_cause():
    (cause,) = causes()
    assert cause.startswith("none detected in the container (capability, seccomp, "
                            "cgroup depth and weight, binding as on the host); "
                            "load average 3.7 on ")
    # without a cgroup v1 weight to read, nothing is claimed of it
    assert causes(shares=None) == [cause]


def test_a_container_weighing_as_one_process_is_named_as_a_cause():
    (cause,) = causes(shares=1024)
    assert cause == ("the container's 2 ranks share a CPU weight of 1024 where each rank on "
                     "the host weighs 1024: on a busy machine they get less CPU "
                     "(--cpu-shares=2048)")


def test_open_mpi_without_ptrace_under_seccomp_names_single_copy():
    found = causes(status=DEFAULT_PODMAN, family="openmpi")
    assert found[0].startswith("single-copy disabled in the container: no CAP_SYS_PTRACE")
    assert found[1].startswith("a seccomp filter inside the container")
    # dropping the filter is named as the opt-in it is, with what it opens
    assert "NETBENCH_CONTAINER_OPT_IN=seccomp-unconfined drops it, and opens every " \
        "system call to the container" in found[1]
    # MPICH's shm does not need the capability: only the filter is named
    assert len(causes(status=DEFAULT_PODMAN)) == 1


def test_the_shipped_flags_parent_the_container_on_its_caller_and_weigh_its_ranks(
        monkeypatch):
    monkeypatch.delenv(container.RUN_FLAGS_ENV, raising=False)
    flags = container.run_flags(ranks=4)
    # the cgroup is containers/bin/docker's to put in, in the job
    assert f"--cgroup-parent={container.CALLER_CGROUP}" in flags
    assert "--cgroups=no-conmon" in flags
    assert "--cpu-shares=4096" in flags
    monkeypatch.setenv(container.RUN_FLAGS_ENV, "--cpu-shares={cpu_shares}")
    assert container.run_flags(ranks=2) == ["--cpu-shares=2048"]


def runs_of(ratios, bandwidth=1000.0):
    return {"native": [(1.0, bandwidth)] * len(ratios),
            "container": [(r, bandwidth) for r in ratios]}


def test_parity_is_decided_by_the_median_ratio_and_its_interval():
    """The verdict model's paired form: 20 rounds whose ratios sit at
    1.12 with little spread fail; at 1.00 they pass; a host whose rounds
    swing from 0.8 to 1.3 leaves it inconclusive after max_rounds, and
    undecided before."""
    from netbench.judgement.model import FAIL, INCONCLUSIVE, PASS, UNDECIDED

    slower = judgement_parity.parity_decisions(runs_of([1.10, 1.12, 1.13, 1.11, 1.12] * 4),
                                               5, 20, KNOBS)
    assert slower["latency"].verdict == FAIL and slower["bandwidth"].verdict == PASS
    assert slower["latency"].code == "paired_beyond"
    assert slower["latency"].numbers["lo"] > slower["latency"].numbers["limit"]
    equal = judgement_parity.parity_decisions(runs_of([0.99, 1.0, 1.01, 1.0, 0.98]), 5, 20,
                                              KNOBS)
    assert equal["latency"].verdict == PASS and equal["latency"].code == "paired_within"
    swinging = [0.8, 1.3, 0.9, 1.25, 1.0, 1.2, 0.85, 1.1, 1.3, 0.95]
    assert judgement_parity.parity_decisions(runs_of(swinging), 5, 20,
                                             KNOBS)["latency"].verdict == UNDECIDED
    decided = judgement_parity.parity_decisions(runs_of(swinging * 2), 5, 20, KNOBS)["latency"]
    assert decided.verdict == INCONCLUSIVE and decided.code == "paired_too_noisy"
    assert decided.launches == decided.numbers["rounds"] == 20


def test_the_limit_is_the_knobs_paired_change(tmp_path):
    """1 + judging.yaml's min_change.paired, from the knobs the check sends
    its job: a site profile that allows 10 % passes what 5 % fails."""
    assert judgement_parity.limit(KNOBS) == pytest.approx(1 + KNOBS.min_change["paired"])
    rounds = runs_of([1.07, 1.08, 1.07, 1.08, 1.075])
    assert judgement_parity.parity_decisions(rounds, 5, 20, KNOBS)["latency"].verdict == "fail"
    loose = judging_knobs.from_json({**KNOBS.to_json(),
                                     "min_change": {**KNOBS.min_change, "paired": 0.1}})
    assert judgement_parity.parity_decisions(rounds, 5, 20, loose)["latency"].verdict == "pass"


def test_a_container_three_times_slower_fails_however_busy_the_host():
    """A round's two launches share its moment's load, so the load cancels
    in their ratio: a container 3x slower in every round fails, even when
    the load swings each round's times by up to 2x (the check once excused
    it as contention: inconclusive at 25 % CPU pressure)."""
    rng = random.Random(3)
    loads = [2 ** rng.uniform(-1, 1) for _ in range(5)]
    runs = {"native": [(10.0 * load, 1000.0 / load) for load in loads],
            "container": [(30.0 * load * rng.uniform(0.9, 1.1), 1000.0 / (3 * load))
                          for load in loads]}
    decided = judgement_parity.parity_decisions(runs, 5, 20, KNOBS)
    assert {k: d.verdict for k, d in decided.items()} == {"latency": "fail", "bandwidth": "fail"}
    assert decided["latency"].numbers["lo"] > 2.5


def test_the_jobs_question_reads_the_checks_knobs(tmp_path, capsys):
    """`python -m netbench.judgement.parity`, on rounds of the benchmark's
    real output: exit 0 (measure again) while undecided by the knobs in the
    file the check wrote, 1 once decided; a bad file is one line naming it
    and its key, and no further rounds."""
    import json
    from pathlib import Path
    text = (Path(__file__).parent / "data" / "benchmark" / "pingpong.mpich-wheel.txt").read_text()
    for i, factor in enumerate([0.9, 1.2, 0.95, 1.1, 1.0]):     # straddles 1.05
        (tmp_path / f"native.{i}.out").write_text(text)
        (tmp_path / f"container.{i}.out").write_text(text.replace(
            "@ latency_usec 0.5862", f"@ latency_usec {0.5862 * factor:.4f}"))
    knobs = tmp_path / "parity_knobs.json"
    knobs.write_text(json.dumps(KNOBS.to_json()))
    args = ["--stagedir", str(tmp_path), "--knobs", str(knobs), "--max-bytes", "65536"]
    assert judgement_parity.main(args) == 0
    # as the job runs it: the module in a shell of its own
    import subprocess
    import sys
    from netbench import paths
    job = subprocess.run([sys.executable, "-m", "netbench.judgement.parity", *args],
                         cwd=tmp_path, env={"PYTHONPATH": str(paths.REPO)},
                         capture_output=True, text=True, timeout=120)
    assert (job.returncode, job.stderr) == (0, "")
    assert judgement_parity.main([*args, "--max-rounds", "5"]) == 1
    loose = {**KNOBS.to_json(), "min_change": {**KNOBS.min_change, "paired": 0.25}}
    knobs.write_text(json.dumps(loose))                            # 1.25: within
    assert judgement_parity.main(args) == 1
    knobs.write_text(json.dumps({**KNOBS.to_json(), "min_span": "two"}))
    assert judgement_parity.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parity_knobs.json" in err and "min_span" in err


def test_a_launch_that_fails_once_is_launched_again_and_named(tmp_path):
    """A round's launch that exits non-zero runs once more; its first
    stderr is kept and named per side and round.  A real shell runs the
    job's own command line: the first attempt fails, the second writes a
    sweep's output."""
    import subprocess
    tries = tmp_path / "tries"
    launch = (f"sh -c 'echo x >> {tries}; if [ $(wc -l < {tries}) -lt 2 ]; then "
              f"echo \"prterun: could not reach rank 1\" >&2; exit 1; fi; echo swept'")
    script = "; ".join([parity.launched_once_more_on_failure(launch, "native.0"),
                        parity.launched_once_more_on_failure("echo swept", "container.0")])
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True)
    assert (tmp_path / "native.0.out").read_text() == "swept\n"
    assert tries.read_text().count("x") == 2
    assert parity.relaunched_rounds(tmp_path) == {
        "native": {"0": "prterun: could not reach rank 1"}}
    # a launch that fails both times leaves both stderrs, the last for the
    # sanity's message (ContainerParity.unfinished_words)
    subprocess.run(["bash", "-c", parity.launched_once_more_on_failure(
        "sh -c 'echo no sweep >&2; exit 3'", "native.1")], cwd=tmp_path)
    assert (tmp_path / "native.1.err").read_text() == "no sweep\n"
    assert parity.relaunched_rounds(tmp_path)["native"]["1"] == "no sweep"
    assert parity.last_error_line("\n  warning\n\nfatal: no sweep \n") == "fatal: no sweep"
    assert parity.last_error_line(None) == "no error output"
