"""tune.yml and revert.yml, for real: ansible-playbook over ssh into the
virtual cluster's nodes, real sysctls in each node's network namespace, real
MTU and offload changes on their veths, files in each node's own /etc.

The host's own settings are compared before and after every test: tuning
the nodes must never reach the root namespace.
"""

import functools
import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import require
from netbench import paths
from helpers.tune import (BIN, NODE_SYSCTLS, assert_ok, node_view, playbook, recap, set_udev,
                          sysctls)
from helpers.vcluster import cluster, ssh

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

PROFILE = yaml.safe_load((paths.REPO / "playbooks/profiles/ethernet_1g.yml").read_text())


def test_apply_verify_rerun_check_and_revert_on_the_nodes(tmp_path, host_untouched):
    record = tmp_path / "tuning-state.json"
    with cluster("tunea", nodes=2, rate="1gbit", switch_mtu=9000) as state:
        nodes = state["nodes"]
        # a user's plain ansible-playbook, Ansible's own strategy; the
        # other tuning tests run it as `netbench tune` does (tuning.engine)
        as_user = functools.partial(playbook, state, stock=True)
        for n in nodes:             # like CI's machine: no udev, no /etc/udev/rules.d
            set_udev(state, n, running=False)
        baseline = {n["name"]: node_view(state, n) for n in nodes}
        assert all(v["mtu"] == 1500 and v["files"] == [] for v in baseline.values())

        # check mode shows the diff and changes nothing
        check = as_user("tune.yml", "-e", "tune_profile=ethernet_1g", "--check",
                         "--diff", record=record)
        assert_ok(check)
        assert "+net.ipv4.tcp_rmem = 4096 131072 16777216" in check.stdout
        assert "would run: ip link set dev eth0 mtu 9000" in check.stdout
        assert {n["name"]: node_view(state, n) for n in nodes} == baseline
        assert not record.exists()

        # apply: every node takes the profile, in its own namespace and /etc
        apply = as_user("tune.yml", "-e", "tune_profile=ethernet_1g", record=record)
        assert_ok(apply)
        wanted = {k: " ".join(str(v).split())
                  for k, v in PROFILE["settings"]["sysctl"].items() if k in NODE_SYSCTLS}
        for n in nodes:
            view = node_view(state, n)
            assert view["sysctl"] == wanted
            assert view["mtu"] == PROFILE["settings"]["nic"]["mtu"]
            assert set(view["features"].values()) == {"on"}
            assert "/etc/sysctl.d/90-netbench.conf" in view["files"]
            # no udev, no NetworkManager: live only, and no rules folder made for nothing
            assert "/etc/udev/rules.d/70-netbench.rules" not in view["files"]
            assert ssh(state, n["name"], "test -e /etc/udev/rules.d").returncode == 1
        # the record names what a veth or a namespace could not take
        state_record = json.loads(record.read_text())
        assert state_record["profile"] == "ethernet_1g"
        assert set(state_record["hosts"]) == {n["name"] for n in nodes}
        node_record = state_record["hosts"][nodes[0]["name"]]
        assert any("coalesce adaptive-rx unsupported" in u for u in node_record["nic"]["unsupported"])
        assert any(u.startswith("eth0: rings") for u in node_record["nic"]["unsupported"])
        assert any(u.startswith("net.core.rmem_max: read-only")
                   for u in node_record["sysctl"]["unsupported"])
        assert node_record["reboot_required"] is False
        assert node_record["nic"]["persisted_with"] == "none"
        assert any(u.startswith("persistence: not persisted: no persistence mechanism")
                   for u in node_record["nic"]["unsupported"])
        assert state_record["state"] == "tuned" and state_record["failed"] == {}
        assert "unsupported, skipped" in apply.stdout

        # a second run changes nothing
        again = as_user("tune.yml", "-e", "tune_profile=ethernet_1g", record=record)
        assert_ok(again)
        assert {h: c["changed"] for h, c in recap(again).items()} == {n["name"]: 0 for n in nodes}

        # drift on one node is put right by the handler, and only there
        subprocess.run(["ip", "netns", "exec", nodes[0]["namespace"], "sysctl", "-qw",
                        "net.ipv4.tcp_mtu_probing=0"], check=True)
        fix = as_user("tune.yml", "-e", "tune_profile=ethernet_1g", "--tags", "sysctl",
                       record=record)
        assert_ok(fix)
        assert recap(fix)[nodes[0]["name"]]["changed"] >= 1
        assert recap(fix)[nodes[1]["name"]]["changed"] == 0
        assert sysctls(nodes[0], ["net.ipv4.tcp_mtu_probing"]) == {"net.ipv4.tcp_mtu_probing": "1"}

        # revert restores the recorded baseline exactly and removes the files
        revert = as_user("revert.yml", record=record)
        assert_ok(revert)
        assert {n["name"]: node_view(state, n) for n in nodes} == baseline
        assert not record.exists()


def test_errors_are_per_host_and_the_rest_proceed(tmp_path, host_untouched):
    record = tmp_path / "tuning-state.json"
    with cluster("tuneb", nodes=2, rate="none", switch_mtu=9000) as state:
        first, second = state["nodes"]
        before = node_view(state, first)

        bad = playbook(state, "tune.yml", "-e", "tune_profile=warp", record=record)
        assert bad.returncode == 2
        for n in state["nodes"]:
            assert f"{n['name']}: tune_profile=warp is not a profile; use one of " \
                   "ethernet_100g, ethernet_10g_25g, ethernet_1g, infiniband, omnipath" in bad.stdout
        nic = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "-e",
                       '{"tune_nic_interfaces": ["ib9"]}', "--tags", "nic", record=record)
        assert nic.returncode == 2
        assert "tune_nic_interfaces ib9: no interface ib9 on this host" in nic.stdout
        assert node_view(state, first) == before

        # one node unreachable (its link is down): reported, the other is tuned; its driver
        # options land in its own /etc/modprobe.d without a reload
        subprocess.run(["ip", "-n", second["namespace"], "link", "set", "eth0", "down"],
                       check=True)
        partial = playbook(state, "tune.yml", "-e", "tune_profile=ethernet_1g", "-e",
                           "tune_flavour=latency", "-e", '{"tune_modules_drivers": ["e1000e"]}',
                           record=record)
        assert partial.returncode == 4, partial.stdout[-3000:]
        counts = recap(partial)
        assert counts[second["name"]]["unreachable"] == 1
        assert counts[first["name"]]["failed"] == 0 and counts[first["name"]]["changed"] > 0
        view = node_view(state, first)
        assert view["mtu"] == 9000 and view["features"]["generic-receive-offload"] == "off"
        conf = ssh(state, first["name"], "cat /etc/modprobe.d/netbench-e1000e.conf").stdout
        assert "options e1000e InterruptThrottleRate=100000" in conf
        assert not Path("/etc/modprobe.d/netbench-e1000e.conf").exists()
        state_record = json.loads(record.read_text())
        assert state_record["not_tuned"] == [second["name"]]
        assert state_record["hosts"][first["name"]]["modules"]["options"] == {
            "e1000e": {"InterruptThrottleRate": "100000"}}

        revert = playbook(state, "revert.yml", "--limit", first["name"], record=record)
        assert_ok(revert)
        assert node_view(state, first) == before


def test_ansible_lint_production_profile():
    tool = BIN / "ansible-lint"
    require(tool.exists(), "ansible-lint missing: pip install -e '.[test]'")
    proc = subprocess.run([str(tool), "tune.yml", "revert.yml", "playbooks/", "inventory/"],
                          capture_output=True, text=True, timeout=600, cwd=paths.REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in proc.stderr + proc.stdout
