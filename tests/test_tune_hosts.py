"""tune.yml on hosts as they come, for real (issue #14, items 7 and 13): no
udev and no /etc/udev/rules.d (CI's fresh Debian VM, every namespace node), a
step that fails after others applied their settings, an interface that
carries the IPv6 default route, interfaces named on the command line.

Everything happens inside the nodes' namespaces and /etc overlays; the
host's own settings are compared before and after (host_untouched).
"""

import json
import subprocess

import pytest

from helpers.tune import assert_ok, node_view, playbook, recap, set_udev
from helpers.vcluster import cluster, ssh

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

RULE = "/etc/udev/rules.d/70-netbench.rules"
NOT_PERSISTED = "persistence: not persisted: no persistence mechanism"
# the tests of interface selection leave persistence out of it
LIVE_ONLY = ("-e", "tune_nic_persist=none")


def mtus(node):
    """MTU of every interface of a node but lo."""
    out = subprocess.run(["ip", "-n", node["namespace"], "-j", "link", "show"],
                         capture_output=True, text=True, check=True).stdout
    return {link["ifname"]: link["mtu"] for link in json.loads(out) if link["ifname"] != "lo"}


def in_node(node, *argv):
    subprocess.run(["ip", "-n", node["namespace"], *argv], check=True)


def veth_pair(node, a, b):
    """A second and a third veth inside one node: veth is the driver the
    virtual cluster tunes, so only the default-route rule protects them."""
    in_node(node, "link", "add", a, "type", "veth", "peer", "name", b)
    in_node(node, "link", "set", a, "up")
    in_node(node, "link", "set", b, "up")


def host_record(state, node):
    out = ssh(state, node["name"], "cat /etc/ansible/facts.d/netbench_state.fact")
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_no_udev_is_reported_and_a_failure_mid_play_leaves_the_record(tmp_path, host_untouched):
    record = tmp_path / "tuning-state.json"
    with cluster("tunec", nodes=2, rate="none", switch_mtu=9000) as state:
        with_udev, bare = state["nodes"]
        # neither node has /etc/udev/rules.d; only the first has a running udev
        set_udev(state, with_udev, running=True)
        set_udev(state, bare, running=False)
        baseline = {n["name"]: node_view(state, n) for n in state["nodes"]}

        apply = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", record=record)
        assert_ok(apply)
        tuned = json.loads(record.read_text())
        assert tuned["state"] == "tuned" and tuned["failed"] == {} and tuned["not_tuned"] == []
        # where udev runs, its rules folder is made and the rule written
        assert RULE in node_view(state, with_udev)["files"]
        assert tuned["hosts"][with_udev["name"]]["nic"]["persisted_with"] == "udev"
        # where nothing would read a rule, none is written, and the record says so
        view = node_view(state, bare)
        assert view["mtu"] == 9000 and RULE not in view["files"]
        assert ssh(state, bare["name"], "test -e /etc/udev").returncode == 1
        nic = tuned["hosts"][bare["name"]]["nic"]
        assert nic["persisted_with"] == "none"
        assert any(u.startswith(NOT_PERSISTED) for u in nic["unsupported"])
        assert f"{bare['name']}: NIC settings unsupported, skipped:" in apply.stdout

        revert = playbook(state, "revert.yml", record=record)
        assert_ok(revert)
        assert {n["name"]: node_view(state, n) for n in state["nodes"]} == baseline

        # the rule cannot be written (a folder under /proc): the first node
        # fails after its sysctls, MTU and offloads were applied; its record
        # lists them and where it stopped, and the other node is tuned
        broken = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g",
                          "-e", "tune_nic_udev_rule=/proc/netbench/70-netbench.rules",
                          record=record)
        assert broken.returncode == 2, broken.stdout[-3000:]
        counts = recap(broken)
        assert counts[with_udev["name"]]["failed"] == 1 and counts[bare["name"]]["failed"] == 0
        assert f"{with_udev['name']}: tuning stopped in nic (Make room for the udev rule): " \
               in broken.stdout
        assert node_view(state, with_udev)["mtu"] == 9000
        mine = host_record(state, with_udev)
        assert mine is not None, "no tuning record on the host that failed part-way"
        assert mine["failed"]["concern"] == "nic"
        assert mine["failed"]["task"] == "Make room for the udev rule"
        assert "/proc/netbench" in mine["failed"]["message"]
        assert mine["sysctl"]["applied"]["net.ipv4.tcp_mtu_probing"] == "1"
        assert mine["nic"]["interfaces"]["eth0"]["mtu"] == 9000
        assert mine["nic"]["persisted_with"] == "none"
        assert "modules" not in mine          # never reached
        partial = json.loads(record.read_text())
        assert partial["state"] == "incomplete"
        assert set(partial["failed"]) == {with_udev["name"]}
        assert partial["hosts"][with_udev["name"]] == mine
        assert "failed" not in partial["hosts"][bare["name"]]
        assert partial["hosts"][bare["name"]]["nic"]["interfaces"]["eth0"]["mtu"] == 9000

        # the baseline recorded before the failure brings the node back
        revert = playbook(state, "revert.yml", record=record)
        assert_ok(revert)
        assert {n["name"]: node_view(state, n) for n in state["nodes"]} == baseline


def test_the_interface_of_the_ipv6_default_route_is_not_tuned(tmp_path, host_untouched):
    record = tmp_path / "tuning-state.json"
    with cluster("tuned", nodes=1, rate="none", switch_mtu=9000) as state:
        (node,) = state["nodes"]
        # the node's IPv6 default route leaves by v6a (benchmarking range,
        # RFC 5180); its IPv4 traffic stays on eth0, which has no default route
        veth_pair(node, "v6a", "v6b")
        in_node(node, "-6", "addr", "add", "2001:2::2/64", "dev", "v6a", "nodad")
        in_node(node, "-6", "route", "add", "default", "via", "2001:2::1", "dev", "v6a")
        before = mtus(node)
        assert before == {"eth0": 1500, "v6a": 1500, "v6b": 1500}

        apply = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "--tags", "nic",
                         *LIVE_ONLY, record=record)
        assert_ok(apply)
        assert mtus(node) == {"eth0": 9000, "v6a": 1500, "v6b": 9000}
        assert f"{node['name']}: v6a not tuned: carries a default route" in apply.stdout
        nic = json.loads(record.read_text())["hosts"][node["name"]]["nic"]
        assert sorted(nic["interfaces"]) == ["eth0", "v6b"]

        # asked for by name, it is refused with one line, before any change
        named = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "--tags", "nic",
                         "-e", '{"tune_nic_interfaces": ["v6a"]}', *LIVE_ONLY, record=record)
        assert named.returncode == 2
        assert f"{node['name']}: tune_nic_interfaces v6a: v6a carries a default route" \
               in named.stdout
        assert mtus(node)["v6a"] == 1500

        revert = playbook(state, "revert.yml", record=record)
        assert_ok(revert)
        assert mtus(node) == before


def test_interfaces_given_as_a_string_are_a_list(tmp_path, host_untouched):
    record = tmp_path / "tuning-state.json"
    with cluster("tunee", nodes=1, rate="none", switch_mtu=9000) as state:
        (node,) = state["nodes"]
        veth_pair(node, "xa", "xb")
        before = mtus(node)

        # -e tune_nic_interfaces=eth0 is the list [eth0], not e, t, h, 0
        one = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "--tags", "nic",
                       "-e", "tune_nic_interfaces=eth0", *LIVE_ONLY, record=record)
        assert_ok(one)
        assert mtus(node) == {"eth0": 9000, "xa": 1500, "xb": 1500}
        nic = json.loads(record.read_text())["hosts"][node["name"]]["nic"]
        assert list(nic["interfaces"]) == ["eth0"]

        # and a comma-separated string is a list of several
        two = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "--tags", "nic",
                       "-e", "tune_nic_interfaces=eth0,xb", *LIVE_ONLY, record=record)
        assert_ok(two)
        assert mtus(node) == {"eth0": 9000, "xa": 1500, "xb": 9000}

        revert = playbook(state, "revert.yml", record=record)
        assert_ok(revert)
        assert mtus(node) == before
