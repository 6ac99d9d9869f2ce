"""Two fabric sweeps at once on one cluster (issue #23, item 6): each would
see the other's traffic as a slow node.  A sweep holds its partition for
itself: the second one, started while the first runs, is refused with a
clear reason, and the first names nobody on the healthy cluster."""

import json
import os
import subprocess
import time

from netbench.checks import exclusive
from netbench.rfm import session
from helpers.vcluster import cluster

NODES = 3
#: the first sweep runs long enough (many samples) for the second to start
LONG = ["-S", "LinkSweep.min_samples=50"]
SHORT = ["-S", "LinkSweep.sizes=1048576"]


def reframe(system, folder, *extra):
    """A ReFrame session of its own (stage, output, run report in `folder`)
    sweeping `system` with MPICH; a Popen."""
    folder.mkdir()
    args = [str(session.BIN / "reframe"), "-C", str(session.paths.CONFIG), "-c",
            str(session.paths.CHECKS), "--system", system, "-t", "sweep", "-p", "^mpich$",
            "--stage", str(folder / "stage"), "--output", str(folder / "output"),
            "--report-file", str(folder / "report.json"), *extra, "-r"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    return subprocess.Popen(args, cwd=session.paths.REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def job_started(folder):
    """The session in `folder` has launched its sweep's job."""
    return any(folder.glob("stage/**/LinkSweep*/rfm_job.out"))


def sweep_case(folder):
    report = json.loads((folder / "report.json").read_text())
    (case,) = [tc for run in report["runs"][-1:] for tc in run["testcases"]
               if tc["name"].startswith("LinkSweep")]
    return case


def window(case):
    return case["job_submit_time"], case["job_completion_time_unix"]


def test_two_sweeps_at_once_never_interleave(tmp_path):
    """The second starts while the first's job runs: it is refused, naming
    the lock, and the first names nobody.  (Had it waited, the two jobs
    would follow each other: their windows may not overlap.)"""
    with cluster("tswx", nodes=NODES, rate="1gbit", mtu=9000) as state:
        lock = os.path.join(state["folder"], "partition.lock")
        first = reframe(state["system"], tmp_path / "first", *LONG)
        second = None
        try:
            deadline = time.monotonic() + 300
            while not job_started(tmp_path / "first") and first.poll() is None \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            assert first.poll() is None, first.communicate()[0][-4000:]
            second = reframe(state["system"], tmp_path / "second", *SHORT)
            second_out, _ = second.communicate(timeout=600)
            first_out, _ = first.communicate(timeout=900)
        finally:
            for proc in (first, second):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()
        ran, other = sweep_case(tmp_path / "first"), sweep_case(tmp_path / "second")
        assert ran["result"] == "pass", (ran.get("fail_reason"), first_out[-4000:])
        assert not ran["record"]["fleet"]["suspects"]
        (a_start, a_end), (b_start, b_end) = window(ran), window(other)
        if other["result"] == "fail":
            assert "refused: another job holds the partition" in other["fail_reason"], \
                other["fail_reason"]
            assert lock in other["fail_reason"]
        else:
            assert b_start >= a_end or b_end <= a_start, \
                f"two sweeps interleaved: {a_start:.1f}-{a_end:.1f} and {b_start:.1f}-{b_end:.1f}"
        print(f"\nfirst sweep's job {a_end - a_start:.1f} s; the second "
              f"{'refused' if other['result'] == 'fail' else 'ran after it'}, "
              f"{b_start - a_start:.1f} s after the first's start")


def test_the_lock_is_taken_for_the_whole_script_and_refuses_a_second_holder(tmp_path):
    """The job script's lines, without ReFrame: held until the script ends."""
    lock = tmp_path / "partition lock"
    lock.write_text("")
    hold = exclusive.hold_command(str(lock))
    holder = subprocess.Popen(["bash", "-c", f"{hold}\necho held; exec sleep 30"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        other = subprocess.run(["bash", "-c", f"{hold}\necho ran"], capture_output=True,
                               text=True)
        assert other.returncode == 1 and "ran" not in other.stdout
        assert exclusive.refusal(other.stderr).startswith(
            "refused: another job holds the partition"), other.stderr
    finally:
        holder.kill()
        holder.wait()
    after = subprocess.run(["bash", "-c", f"{hold}\necho ran"], capture_output=True, text=True)
    assert after.returncode == 0 and after.stdout.strip() == "ran", after.stderr
    missing = subprocess.run(["bash", "-c", f"{exclusive.hold_command(str(tmp_path / 'no'))}"
                                            "\necho ran"], capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot open the partition lock" in missing.stderr
