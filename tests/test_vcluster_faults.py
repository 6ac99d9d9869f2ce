"""A degraded node on a running virtual cluster (`netbench vcluster fault`):
what the fabric sweep must find, set on exactly one node and one direction,
shown by `status`, and cleared back to the cluster's link settings."""

import json
import re
import subprocess

from helpers.vcluster import cluster, netbench_cli


def tbf_rates(state, node):
    """{'out': Mbit/s, 'in': Mbit/s} of a node's link: its own interface's
    qdisc (what it sends) and the host end's (what it receives)."""
    inside = subprocess.run(["ip", "netns", "exec", node["namespace"], "tc", "qdisc", "show",
                             "dev", "eth0"], capture_output=True, text=True, check=True).stdout
    outside = subprocess.run(["tc", "qdisc", "show", "dev", node["veth"]],
                             capture_output=True, text=True, check=True).stdout

    def rate(text):
        found = re.search(r"tbf .*rate (\d+(?:\.\d+)?)([KMG])bit", text)
        if not found:
            return None
        return round(float(found.group(1)) * {"K": 1e-3, "M": 1, "G": 1e3}[found.group(2)])
    return {"out": rate(inside), "in": rate(outside)}


def mtu_of(node):
    out = subprocess.run(["ip", "-n", node["namespace"], "-j", "link", "show", "eth0"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)[0]["mtu"]


def test_a_fault_degrades_one_node_one_way_and_clears():
    with cluster("tfault", nodes=3, rate="1gbit", mtu=1500, switch_mtu=9000) as state:
        first, second, third = state["nodes"]
        proc = netbench_cli("vcluster", "fault", "--name", "tfault", "--node", "2",
                            "--rate", "333mbit", "--direction", "out")
        assert proc.returncode == 0, proc.stderr
        assert tbf_rates(state, second) == {"out": 333, "in": 1000}
        assert tbf_rates(state, first) == tbf_rates(state, third) == {"out": 1000, "in": 1000}

        status = netbench_cli("vcluster", "status")
        assert "DEGRADED on purpose" in status.stdout and "rate_mbps=333" in status.stdout

        # a second kind of fault: one node's MTU below the others'
        assert netbench_cli("vcluster", "fault", "--name", "tfault", "--node", third["name"],
                            "--mtu", "1000").returncode == 0
        assert mtu_of(third) == 1000 and mtu_of(first) == 1500

        for node in (second, third):
            assert netbench_cli("vcluster", "fault", "--name", "tfault", "--node",
                                node["name"], "--clear").returncode == 0
        assert all(tbf_rates(state, n) == {"out": 1000, "in": 1000} for n in state["nodes"])
        assert mtu_of(third) == 1500
        assert "DEGRADED" not in netbench_cli("vcluster", "status").stdout


def test_a_fault_names_what_is_wrong_in_one_line():
    with cluster("tfault", nodes=2, rate="1gbit") as state:
        for args, message in ((["--node", "9", "--rate", "1mbit"], "no node '9'"),
                              (["--node", "1"], "a fault needs --rate, --mtu or both"),
                              (["--node", "1", "--rate", "none"], "a fault needs a rate"),
                              (["--node", "1", "--mtu", "9000"], "--mtu 9000: use 576")):
            proc = netbench_cli("vcluster", "fault", "--name", "tfault", *args)
            assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1
        assert all(tbf_rates(state, n) == {"out": 1000, "in": 1000} for n in state["nodes"])
