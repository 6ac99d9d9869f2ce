"""The tuning playbooks run for real on a virtual cluster's nodes, and
what a node and the host have (the conftest fixture `host_untouched`)."""

import re
import subprocess
import sys
from pathlib import Path

from conftest import require
from netbench import paths
from netbench.tuning import engine

from .vcluster import ssh

BIN = Path(sys.executable).parent
# what a namespace node can take of ethernet_1g (throughput); net.core.* are
# the host's and must be reported, not set
NODE_SYSCTLS = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mtu_probing",
                "net.ipv4.tcp_slow_start_after_idle"]
HOST_SYSCTLS = NODE_SYSCTLS + ["net.core.rmem_max", "net.core.wmem_max"]
NODE_FILES = ["/etc/sysctl.d/90-netbench.conf", "/etc/udev/rules.d/70-netbench.rules",
              "/etc/ansible/facts.d/netbench_sysctl.fact", "/etc/ansible/facts.d/netbench_nic.fact",
              "/etc/ansible/facts.d/netbench_state.fact", "/etc/modprobe.d/netbench-e1000e.conf"]


def playbook(state, name, *args, record=None, stock=False):
    """ansible-playbook as `netbench tune` runs it (Mitogen's strategy:
    tuning.engine), or `stock` as a user's plain command does."""
    tool = BIN / "ansible-playbook"
    require(tool.exists(), "ansible-core missing: pip install -e '.[test]'")
    argv = [str(tool), "-i", state["files"]["inventory"], name, *args]
    if record:
        argv += ["-e", f"tune_record_file={record}"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=paths.REPO,
                          env=None if stock else engine.environment())


def recap(proc):
    """PLAY RECAP counters per host."""
    rows = re.findall(r"^(\S+)\s+: ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)",
                      proc.stdout, re.M)
    return {h: dict(zip(["ok", "changed", "unreachable", "failed"], map(int, v)))
            for h, *v in rows}


def sysctls(node, keys):
    out = subprocess.run(["ip", "netns", "exec", node["namespace"], "sysctl", "-n", *keys],
                         capture_output=True, text=True, check=True).stdout
    return dict(zip(keys, (" ".join(line.split()) for line in out.splitlines())))


def host_sysctls():
    out = subprocess.run(["sysctl", "-n", *HOST_SYSCTLS], capture_output=True, text=True,
                         check=True).stdout
    return dict(zip(HOST_SYSCTLS, out.splitlines()))


def node_view(state, node):
    """What a node has now: its sysctls, MTU, offloads and netbench's files."""
    script = ("cat /sys/class/net/eth0/mtu; ethtool -k eth0 | grep -E "
              "'^(tcp-segmentation|generic-segmentation|generic-receive)-offload'; "
              + "; ".join(f"test -e {f} && echo has {f}" for f in NODE_FILES) + "; true")
    out = ssh(state, node["name"], script)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    return {"sysctl": sysctls(node, NODE_SYSCTLS), "mtu": int(lines[0]),
            "features": dict(line.split(": ")[:2] for line in lines[1:4]),
            "files": sorted(line[4:] for line in lines[4:])}


def assert_ok(proc):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


# what makes a host look as if udev runs (its control socket) and where udev
# rules live: hidden or faked inside a node only, never on the host
UDEV_PATHS = ["/run/udev/control", "/etc/udev", "/etc/udev/rules.d"]


def set_udev(state, node, running):
    """Give a node a udev or none, whatever the host has: an empty /run
    (with sshd's privilege separation folder) and an empty /etc/udev, mounted
    in the node's own mount namespace, which every later ssh session into the
    node shares; `running` adds udev's control socket (a plain file: tune.yml
    only looks for it).  The node then has no /etc/udev/rules.d."""
    script = ("set -e; mount -t tmpfs netbench-run /run; mkdir -p /run/sshd; "
              "if [ -d /etc/udev ]; then mount -t tmpfs netbench-udev /etc/udev; fi; "
              + ("mkdir /run/udev; : > /run/udev/control; " if running else "")
              + "test ! -e /etc/udev/rules.d")
    out = ssh(state, node["name"], script)
    assert out.returncode == 0, out.stderr
    out = ssh(state, node["name"], "test -e /run/udev/control && echo udev; test -e /etc/udev/rules.d "
                                   "&& echo rules; true")
    assert out.stdout.split() == (["udev"] if running else []), out.stdout
