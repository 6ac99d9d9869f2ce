"""`python -m netbench.probe.nodestate [--interface IF ...]`: the settings the
tuning profiles touch (playbooks/profiles/*.yml), as this node has them
now, as one line `# node_state {json}` for the job's output.

Each case's job runs it on its nodes before the benchmark, so the record
says what tuning the case ran under, read at run time on the node itself:
the sysctls the profiles set, per interface its MTU, offloads, interrupt
coalescing and rings (ethtool) and its addresses (what tells which
interface carries the traffic to the other nodes), the kernel modules' parameters the
profiles set, the CPU frequency governor, and UCX's configuration file and
UCX_ variables.  A setting the node does not have (no cpufreq in a VM, an
interface without coalescing) is null.  The parsers are pure and tested
on captured text.
"""

import argparse
import functools
import json
import os
import re
import socket
import sys
from pathlib import Path

from .. import paths
from ..datafiles import load_yaml
from .linerate import marked_objects, run_quietly

MARKER = "# node_state "
PROFILES = paths.REPO / "playbooks" / "profiles"
UCX_CONF = Path("/etc/ucx/ucx.conf")


#: sysctls read besides the profiles': the diagnosis rules read them
#: (netbench/data/diagnosis.yaml: single copy between ranks needs ptrace)
ALSO_READ = ("kernel.yama.ptrace_scope",)


@functools.cache
def touched(folder=PROFILES):
    """{sysctl: [...], features: [...], coalesce: [...], rings: [...],
    modules: {module: [parameter]}} that any profile or flavour sets."""
    found = {"sysctl": set(), "features": set(), "coalesce": set(), "rings": set(),
             "modules": {}}
    for path in sorted(Path(folder).glob("*.yml")):
        profile = load_yaml(path, top=None) or {}
        parts = [profile.get("settings") or {}] + list((profile.get("flavours") or {}).values())
        for part in parts:
            found["sysctl"] |= set((part.get("sysctl") or {}))
            nic = part.get("nic") or {}
            for key in ("features", "coalesce", "rings"):
                found[key] |= set(nic.get(key) or {})
            for module, params in (part.get("modules") or {}).items():
                found["modules"].setdefault(module, set()).update(params or {})
    found["sysctl"] |= set(ALSO_READ)
    return {key: sorted(v) if isinstance(v, set) else {m: sorted(p) for m, p in v.items()}
            for key, v in found.items()}


def read(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def sysctl(name, proc=Path("/proc/sys")):
    """A sysctl's value as `sysctl -n` prints it (whitespace collapsed)."""
    value = read(proc / name.replace(".", "/"))
    return " ".join(value.split()) if value is not None else None


def parse_ethtool_features(text):
    """{feature: "on"|"off"} from `ethtool -k IF`."""
    return {m[1]: m[2] for m in re.finditer(r"^\s*([\w-]+):\s+(on|off)", text or "", re.M)}


def parse_ethtool_settings(text):
    """{key: value} of `ethtool -c IF` (coalescing) or `-g IF` (rings: the
    current settings, after "Current hardware settings")."""
    text = text or ""
    current = text.split("Current hardware settings:", 1)
    body = current[1] if len(current) == 2 else text
    found = {m[1].lower().replace(" ", "-"): m[2].strip()
             for m in re.finditer(r"^([A-Za-z][\w -]*?):\s+(\S+)\s*$", body, re.M)}
    # "Adaptive RX: off  TX: n/a": two settings on one line
    for m in re.finditer(r"^Adaptive RX:\s+(\S+)\s+TX:\s+(\S+)", body, re.M):
        found.update({"adaptive-rx": m[1], "adaptive-tx": m[2]})
    return {k: None if v == "n/a" else v for k, v in found.items()}


def parse_ip_addresses(text):
    """["198.18.1.1/24", "2001:db8::1/64"]: the addresses with their prefix
    lengths of `ip -j addr show dev IF`'s JSON; link-local ones left out
    (every link has fe80::/64: it tells no path apart).  [] when there is
    nothing to read."""
    try:
        links = json.loads(text or "[]")
    except ValueError:
        return []
    return [f"{a['local']}/{a['prefixlen']}" for link in links if isinstance(link, dict)
            for a in link.get("addr_info") or []
            if isinstance(a, dict) and a.get("local") and "prefixlen" in a
            and a.get("scope") != "link"]


def pick(settings, names):
    """`names` of `settings`, null where the node has no such setting."""
    return {name: settings.get(name) for name in names}


def interface_state(interface, run, want, sysfs=Path("/sys/class/net")):
    folder = sysfs / interface
    mtu = read(folder / "mtu")
    return {"mtu": int(mtu) if mtu and mtu.isdigit() else None,
            "features": pick(parse_ethtool_features(run(["ethtool", "-k", interface])),
                             want["features"]),
            "coalesce": pick(parse_ethtool_settings(run(["ethtool", "-c", interface])),
                             want["coalesce"]),
            "rings": pick(parse_ethtool_settings(run(["ethtool", "-g", interface])),
                          want["rings"]),
            "addresses": parse_ip_addresses(run(["ip", "-j", "addr", "show", "dev", interface]))}


def default_interfaces(sysfs=Path("/sys/class/net")):
    """The node's up interfaces that carry traffic to other nodes: not
    loopback, bridges or bond slaves' masters' virtual helpers."""
    found = []
    for folder in sorted(sysfs.iterdir()) if sysfs.is_dir() else []:
        if folder.name == "lo" or (folder / "bridge").exists():
            continue
        if read(folder / "operstate") in ("up", "unknown") and read(folder / "address"):
            found.append(folder.name)
    return found


def governor(sysfs=Path("/sys/devices/system/cpu")):
    values = {read(p) for p in sysfs.glob("cpu[0-9]*/cpufreq/scaling_governor")}
    values.discard(None)
    return ",".join(sorted(values)) if values else None


def node_state(interfaces, run, env=None, want=None):
    """This node's state (see the module's docstring)."""
    want = want or touched()
    env = os.environ if env is None else env
    return {"host": socket.gethostname(),
            "sysctl": {name: sysctl(name) for name in want["sysctl"]},
            "interfaces": {i: interface_state(i, run, want) for i in interfaces},
            "modules": {m: {p: read(f"/sys/module/{m}/parameters/{p}") for p in params}
                        for m, params in want["modules"].items()},
            "governor": governor(),
            "ucx": {"conf": read(UCX_CONF),
                    "env": {k: v for k, v in sorted(env.items()) if k.startswith("UCX_")}}}


def parse_job_output(text):
    """{host: state} of every `# node_state` line of a job's output (the
    ranks of one node print the same)."""
    return {state["host"]: state for state in marked_objects(text, MARKER)
            if isinstance(state.get("host"), str)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interface", action="append", default=[],
                        help="an interface to read (default: every up interface but lo; "
                             "`lo` alone for ranks on one node)")
    args = parser.parse_args(argv)
    interfaces = args.interface or default_interfaces()
    print(MARKER + json.dumps(node_state(interfaces, run_quietly)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
