#!/usr/bin/env python3
"""What a host has now of everything netbench's profiles can change, as
one JSON object on stdout.  `netbench tune` runs it on every host (Ansible's
script module) before tuning and after a revert: the two must be equal.

Standard library only, read-only: it runs on the tuned hosts, not in
netbench's venv.  Arguments: the sysctl keys to read (every key a profile
names).
"""

import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys

#: files netbench's roles write (their defaults in playbooks/roles/*/defaults)
FILES = ["/etc/sysctl.d/90-netbench.conf", "/etc/udev/rules.d/70-netbench.rules",
         "/etc/ucx/ucx.conf"]
FILE_PATTERNS = ["/etc/modprobe.d/netbench-*.conf", "/etc/ansible/facts.d/netbench_*.fact",
                 "/etc/systemd/network/*netbench*"]


def sysctl(key):
    try:
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return " ".join(f.read().split())
    except OSError:
        return None


def ethtool(flag, interface):
    """`ethtool FLAG IF` as {setting: value}; {} where the driver has none."""
    if not shutil.which("ethtool"):
        return {}
    out = subprocess.run(["ethtool", flag, interface], capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines()[1:]:
        key, sep, value = line.partition(":")
        if sep and value.strip():
            found[key.strip()] = value.strip()
    return found


def links():
    found = {}
    for path in sorted(glob.glob("/sys/class/net/*")):
        name = os.path.basename(path)
        if name == "lo":
            continue
        with open(path + "/mtu") as f:
            mtu = int(f.read())
        found[name] = {"mtu": mtu, "features": ethtool("-k", name),
                       "coalesce": ethtool("-c", name), "rings": ethtool("-g", name)}
    return found


def governors():
    found = {}
    for path in sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor")):
        with open(path) as f:
            found[path.split("/")[5]] = f.read().strip()
    return found


def files():
    paths = FILES + sorted(p for pattern in FILE_PATTERNS for p in glob.glob(pattern))
    found = {}
    for path in paths:
        try:
            with open(path, "rb") as f:
                found[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            found[path] = None
    return found


def main(keys):
    print(json.dumps({"sysctl": {k: sysctl(k) for k in keys}, "links": links(),
                      "governor": governors(), "files": files()}, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
