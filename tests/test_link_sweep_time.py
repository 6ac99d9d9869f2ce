"""A fabric sweep's time limit (netbench/checks/sweeptime.py, its parts in
netbench/data/sweep_time.yaml): derived from its pairs, the link rate and
the sizes it sends, long enough for the 9-node sweep issue 54 saw killed
in its confirming pass; and what a sweep cut short by it keeps: its first
pass's pairs, judged, and the pairs it did not reach."""

import re

import pytest

from helpers.fleet import LINE_MBPS
from helpers.sweepfiles import sweep_text
from netbench import paths
from netbench.checks import sweeptime
from netbench.datafiles import DataError
from netbench.fleet import judge, reasons, topology
from netbench.results.sweep import parse_sweep

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

MiB = 1 << 20
DEFAULT_SIZES = [MiB, 8 * MiB]
#: LinkSweep's defaults: min_samples, NetbenchRun's budget
MIN_SAMPLES, BUDGET = 3, 0.05


def pairs(n):
    return n * (n - 1) // 2


def test_the_stream_window_is_the_benchmarks():
    """The formula's window is netbench.c's: a change there must change
    the data file too."""
    source = (paths.REPO / "reframe_checks" / "src" / "netbench.c").read_text()
    defines = dict(re.findall(r"^#define (STREAM_WINDOW\w*) \(?(\d+)", source, re.MULTILINE))
    parts = sweeptime.load()
    assert int(defines["STREAM_WINDOW"]) == parts.stream_window
    shift = re.search(r"#define STREAM_WINDOW_BYTES \((\d+)u << (\d+)\)", source)
    assert int(shift[1]) << int(shift[2]) == parts.stream_window_bytes


def test_issue_54s_sweep_has_time_for_its_confirming_pass():
    """9 nodes at 100 Mbit/s, one pair at a time, 1 and 8 MiB: its first
    pass took 462 s, and the job was killed at 600 s in its second.  The
    limit now holds two such passes and the job's start and end."""
    limit = sweeptime.time_limit(pairs(9), 2, DEFAULT_SIZES, 100, MIN_SAMPLES, BUDGET)
    parts = sweeptime.load()
    assert limit >= 2 * 462 + parts.startup_seconds + parts.reserve_seconds
    # and not absurdly more: under twice that
    assert limit < 2 * (2 * 462 + parts.startup_seconds + parts.reserve_seconds)


def test_the_limit_grows_with_pairs_passes_and_sizes_and_falls_with_the_rate():
    base = sweeptime.time_limit(pairs(16), 2, DEFAULT_SIZES, 100, MIN_SAMPLES, BUDGET)
    assert sweeptime.time_limit(pairs(24), 2, DEFAULT_SIZES, 100, MIN_SAMPLES, BUDGET) > base
    assert sweeptime.time_limit(pairs(16), 3, DEFAULT_SIZES, 100, MIN_SAMPLES, BUDGET) > base
    assert sweeptime.time_limit(pairs(16), 2, [MiB], 100, MIN_SAMPLES, BUDGET) < base
    assert sweeptime.time_limit(pairs(16), 2, DEFAULT_SIZES, 25, MIN_SAMPLES, BUDGET) > base
    assert sweeptime.time_limit(pairs(16), 2, DEFAULT_SIZES, 1000, MIN_SAMPLES, BUDGET) < base


def test_a_fast_fabric_is_bound_by_the_budget_and_never_under_the_floor():
    parts = sweeptime.load()
    # at 100 Gbit/s each direction is the benchmark's budget, not the link
    assert sweeptime.direction_seconds(8 * MiB, 100_000, MIN_SAMPLES, BUDGET, parts) == BUDGET
    assert sweeptime.time_limit(pairs(4), 2, DEFAULT_SIZES, 100_000, MIN_SAMPLES,
                                BUDGET) == parts.min_seconds
    # without a line rate there is nothing to derive it from
    assert sweeptime.time_limit(pairs(64), 2, DEFAULT_SIZES, None, MIN_SAMPLES,
                                BUDGET) == parts.min_seconds


def test_the_window_is_the_benchmarks_rule():
    parts = sweeptime.load()
    assert sweeptime.window_bytes(64 * 1024, parts) == 8 * 64 * 1024    # 8 in flight
    assert sweeptime.window_bytes(MiB, parts) == 2 * MiB                # 2 MiB at most
    assert sweeptime.window_bytes(8 * MiB, parts) == 8 * MiB            # at least one


@pytest.mark.parametrize("text,key", [
    ("link_fraction: 0\n", "link_fraction"),
    ("link_fraction: 0.5\nbogus: 1\n", "bogus"),
])
def test_a_bad_data_file_is_refused_naming_the_key(tmp_path, text, key):
    good = (paths.PACKAGE / "data" / "sweep_time.yaml").read_text()
    kept = "\n".join(line for line in good.splitlines()
                     if not line.startswith(text.split(":")[0] + ":"))
    path = tmp_path / "sweep_time.yaml"
    path.write_text(kept + "\n" + text)
    with pytest.raises(DataError) as err:
        sweeptime.load(path)
    assert str(err.value).startswith(str(path)) and key in str(err.value)
    assert "\n" not in str(err.value)


# -- a first pass cut short: what it measured is judged ---------------------------

def two_leaves(tmp_path):
    path = tmp_path / "topology.conf"
    path.write_text("SwitchName=spine Switches=leaf[1-2]\n"
                    "SwitchName=leaf1 Nodes=a[1-3]\nSwitchName=leaf2 Nodes=b[1-3]\n")
    return topology.load_topology(path)


def cut_short(text, keep_rows):
    """The benchmark's output as a launch ended at its time limit leaves
    it: the rows streamed so far, no closing `@` figures."""
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("#")]
    rows = [line for line in lines if not line.startswith(("#", "@"))]
    return "\n".join(header + rows[:keep_rows]) + "\n"


def test_a_sweep_cut_short_judges_the_pairs_it_measured(tmp_path):
    """The rows a pass streamed before its limit are its figures: the path
    between two slow leaves is named from them, and the directions it did
    not reach are the ones named as not measured."""
    hosts = ["a1", "a2", "a3", "b1", "b2", "b3"]
    text = sweep_text(hosts, lambda s, d: 1 / 3 if s[0] != d[0] else 1.0, seed=3)
    first = parse_sweep(cut_short(text, 3 * 12))      # 12 of 15 pairs, 3 rows each
    assert not first.finished
    measured = first.measurements()
    assert len(measured) == 24
    verdict = judge.judge(measured, line_rate_mbps=LINE_MBPS, topology=two_leaves(tmp_path))
    assert [(s.kind, s.component) for s in verdict.suspects] == [
        ("switch-link", "leaf1<->spine<->leaf2")]
    every = {(a, b) for a in hosts for b in hosts if a != b}
    missing = sorted(f"{a}->{b}" for a, b in every - set(measured))
    assert len(missing) == 6
    words = reasons.out_of_time(900, len(measured), missing, "suspects: "
                                + reasons.describe(verdict.suspects[0]))
    assert words.startswith("the sweep reached the job's 900 s time limit after 24 "
                            "directions of pairs; not measured: ")
    assert all(m in words for m in missing) and "leaf1<->spine<->leaf2" in words


def test_the_launchs_time_limit_line_is_read():
    """rfm.supervise's words when it ends a launch at its limit."""
    said = ("netbench.launch: stopped the job 585 s into its 600 s time limit: "
            "rank 3 ...; ended 9 processes of the launch (ranks, MPI proxies, ssh sessions)")
    found = reasons.TIME_LIMIT.search(said)
    assert found and found["limit"] == "600"
    assert reasons.benchmark_message(f"{reasons.NO_TIME_LEFT} 2: 10 s left\n") is None
