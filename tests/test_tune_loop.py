"""`netbench tune` end to end (netbench/tuning/loop.py): real ReFrame
sessions with real Open MPI launches across a virtual cluster's emulated
GigE links, real tune.yml and revert.yml over ssh into the nodes.

Light on purpose: one MPI, one case (the blocking ping-pong over TCP
between the nodes), one loop for each way it ends (reverted, kept).  The
host's own settings are compared before and after (host_untouched): only
the nodes' namespaces are tuned.  A run stopped by
a signal or a failure once the tuning is on, and its revert, are
tests/test_tune_faults_live.py's.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

from helpers.tune import node_view
from helpers.vcluster import cluster
from netbench import paths
from netbench.tools import verdictbench
from netbench.tuning import loop, record

BIN = Path(sys.executable).parent
PROFILES = Path(__file__).parent / "data" / "tune" / "profiles"
#: the selection bench-verdict's tune part counts the decisions on
CHECKS = verdictbench.TUNE_CHECKS
CHECKS_ARG = shlex.join(CHECKS)


def views(state):
    return {n["name"]: node_view(state, n) for n in state["nodes"]}


def tune_cli(state, tmp_path, *args, **kw):
    return subprocess.Popen(
        [str(BIN / "netbench"), "tune", "-i", state["files"]["inventory"],
         "--system", state["system"], f"--checks={CHECKS_ARG}", "--reports-dir", str(tmp_path),
         *args], cwd=paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        **kw)


def test_a_profile_that_hurts_is_reverted_exactly(tmp_path, host_untouched):
    with cluster("s9tl", nodes=2, rate="1gbit", switch_mtu=9000) as state:
        baseline = views(state)

        # the dry run lists what would change and changes nothing
        dry = tune_cli(state, tmp_path, "--profile", "sockbuf_capped", "--profile-dir",
                       str(PROFILES), "--dry-run")
        out, _ = dry.communicate(timeout=600)
        assert dry.returncode == 0, out
        assert "tune_sysctl : Write the sysctl.d file" in out
        assert views(state) == baseline and list(tmp_path.iterdir()) == []

        # TCP buffers capped at 4 KiB: 1-128 KiB slower (16 KiB 2.3x), so
        # reverted; from 1 MiB up the emulated GigE link's bandwidth-delay
        # product (tens of us of RTT) fits in the capped buffers, and some
        # launches run at the line rate (measured in 2 of 2 runs here).  How
        # often each decision comes out right (this one, a gain kept, a no-op
        # not kept) is `make bench-verdict PARTS=tune`'s count, not a test's
        said = []
        code, folder = loop.run("sockbuf_capped", inventory=state["files"]["inventory"],
                                system=state["system"], checks=CHECKS, repeats=1,
                                profiles=PROFILES, reports_dir=tmp_path, say=said.append)
        rec = record.load(folder)
        assert code == 1, "\n".join(said)
        # the playbooks ran as netbench runs them (tuning.engine)
        assert rec["ansible"]["strategy"] == "mitogen_linear", rec["ansible"]
        for host in baseline:
            applied = rec["changes"]["hosts"][host]["sysctl"]["applied"]
            assert applied["net.ipv4.tcp_rmem"] == "4096 4096 4096"
        assert not rec["decision"]["kept"] and not rec["decision"]["overridden"]
        worse = {(e["figure"], e["bytes"]) for e in rec["decision"]["worse"]}
        assert worse & {("usec", 16 << 10), ("usec", 32 << 10)}, rec["decision"]
        assert rec["decision"]["reason"].startswith("worse beyond the noise: ")
        assert any(line.startswith("netbench tune: sockbuf_capped reverted: worse beyond the "
                                   "noise: ") and "KiB" in line for line in said)
        # and the cause it brought is named from the tuned sessions' node state
        brought = {d["rule"]: d for d in rec["diagnoses_after"]}
        assert "tcp_rmem max 4096" in brought["socket_buffer_plateau"]["evidence"], brought
        # read back by netbench and, apart, by the test
        assert rec["revert"] == {"ran": True, "exact": True, "differences": [],
                                 "state": rec["baseline_state"]}
        assert views(state) == baseline
        page = (folder / "index.html").read_text()
        assert "reverted: the tuning did not help" in page and "Reverted exactly" in page
        assert "<svg" in page and "8 MiB" in page and 'id="diagnoses-after"' in page


def test_jumbo_frames_are_kept_on_their_measured_gain_shown_per_size(tmp_path, host_untouched):
    # The switch carries jumbo frames; ethernet_1g raises the nodes to 9000
    # and the TCP buffers to 16 MiB: the messages from 32 KiB up gain 5-20 %
    # (kept in 3 of 4 quiet runs of bench-verdict's tune part, then 4 of 4
    # once undecided sizes no longer joined two failures into a loss:
    # validation.md).  No --keep: the measurement decides.  Re-test before
    # blame (ClusterKit): the loop itself measures a loss beside a gain
    # again before it reverts; a loop that reverted all the same (too noisy
    # to tell) is run once more on the nodes it left as they were; a second
    # revert fails.  How often it is kept is the bench's count.
    with cluster("s9tj", nodes=2, rate="1gbit", switch_mtu=9000) as state:
        assert {v["mtu"] for v in views(state).values()} == {1500}
        for attempt in ("first", "again"):
            reports = tmp_path / attempt
            reports.mkdir()
            proc = tune_cli(state, reports, "--profile", "ethernet_1g")
            out, _ = proc.communicate(timeout=3000)
            (folder,) = reports.glob("tune-*-ethernet_1g")
            rec = record.load(folder)
            if rec["decision"]["kept"]:
                break
            assert rec["revert"]["exact"] is True, out
            print(f"{attempt}: {rec['decision']['reason']}")
        assert proc.returncode == 0, out
        decided = rec["decision"]
        assert decided["kept"] and not decided["overridden"] and "revert" not in rec
        assert decided["worse"] == [], decided["reason"]
        gained = {e["bytes"] for e in decided["improved"]}
        assert gained and min(gained) >= 16 << 10, decided["reason"]
        assert decided["reason"].startswith("better beyond the noise: usec at ")
        assert "nothing worse" in decided["reason"]
        assert {v["mtu"] for v in views(state).values()} == {9000}
        assert json.loads((folder / "tune.json").read_text())["changes"]["state"] == "tuned"
        page = (folder / "index.html").read_text()
        assert "Change per figure and size" in page and "8 MiB" in page
        assert "<td>better</td>" in page and "kept: the tuning helped" in page
        print(decided["reason"])
