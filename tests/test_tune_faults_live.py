"""`netbench tune` reverts on every exit after apply (issue 35): a failure
injected after the tuning is applied leaves every node's settings, read
back apart by the test, equal to before.

For real on a virtual cluster: real ReFrame sessions over its emulated
GigE, real tune.yml and revert.yml over ssh into the nodes.  The failures
are netbench's own phase functions raising (pytest's monkeypatch, the
exception such a phase met: a TypeError in diagnosis, a full disk while
copying or writing); and a second SIGTERM while the revert runs.  One
phase for each place a failure can meet the revert (loop.run): in the
turns while the nodes are tuned (copying the tuned session), after the
turns before the decision (diagnosis, which raised that TypeError; the
decision is the same place), and after the revert, in its `finally`
(the record and the page, both failing).  One round (decision.MIN_ROUNDS set to 1): one
session before and one after, the fewest that reach every phase.

On the same cluster, the turns a re-test adds (a loss beside a gain is
measured again before a revert, decision.retest_wanted): how often the
host makes such a decision is `make bench-verdict PARTS=tune`'s count, so
here the first decision is taken as one, and the loop must measure as many
rounds again in turns and decide on them all.
"""

import errno
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers.tune import node_view
from helpers.vcluster import cluster
from netbench import paths
from netbench.report import diagnosis
from netbench.tuning import decision, loop, page, record

# what it asserts holds however busy the host (its sessions only reach the
# phases, nothing is judged by size): `make test` runs it beside others
pytestmark = pytest.mark.alongside

BIN = Path(sys.executable).parent
PROFILE = "ethernet_1g"         # sysctls, MTU, offloads and files on each node
# The sessions are only what each phase needs to reach, nothing here is
# judged by size: the sweep stops at 64 KiB (ReFrame's -S, as a user would
# shorten it) instead of crossing the emulated GigE with 8 MiB messages
CHECKS = ["-p", "^openmpi$", "-n", "^PingPong",
          "-E", "placement=='internode' and transport=='tcp' and variant=='blocking'",
          "-S", "PingPong.max_bytes=65536"]


def views(state):
    return {n["name"]: node_view(state, n) for n in state["nodes"]}


def full_disk(*_args, **_kw):
    raise OSError(errno.ENOSPC, "No space left on device (injected)")


def copying_after(real):
    """loop.copy_run_report that meets a full disk copying the tuned session."""
    def copy(run_report, to):
        if Path(to).name.startswith("after"):
            full_disk()
        return real(run_report, to)
    return copy


def type_error(*_args, **_kw):
    # what diagnosis raised on a node state with an MTU of null
    raise TypeError("'<' not supported between instances of 'NoneType' and 'int' (injected)")


#: (phase, [(module, function, replacement of the real one)], what the
#: failure says): the record and the page fail together, after the revert
#: (that one failing costs not the other is test_tune_faults.py's)
PHASES = [
    ("copy into the reports dir", [(loop, "copy_run_report", copying_after)],
     "OSError: [Errno 28] No space left on device"),
    ("diagnose", [(diagnosis, "diagnose", lambda real: type_error)],
     "TypeError: '<' not supported"),
    ("write the record and the page", [(record, "write", lambda real: full_disk),
                                       (page, "write", lambda real: full_disk)], None),
]


@pytest.fixture(scope="module")
def tunefi():
    """One cluster for the module's tests: each leaves its nodes as it found
    them, which is what they test."""
    with cluster("tunefi", nodes=2, rate="1gbit", switch_mtu=9000) as state:
        yield state


def test_a_second_sigterm_while_reverting_waits_for_the_revert_and_the_record(
        tunefi, tmp_path, host_untouched):
    # SIGTERM once the tuning is on (a batch system ending the job), then
    # SIGTERM and Ctrl-C again while the revert runs: they wait; the record
    # and the page are written, the nodes reverted
    state = tunefi
    baseline = views(state)
    out = second_sigterm_during_revert(state, tmp_path)
    (folder,) = tmp_path.glob("tune-*")
    rec = record.load(folder)
    assert rec["failure"]["stage"] == "interrupted", out
    assert rec["revert"]["exact"] is True and (folder / "index.html").is_file(), out
    # Python runs pending handlers in signal number order: SIGINT first
    assert re.search(r"^netbench tune: (SIGINT, SIGTERM|SIGTERM, SIGINT) waited for the "
                     r"revert and the record$", out, re.M), out
    assert views(state) == baseline


def test_a_failure_after_apply_leaves_every_node_as_before(
        tunefi, tmp_path, host_untouched, monkeypatch):
    state = tunefi
    monkeypatch.setattr(decision, "MIN_ROUNDS", 1)
    baseline = views(state)
    for phase, patches, message in PHASES:
        said = []
        with monkeypatch.context() as patch:
            for module, name, replacement in patches:
                patch.setattr(module, name, replacement(getattr(module, name)))
            code, folder = loop.run(PROFILE, inventory=state["files"]["inventory"],
                                    system=state["system"], checks=CHECKS, repeats=1,
                                    reports_dir=tmp_path / phase.replace(" ", "-"),
                                    say=said.append)
        out = "\n".join(said)
        assert code == 2, f"{phase}:\n{out}"
        # the tuning was applied, then reverted: read back apart, equal
        assert f"netbench tune: applying {PROFILE}" in out, f"{phase}:\n{out}"
        assert views(state) == baseline, f"{phase}:\n{out}"
        assert "netbench tune: reverted exactly" in out, f"{phase}:\n{out}"
        if phase == "write the record and the page":
            assert not (folder / record.FILE).exists() and not (folder / "index.html").exists()
            assert "netbench tune: tune.json not written: OSError: [Errno 28]" in out
            assert "netbench tune: index.html not written: OSError: [Errno 28]" in out
            continue
        rec = record.load(folder)
        assert rec["revert"]["exact"] is True and rec["revert"]["state"] == \
            rec["baseline_state"], phase
        assert rec["failure"]["stage"] == "failed"
        assert rec["failure"]["message"].startswith(message), (phase, rec["failure"])
        assert f"netbench tune: failed: {rec['failure']['message']}" in said
        assert (folder / "index.html").is_file()
        assert rec["after"].get("sessions") or phase == "copy into the reports dir"


def second_sigterm_during_revert(state, reports):
    """`netbench tune` stopped with SIGTERM once the tuning is on, and sent
    SIGTERM and SIGINT again as soon as it says it reverts; its output."""
    proc = subprocess.Popen(
        [str(BIN / "netbench"), "tune", "--profile", PROFILE, "-i", state["files"]["inventory"],
         "--system", state["system"], "--checks", shlex.join(CHECKS),
         "--repeats", "1", "--reports-dir", str(reports)],
        cwd=paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    guard = threading.Timer(1800, proc.kill)
    guard.start()
    lines, stopped, again = [], False, False
    try:
        for line in proc.stdout:
            lines.append(line)
            if not stopped and line.startswith("netbench tune: measuring after"):
                stopped = True          # the tuning is on: a batch system ends the job
                os.killpg(proc.pid, signal.SIGTERM)
            elif stopped and not again and line.startswith("netbench tune: reverting") \
                    and "untuned turn" not in line:
                again = True
                os.kill(proc.pid, signal.SIGTERM)
                os.kill(proc.pid, signal.SIGINT)
        proc.wait()
    finally:
        guard.cancel()
    out = "".join(lines)
    assert stopped and again, out
    # interrupted, and reverted exactly: 130, as any command stopped so
    assert proc.returncode == 130, out
    return out


@pytest.fixture(autouse=True)
def _no_leftover_signal_handlers():
    """loop.run restores what SIGINT and SIGTERM did before it."""
    stops = (signal.SIGINT, signal.SIGTERM)
    before = {s: signal.getsignal(s) for s in stops}
    yield
    assert {s: signal.getsignal(s) for s in stops} == before


def test_a_loss_beside_a_gain_is_measured_again_in_turns(tunefi, tmp_path, host_untouched,
                                                         monkeypatch):
    state = tunefi
    monkeypatch.setattr(decision, "MIN_ROUNDS", 1)
    monkeypatch.setattr(decision, "retest_wanted",
                        lambda decided, keep=False: "retested" not in decided.numbers)
    baseline = views(state)
    said = []
    code, folder = loop.run(PROFILE, inventory=state["files"]["inventory"],
                            system=state["system"], checks=CHECKS, repeats=1,
                            reports_dir=tmp_path, say=said.append)
    out = "\n".join(said)
    rec = record.load(folder)
    try:
        assert code in (0, 1) and "failure" not in rec, out
        assert f"netbench tune: {PROFILE} made some sizes better and some worse over 1 " \
               f"rounds: measuring as many again (2 in all) before deciding" in said, out
        # the second round in turns as well: its before beside its after
        assert rec["order"] == ["before-1.json", "after-1.json", "before-2.json",
                                "after-2.json"], out
        numbers = rec["decision"]["numbers"]
        assert numbers["rounds"] == 2 and numbers["retested"]["rounds"] == 1, numbers
        assert "measured again, as the first 1 rounds called" in rec["decision"]["reason"]
        if rec["decision"]["kept"]:
            assert "revert" not in rec and {v["mtu"] for v in views(state).values()} == {9000}
        else:
            assert rec["revert"]["exact"] is True and views(state) == baseline, out
    finally:
        if rec["decision"]["kept"]:         # the module's nodes as it found them
            loop.playbook(state["files"]["inventory"], "revert.yml",
                          "-e", f"tune_record_file={folder / 'tuning-state.json'}")
    assert views(state) == baseline
