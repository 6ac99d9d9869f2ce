"""A degraded node on a running virtual cluster (`netbench vcluster fault`):
what the fabric sweep must find, set on exactly one node and one direction,
shown by `status`, and cleared back to the cluster's link settings.  A
rejected fault changes nothing, `vcluster mtu` keeps the faults, and
`status` reports what is on the links.  Status is read for this test's own
cluster only: other clusters of the machine may be degraded."""

import json
import re
import subprocess

import pytest

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


def own_status(name, *args):
    """`vcluster status` of cluster `name` only: (text, its JSON entry)."""
    text = netbench_cli("vcluster", "status", "--name", name, *args)
    data = json.loads(netbench_cli("vcluster", "status", "--name", name, "--json").stdout)
    assert text.returncode == 0 and len(data) == 1, text.stderr
    return text.stdout, data[0]


def test_a_fault_degrades_one_node_one_way_and_clears():
    with cluster("tfault", nodes=3, rate="1gbit", mtu=1500, switch_mtu=9000) as state:
        first, second, third = state["nodes"]
        proc = netbench_cli("vcluster", "fault", "--name", "tfault", "--node", "2",
                            "--rate", "333mbit", "--direction", "out")
        assert proc.returncode == 0, proc.stderr
        assert tbf_rates(state, second) == {"out": 333, "in": 1000}
        assert tbf_rates(state, first) == tbf_rates(state, third) == {"out": 1000, "in": 1000}

        text, status = own_status("tfault")
        assert "DEGRADED on purpose" in text and "rate_mbps=333" in text
        assert status["faults"] == [{"node": second["name"], "rate": "333mbit",
                                     "rate_mbps": 333.0, "direction": "out"}]
        assert status["drift"] == []

        # a second kind of fault: one node's MTU below the others'
        assert netbench_cli("vcluster", "fault", "--name", "tfault", "--node", third["name"],
                            "--mtu", "1000").returncode == 0
        assert mtu_of(third) == 1000 and mtu_of(first) == 1500

        for node in (second, third):
            assert netbench_cli("vcluster", "fault", "--name", "tfault", "--node",
                                node["name"], "--clear").returncode == 0
        assert all(tbf_rates(state, n) == {"out": 1000, "in": 1000} for n in state["nodes"])
        assert mtu_of(third) == 1500
        text, status = own_status("tfault")
        assert "DEGRADED" not in text and status["faults"] == [] and status["drift"] == []


def test_a_fault_names_what_is_wrong_in_one_line():
    with cluster("tfault", nodes=2, rate="1gbit") as state:
        for args, message in ((["--node", "9", "--rate", "1mbit"], "no node '9'"),
                              (["--node", "1"], "a fault needs --rate, --mtu, both, or --link-down"),
                              (["--node", "1", "--rate", "none"], "a fault needs a rate"),
                              (["--node", "1", "--mtu", "9000"], "--mtu 9000: use 576"),
                              (["--node", "1", "--rate", "abc"], "--rate 'abc'")):
            proc = netbench_cli("vcluster", "fault", "--name", "tfault", *args)
            assert proc.returncode == 2 and message in proc.stderr, (args, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1
        assert all(tbf_rates(state, n) == {"out": 1000, "in": 1000} for n in state["nodes"])


def links_of(state):
    return {n["name"]: (tbf_rates(state, n), mtu_of(n)) for n in state["nodes"]}


def test_a_rejected_fault_changes_nothing_and_status_tells_the_links():
    """Validated before anything changes: neither a bad --mtu after a good
    --rate, nor a bad --mtu on a node with a fault, touches a link; status
    says what is on them."""
    with cluster("tfrej", nodes=3, rate="1gbit", mtu=1500, switch_mtu=9000) as state:
        third = state["nodes"][2]
        assert netbench_cli("vcluster", "fault", "--name", "tfrej", "--node", "3",
                            "--rate", "333mbit").returncode == 0
        before = links_of(state)
        assert before[third["name"]] == ({"out": 333, "in": 333}, 1500)
        for args in (["--node", "3", "--mtu", "100"],
                     ["--node", "1", "--rate", "100mbit", "--mtu", "99999"],
                     ["--node", "3", "--rate", "abc"]):
            proc = netbench_cli("vcluster", "fault", "--name", "tfrej", *args)
            assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (args, proc.stderr)
            assert links_of(state) == before, args
            _, status = own_status("tfrej")
            assert [f["node"] for f in status["faults"]] == [third["name"]], args
            assert status["drift"] == [], status["drift"]


def test_an_mtu_change_keeps_the_faults_and_status_sees_what_others_change():
    with cluster("tfmtu", nodes=3, rate="1gbit", mtu=1500, switch_mtu=9000) as state:
        first, second, third = state["nodes"]
        for args in (["--node", "2", "--rate", "333mbit", "--direction", "in"],
                     ["--node", "3", "--mtu", "1000"]):
            assert netbench_cli("vcluster", "fault", "--name", "tfmtu", *args).returncode == 0
        proc = netbench_cli("vcluster", "mtu", "--name", "tfmtu", "4000")
        assert proc.returncode == 0, proc.stderr
        assert tbf_rates(state, second) == {"out": 1000, "in": 333}
        assert mtu_of(third) == 1000 and mtu_of(first) == mtu_of(second) == 4000
        _, status = own_status("tfmtu")
        assert len(status["faults"]) == 2 and status["drift"] == []
        assert status["link"]["mtu"] == 4000
        # a link changed behind netbench's back: status says so
        subprocess.run(["tc", "qdisc", "del", "dev", first["veth"], "root"], check=True)
        text, status = own_status("tfmtu")
        assert status["drift"] == [f"{first['name']} receives at unshaped, recorded "
                                   f"1000 Mbit/s"], status["drift"]
        assert "LINKS DIFFER" in text


def test_a_change_that_fails_half_way_is_taken_back(monkeypatch):
    """All or nothing: a step that fails after others succeeded (here the
    last shaping of a fault, the third node of an MTU change) puts back
    what the earlier steps changed, and nothing is recorded."""
    from netbench import vcluster
    from netbench.vcluster import linkstate
    real_run, real_shape = linkstate.run, linkstate.shape
    with cluster("tfrb", nodes=3, rate="1gbit", mtu=1500, switch_mtu=9000) as state:
        before = links_of(state)

        def failing_shape(prefix, dev, link):
            if dev == state["nodes"][0]["veth"] and link["rate_mbps"] == 100:
                raise vcluster.VclusterError("tc: injected failure")
            return real_shape(prefix, dev, link)
        monkeypatch.setattr(linkstate, "shape", failing_shape)
        with pytest.raises(vcluster.VclusterError, match="injected failure"):
            vcluster.set_fault("tfrb", "1", rate="100mbit", mtu=1000)
        assert links_of(state) == before
        assert not vcluster.load_state("tfrb").get("faults")
        monkeypatch.setattr(linkstate, "shape", real_shape)

        def failing_run(argv, **kw):
            if argv[:3] == ["ip", "-n", state["nodes"][2]["namespace"]] and "4000" in argv:
                raise vcluster.VclusterError("ip: injected failure")
            return real_run(argv, **kw)
        monkeypatch.setattr(linkstate, "run", failing_run)
        with pytest.raises(vcluster.VclusterError, match="injected failure"):
            vcluster.set_mtu("tfrb", 4000)
        monkeypatch.setattr(linkstate, "run", real_run)
        assert links_of(state) == before
        assert vcluster.load_state("tfrb")["link"]["mtu"] == 1500
        _, status = own_status("tfrb")
        assert status["drift"] == [], status["drift"]
