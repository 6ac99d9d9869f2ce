"""The virtual cluster, for real: namespaces, sshd, overlays, shaped links.

Every test that brings a cluster up takes it down in a `finally`, and checks
that nothing of it survives (`vcluster.leftovers`).  Clusters get test-only
names, so a user's own `vc` cluster is never touched.
"""

import json
import os
import subprocess
import time

import pytest

from helpers.vcluster import cluster, netbench_cli, require_root, ssh
from netbench import paths, vcluster
from netbench.tuning import loop
from netbench.vcluster import files, netns, nodes

# ---- bring-up, isolation, teardown ------------------------------------------------

def test_three_nodes_up_and_down_well_under_five_seconds():
    require_root()
    name = "tup"
    vcluster.down(name)
    start = time.monotonic()
    proc = netbench_cli("vcluster", "up", "--name", name, "--nodes", "3", "--link", "1gbit")
    up_s = time.monotonic() - start
    try:
        assert proc.returncode == 0, proc.stderr
        status = json.loads(netbench_cli("vcluster", "status", "--json").stdout)
        mine = next(c for c in status if c["name"] == name)
        assert mine["healthy"] and mine["system"] == "vcluster-tup"
        assert [n["name"] for n in mine["nodes"]] == ["tup-n1", "tup-n2", "tup-n3"]
        for node in mine["nodes"]:
            assert node["address"].startswith("198.18.") or node["address"].startswith("198.19.")
            assert netns.alive(node["sshd_pid"])
        assert mine["link"]["rate_mbps"] == 1000 and mine["link"]["interconnect"] == "gige"
        for key in ("inventory", "hostfile", "ssh_key", "ssh_config", "ssh_agent",
                    "reframe_system"):
            assert os.path.exists(mine["files"][key]), key
            # root's files, outside the checkout (which keeps copies for its user)
            assert mine["files"][key].startswith(f"{vcluster.CLUSTERS}/{name}/"), key
        assert mine["owner"] == str(paths.REPO) and mine["mine"]
        assert os.stat(mine["files"]["ssh_key"]).st_mode & 0o777 == 0o600
        assert (paths.REPO / ".vcluster" / name / "inventory.ini").exists()
    finally:
        start = time.monotonic()
        down = netbench_cli("vcluster", "down", "--name", name)
        down_s = time.monotonic() - start
    print(f"\n3-node virtual cluster: up {up_s:.2f} s, down {down_s:.2f} s")
    assert down.returncode == 0, down.stderr
    assert vcluster.leftovers(name) == []
    assert not (paths.REPO / ".vcluster" / name).exists()
    assert up_s + down_s < 5.0


def test_nodes_have_their_own_hostname_etc_and_tcp_stack():
    with cluster("tiso", nodes=2) as state:
        n1, n2 = state["nodes"]
        assert ssh(state, "tiso-n1", "hostname").stdout.strip() == "tiso-n1"
        # /etc is the node's own: a file written there stays there
        assert ssh(state, "tiso-n1", "echo n1 > /etc/netbench-probe").returncode == 0
        assert not os.path.exists("/etc/netbench-probe")
        assert ssh(state, "tiso-n2", "test -e /etc/netbench-probe").returncode != 0
        # the nodes resolve each other by name
        hosts = ssh(state, "tiso-n2", "getent hosts tiso-n1").stdout
        assert n1["address"] in hosts
        # per-namespace sysctls: a node's TCP setting leaves the host's alone
        host_value = open("/proc/sys/net/ipv4/tcp_slow_start_after_idle").read().strip()
        flipped = "0" if host_value == "1" else "1"
        assert ssh(state, "tiso-n1", "sysctl -qw net.ipv4.tcp_slow_start_after_idle="
                   + flipped).returncode == 0
        assert open("/proc/sys/net/ipv4/tcp_slow_start_after_idle").read().strip() == host_value



def test_ansible_shares_one_connection_per_node_and_down_ends_it():
    # tune.yml's tasks ride one ssh connection per node; its socket is in
    # the cluster's root-only folder, and `down` ends the connection with
    # the nodes (a master left running would hold a dead node's session)
    name = "tmux"
    with cluster(name, nodes=2) as state:
        ping = loop.ansible("ansible", state["files"]["inventory"], "all",
                            "-m", "ansible.builtin.ping", "-o", timeout=120)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        control = vcluster.CLUSTERS / name / files.CONTROL_FOLDER
        assert control.stat().st_mode & 0o777 == 0o700 and control.stat().st_uid == 0
        masters = [pid for pid in netns.all_pids()
                   if netns.command_line(pid).startswith(f"ssh: {control}/")]
        assert len(masters) == 2 and len(list(control.iterdir())) == 2
    assert vcluster.leftovers(name) == []
    assert not any(netns.alive(pid) for pid in masters)


def test_sshd_takes_keys_only_and_listens_on_the_node_address_only():
    with cluster("tssh", nodes=1) as state:
        node = state["nodes"][0]
        listening = subprocess.run(["ip", "netns", "exec", node["namespace"], "ss", "-Hltn"],
                                   capture_output=True, text=True).stdout
        assert f"{node['address']}:22" in listening
        assert "0.0.0.0:22" not in listening and "*:22" not in listening
        # without the cluster's key, no way in
        keyless = subprocess.run(
            ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
             "-o", f"UserKnownHostsFile={os.devnull}", "-o", "PubkeyAuthentication=no",
             node["address"], "true"], capture_output=True, text=True, timeout=30)
        assert keyless.returncode != 0 and "Permission denied" in keyless.stderr


def test_up_twice_and_down_twice_change_nothing():
    with cluster("tidem", nodes=2) as state:
        again = netbench_cli("vcluster", "up", "--name", "tidem", "--nodes", "2")
        assert again.returncode == 0 and "already up" in again.stdout
        # other settings are refused (as --slurm is), not silently ignored
        other = netbench_cli("vcluster", "up", "--name", "tidem", "--nodes", "3")
        assert other.returncode == 2 and "2 nodes, not 3" in other.stderr, other.stderr
        assert vcluster.load_state("tidem")["nodes"] == state["nodes"]
    gone = netbench_cli("vcluster", "down", "--name", "tidem")
    assert gone.returncode == 0 and "not up" in gone.stdout


def test_up_on_a_broken_cluster_says_broken_and_what_to_do():
    with cluster("tbrk", nodes=2) as state:
        sshd = state["nodes"][1]["sshd_pid"]
        os.kill(sshd, 9)
        for _ in range(100):
            if not netns.alive(sshd):
                break
            time.sleep(0.05)
        again = netbench_cli("vcluster", "up", "--name", "tbrk", "--nodes", "2")
        assert again.returncode == 2, again.stdout + again.stderr
        assert "nothing changed" not in again.stdout
        assert again.stderr.strip().splitlines() == [
            f"netbench vcluster: cluster tbrk is up but BROKEN (tbrk-n2: sshd (pid {sshd}) is "
            f"not running): take it down first (`netbench vcluster down --name tbrk`), then "
            f"bring it up again"]


def test_a_failed_test_still_leaves_nothing_behind():
    with pytest.raises(RuntimeError, match="test failed"):
        with cluster("tfail", nodes=2) as state:
            # a rank left running in a node, as a crashed MPI job leaves it
            subprocess.Popen(vcluster.ssh_command(state, "tfail-n2", "sleep 300"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            raise RuntimeError("test failed")
    assert vcluster.leftovers("tfail") == []


def test_a_failed_bring_up_is_rolled_back(monkeypatch):
    require_root()
    monkeypatch.setattr(nodes, "SSHD", "/bin/false")
    with pytest.raises(vcluster.VclusterError, match="sshd of tbad-n1 exited"):
        vcluster.up("tbad", nodes=2)
    assert vcluster.leftovers("tbad") == []


def test_bad_input_gets_one_line_naming_the_option():
    for args, words in ((["--link", "fast"], "--link 'fast'"), (["--nodes", "0"], "--nodes 0"),
                        (["--mtu", "100000"], "--mtu 100000"),
                        (["--name", "Bad_Name"], "cluster name 'Bad_Name'")):
        proc = netbench_cli("vcluster", "up", *args)
        assert proc.returncode == 2, args
        assert proc.stderr.count("\n") == 1 and words in proc.stderr, proc.stderr


def test_without_root_one_clear_line(monkeypatch, capsys):
    """As an unprivileged user (the effective uid is what the check reads;
    dropping privileges for real would depend on where the checkout lives)."""
    from netbench import cli
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["vcluster", "up", "--name", "tuser"]) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith("needs root (network namespaces, links, mounts): "
                                "run it with sudo"), err
    assert err.count("\n") == 1
    assert vcluster.leftovers("tuser") == []


def test_the_written_files_describe_the_cluster():
    with cluster("tfile", nodes=3, rate="100mbit", mtu=9000) as state:
        files = state["files"]
        assert open(files["hostfile"]).read().split() == [n["address"] for n in state["nodes"]]
        inventory = open(files["inventory"]).read()
        for node in state["nodes"]:
            assert f"{node['name']} ansible_host={node['address']}" in inventory
        # the cluster's ReFrame systems: without Slurm, the ssh one only
        (system,) = json.load(open(files["reframe_system"]))
        part = system["partitions"][0]
        assert system["name"] == "vcluster-tfile"
        assert part["extras"]["nodes"] == 3 and part["extras"]["interconnect"] == "fast-ethernet"
        assert part["extras"]["line_rate_mbps"] == 100
        # a 9000-byte frame must fit the token bucket, or tbf drops it
        assert state["link"]["burst_bytes"] >= 9000
        tbf = subprocess.run(["tc", "qdisc", "show", "dev", state["nodes"][0]["veth"]],
                             capture_output=True, text=True).stdout
        assert "tbf" in tbf and "100Mbit" in tbf
        assert set(vcluster.link_mtus(state).values()) == {9000}
        vcluster.set_mtu("tfile", 1500)
        assert set(vcluster.link_mtus(state).values()) == {1500}
