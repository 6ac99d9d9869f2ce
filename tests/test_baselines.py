"""Learned baselines (netbench/judgement/baseline/, `netbench baseline`):
three real local sessions accepted as the baseline; a fourth over a really
slowed shared-memory path fails at the message sizes the slowing touches
and nowhere else; a malformed band is one line naming the file and key."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from netbench import paths
from netbench.datafiles import DataError
from netbench.judgement import baseline
from netbench.report import baselines
from netbench.report.verdict import EXIT_LOSS
from netbench.rfm import session

SHM = "^PingPong%variant=blocking%transport=shm%placement=intranode$"
#: Open MPI 5 (the wheel) with its shared-memory path crippled: single copy
#: (the smsc framework's CMA) off, and the sm transport's fragments cut to
#: 256 bytes, so every larger message crosses in 256-byte pieces.  Single
#: copy off alone is no reliable loss on this VM (process_vm_readv is slow
#: here: 1 MiB took 72 us with it and 24 us without, in one paired run).
#: Measured here, 2 rounds: 64 KiB 5-21 -> 28-100 us, 1 MiB 68-218 ->
#: 1300-1500 us, 256 bytes and below unchanged.
SLOWED_SHM = {"OMPI_MCA_smsc": "^cma", "OMPI_MCA_btl_sm_max_send_size": "256"}


def run_shm(references, env=None):
    proc = session.run_reframe("local", "-n", SHM, "-p", "^openmpi$", "-S",
                               f"thresholds_folder={references}", env=env, timeout=900)
    report = session.latest_report()
    (tc,) = [tc for run in report["runs"] for tc in run["testcases"]
             if tc["name"].startswith("PingPong")]
    return proc, tc, report["session_info"]


def sizes_seen(verdict):
    """Each size's verdict and its figure over the band's bound: what a
    failed assertion shows."""
    return [(int(s["bytes"]), s["verdict"], round(s["value"] / s["upper"], 2))
            for s in verdict["sizes"]]


@pytest.fixture(scope="module")
def accepted(tmp_path_factory):
    """A copy of the references with a baseline of three accepted runs."""
    references = tmp_path_factory.mktemp("baseline") / "references"
    shutil.copytree(paths.REFERENCES, references,
                    ignore=shutil.ignore_patterns("baselines"))
    names = []
    for _ in range(3):
        proc, tc, info = run_shm(references)
        assert proc.returncode in session.NO_FAILURE, (proc.stdout + proc.stderr)[-3000:]
        names.append((paths.REPORTS / "latest").resolve().name)
    written = baselines.accept(names, folder=references / "baselines")
    assert [o.path.name for o in written if o.path] == ["local-node.yaml"]
    return references, names


def test_three_runs_make_a_baseline_with_its_provenance(accepted):
    references, names = accepted
    data = baseline.load(references / "baselines" / "local-node.yaml")
    assert [s["name"] for s in data["sessions"]] == names
    assert all(s["commit"] for s in data["sessions"])
    (case,) = [c for c in data["cases"] if c["environ"] == "openmpi"]
    assert case["case"] == "PingPong %variant=blocking %transport=shm %placement=intranode"
    assert case["runs"] == 3 and case["mpi"].startswith("openmpi 5")
    # ranks 0 and 1 on one host: the slowest core round trip of the runs,
    # and the benchmark left no file of its own in /dev/shm
    assert case["core_round_trip_ns"] > 0
    assert not list(Path("/dev/shm").glob("netbench-rt-*"))
    for size in case["sizes"]:
        # never narrower than the runs' own spread nor than min_band
        assert size["upper"] >= size["high"] >= size["low"] > 0
        assert size["upper"] >= size["centre"] * (1 + data["min_band"]) - 1e-12
    shown = "\n".join(baselines.show(folder=references / "baselines"))
    assert "local:node" in shown and "fails above" in shown


def one_fragment_failures(verdict):
    """The sizes of one sm fragment (256 bytes or less) the verdict failed."""
    return [int(s["bytes"]) for s in verdict["sizes"]
            if s["verdict"] == "fail" and s["bytes"] <= 256]


def at_small_sizes(tc):
    """What a failed specificity assertion shows: the run's host readings
    and its figures over the band's bound up to 256 bytes."""
    verdict = tc["record"]["verdicts"][baseline.RATIO]
    return {"host": tc["record"].get("host"),
            "sizes": [s for s in sizes_seen(verdict) if s[0] <= 256]}


def test_a_slowed_shared_memory_path_fails_at_the_sizes_it_touches(accepted):
    references, _ = accepted
    proc, tc, _ = run_shm(references, env=SLOWED_SHM)
    out = proc.stdout + proc.stderr
    verdict = tc["record"]["verdicts"][baseline.RATIO]
    # shared memory is the CPUs' path: the loss fails unless the host's
    # conditions differed from the accepted runs' enough to explain a miss
    # this large (a rank without a core of its own explains any); then the
    # case is inconclusive and names them, and the sizes still show the loss
    failed = [s["bytes"] for s in verdict["sizes"] if s["verdict"] == "fail"]
    at_1mib = next(s for s in verdict["sizes"] if s["bytes"] == 1 << 20)
    explained = {d["code"] for d in verdict.get("numbers", {}).get("conditions", [])}
    if verdict["verdict"] == "inconclusive":
        assert explained & {"cores_short", "time_sliced"}, (verdict, tc["record"].get("host"))
        assert "could not have a core of its own" in verdict["reason"] or \
            "took turns on a CPU" in verdict["reason"], verdict["reason"]
        assert proc.returncode == 3, out[-3000:]
        assert at_1mib["value"] > at_1mib["upper"], verdict["sizes"]
    else:
        assert verdict["verdict"] == "fail", verdict
        assert proc.returncode == EXIT_LOSS, out[-3000:]
        assert tc["perfvalues"]["local:node:vs_baseline"][0] > 1.0
        assert 1 << 20 in failed, verdict["sizes"]
        assert "slower than the baseline" in verdict["reason"] and "1 MiB" in verdict["reason"]
    # messages of one fragment cross as before: no failure at 256 bytes or
    # less.  The VM's cores change mode for seconds at a time in ways their
    # round trip does not show (platform-facts.md), which moves these sizes
    # beyond a band learned in 15 s: a failure there is tested again before
    # it is blamed on the verdict (ClusterKit's re-test).  The slowing is
    # the same in both runs, so a verdict that spread it to these sizes
    # fails both; `latest` is then the second run, slowed as the first.
    if one_fragment_failures(verdict):
        _, again, _ = run_shm(references, env=SLOWED_SHM)
        assert not one_fragment_failures(again["record"]["verdicts"][baseline.RATIO]), \
            {"first": at_small_sizes(tc), "again": at_small_sizes(again)}
    # netbench compare SESSION --baseline: the slowed sizes worse beyond noise
    from netbench.report import compare, load_session
    learned = baseline.load(references / "baselines" / "local-node.yaml")
    session_now = load_session(paths.REPORTS / "latest" / "run-report.json")
    comparison = compare.compare_with_baseline(session_now, [learned])
    (case,) = [c for c in comparison.cases if "| openmpi |" in c.key]
    at_1mib = next(c for c in case.sizes if c.bytes == 1 << 20)
    assert at_1mib.call == "worse", at_1mib


def test_the_healthy_path_passes_its_baseline(accepted):
    references, _ = accepted
    proc, tc, _ = run_shm(references)
    # no loss: a band never narrower than the noise pooled over each size's
    # neighbours, and a size beyond it alone is noise, not a loss; on a
    # host busier than when the baseline was accepted, inconclusive at most.
    # A failure is run again before it is blamed on the verdict, as in the
    # slowed test (the cores' unseen modes); a band that fails healthy runs
    # fails both
    first = None
    judged = tc.get("record", {}).get("verdicts", {}).get(baseline.RATIO, {})
    if proc.returncode not in session.NO_FAILURE or judged.get("verdict") == "fail":
        first = proc.returncode, tc.get("fail_reason"), tc.get("record", {}).get("host")
        proc, tc, _ = run_shm(references)
    out = proc.stdout + proc.stderr
    verdict = tc["record"]["verdicts"][baseline.RATIO]
    assert verdict["verdict"] in ("pass", "inconclusive"), (verdict["reason"],
                                                            sizes_seen(verdict), first)
    assert proc.returncode in session.NO_FAILURE, (out[-3000:], first)


@pytest.mark.parametrize("change, key", [
    (lambda d: d["cases"][0]["sizes"][0].update(upper=d["cases"][0]["sizes"][0]["low"] / 2),
     "cases[0].sizes[0]"),
    (lambda d: d["cases"][0]["sizes"][0].pop("centre"), "cases[0].sizes[0].centre"),
    (lambda d: d["cases"][0]["sizes"][0].update(high="fast"), "cases[0].sizes[0].high"),
    (lambda d: d.update(version=99), "version"),
])
def test_a_malformed_band_is_one_line_naming_file_and_key(tmp_path, change, key):
    data = {"version": 1, "system": "local", "partition": "node", "accepted": "now",
            "cases": [{"case": "PingPong", "environ": "openmpi", "column": "usec",
                       "unit": "us", "runs": 3,
                       "sizes": [{"bytes": 1, "centre": 1.0, "low": 0.9, "high": 1.1,
                                  "upper": 1.2}]}]}
    change(data)
    path = tmp_path / "local-node.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DataError) as err:
        baseline.load(path)
    assert str(err.value).startswith(f"{path}: {key}:"), str(err.value)
    assert "\n" not in str(err.value)
    proc = subprocess.run([str(session.BIN / "netbench"), "baseline", "show", "--folder",
                           str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == f"netbench: {err.value}"


def test_too_few_runs_make_no_baseline(accepted, tmp_path):
    _, names = accepted
    with pytest.raises(DataError, match="at least 3 accepted runs"):
        baselines.accept(names[:2], folder=tmp_path)
    assert not list(tmp_path.iterdir())
