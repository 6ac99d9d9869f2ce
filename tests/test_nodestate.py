"""What a run ran under, read by the run itself (netbench/probe/nodestate.py):
the parsers on captured ethtool output, the settings the profiles touch,
a real session's records, and a re-published old session that keeps the
commit and tuning state it ran under (never today's)."""

import json
import shutil
from pathlib import Path

from netbench import report
from netbench.probe import checkout, linerate, nodestate
from netbench.report import provenance
from netbench.rfm import session

DATA = Path(__file__).parent / "data" / "nodestate"
SHM = "^PingPong%variant=blocking%transport=shm%placement=intranode$"


def captured(name):
    return (DATA / name).read_text()


def test_ethtool_outputs_parse_by_name():
    features = nodestate.parse_ethtool_features(captured("ethtool-k.virtio.txt"))
    assert features["generic-receive-offload"] in ("on", "off")
    assert "tcp-segmentation-offload" in features
    coalesce = nodestate.parse_ethtool_settings(captured("ethtool-c.virtio.txt"))
    assert coalesce["rx-usecs"] == "0" and coalesce["adaptive-rx"] == "off"
    assert coalesce["rx-usecs-irq"] is None                    # n/a: the NIC has none
    rings = nodestate.parse_ethtool_settings(captured("ethtool-g.virtio.txt"))
    assert rings["rx"] == "256"       # the current setting, not the pre-set maximum


def test_what_is_read_is_what_the_profiles_touch():
    want = nodestate.touched()
    assert {"net.core.rmem_max", "net.ipv4.tcp_rmem"} <= set(want["sysctl"])
    assert "rx-usecs" in want["coalesce"] and "generic-receive-offload" in want["features"]
    assert "InterruptThrottleRate" in want["modules"]["e1000e"]
    state = nodestate.node_state(["lo"], lambda argv: "", env={"UCX_TLS": "tcp", "X": "1"})
    assert state["sysctl"]["net.core.rmem_max"].isdigit()
    assert state["interfaces"]["lo"]["mtu"] == 65536
    assert state["ucx"]["env"] == {"UCX_TLS": "tcp"}


def test_job_output_lines_become_one_state_per_host():
    line = nodestate.MARKER + json.dumps({"host": "n1", "sysctl": {}})
    text = "\n".join([line, line, "noise", nodestate.MARKER + "{broken",
                      nodestate.MARKER + json.dumps({"host": "n2"})])
    assert sorted(nodestate.parse_job_output(text)) == ["n1", "n2"]


def test_a_session_records_its_nodes_and_a_republished_one_keeps_them(tmp_path):
    proc = session.run_reframe("local", "-n", SHM, "-p", "^openmpi$", timeout=900)
    assert proc.returncode in (0, 3), (proc.stdout + proc.stderr)[-3000:]
    run_report = session.latest_report()
    (tc,) = [tc for run in run_report["runs"] for tc in run["testcases"]
             if tc["name"].startswith("PingPong")]
    record = tc["record"]
    (state,) = record["node_state"].values()
    assert "net.ipv4.tcp_rmem" in state["sysctl"] and "lo" in state["interfaces"]
    assert record["provenance"]["netbench_commit"] == checkout.commit()
    # the same session as it would come back years later: recorded under
    # another commit and other settings than this checkout has now
    for case in (c for run in run_report["runs"] for c in run["testcases"]):
        if case.get("record"):
            case["record"]["provenance"]["netbench_commit"] = "0123456789ab-then"
            for host_state in case["record"].get("node_state", {}).values():
                host_state["sysctl"]["net.core.rmem_max"] = "212992"
    old = tmp_path / "run-report.json"
    old.write_text(json.dumps(run_report))
    folder = report.publish(old, tmp_path / "reports")
    published = json.loads((folder / "provenance.json").read_text())
    assert published["netbench_commit"] == "0123456789ab-then"
    (host_state,) = published["tuning_state"].values()
    assert host_state["sysctl"]["net.core.rmem_max"] == "212992"
    assert "0123456789ab-then" in (folder / "index.html").read_text()
    shutil.rmtree(tmp_path / "reports")


def test_a_run_report_from_before_records_held_it_says_not_recorded():
    assert provenance.recorded_by_the_run({"runs": [{"testcases": [
        {"name": "PingPong", "record": {}}]}]})["netbench_commit"] == provenance.NOT_RECORDED


def test_each_interface_records_its_addresses_the_data_path_is_told_by():
    # captured `ip -j addr show dev lo`; link-local addresses tell no path
    assert nodestate.parse_ip_addresses(captured("ip-addr.lo.json")) == ["127.0.0.1/8", "::1/128"]
    eth = ('[{"ifname":"eth0","addr_info":[{"family":"inet","local":"198.18.4.1",'
           '"prefixlen":24,"scope":"global"},{"family":"inet6","local":"fe80::1",'
           '"prefixlen":64,"scope":"link"}]}]')
    assert nodestate.parse_ip_addresses(eth) == ["198.18.4.1/24"]
    assert nodestate.parse_ip_addresses(None) == [] == nodestate.parse_ip_addresses("{broken")
    # read for real on this node
    state = nodestate.node_state(["lo"], linerate.run_quietly)
    assert "127.0.0.1/8" in state["interfaces"]["lo"]["addresses"]
