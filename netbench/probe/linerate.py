"""The line rate of the link a partition's nodes talk over, discovered on
the node itself, and the interconnect class it implies (issue #25).

Where the rate comes from, in order (`LineRate.source`):

- ``declared``   the partition's ``line_rate_mbps`` extra: always wins;
- ``tbf``        a virtual cluster's token bucket (its partition declares the
                 rate it shapes to; netbench/vcluster/systems.py);
- ``infiniband`` /sys/class/infiniband/<dev>/ports/<n>/rate, for an
                 InfiniBand, Omni-Path or RoCE port (its net device's
                 ``device/infiniband`` names the HCA);
- ``sysfs``      /sys/class/net/<if>/speed;
- ``ethtool``    ``ethtool <if>``'s ``Speed:`` line, where sysfs cannot say.

Which interface: the partition's declared one (``extras.interface``: a net
device such as ``ib0``, or an HCA port such as ``mlx5_0:1``), else the one
carrying the route to another node of the job (``ip route get <peer>``).
Virtual interfaces report no line rate: a veth's or a bridge's sysfs speed
reads 10000 whatever carries its packets, a tun/ifb/dummy fails to read;
a VLAN or macvlan is followed to the device below it.

The parsers are pure and tested on captured text (tests/data/linerate/);
`discover` reads a sysfs tree whose root is a parameter, so a copy of a
real node's tree can be judged anywhere.  `python -m netbench.probe.linerate`
is what a job runs on each node before its benchmark (checks/judging.py):
it prints one line, ``@ line_rate {json}``.
"""

import argparse
import dataclasses
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

SOURCES = ("declared", "tbf", "infiniband", "sysfs", "ethtool")
#: the line a job prints per node, and parse_job_output reads back
MARKER = "@ line_rate "
#: drivers of virtual devices: what they report is no wire's rate
VIRTUAL_DRIVERS = ("veth", "bridge", "tun", "dummy", "ifb", "vxlan", "geneve", "wireguard")
#: HCA name prefixes whose link layer the sysfs `link_layer` file does not
#: tell apart from InfiniBand (Omni-Path's hfi1 reports "InfiniBand")
OMNIPATH_HCAS = ("hfi1_",)
#: net device drivers of HPE Slingshot NICs (Cassini: cxi; an Ethernet
#: link layer for everything else)
SLINGSHOT_DRIVERS = ("cxi_eth", "cxi_core", "cxi-eth")


@dataclasses.dataclass(frozen=True)
class LineRate:
    """A link's rate in Mbit/s and where it was read; mbps None with `why`
    when none could be found."""
    mbps: float = None
    source: str = None
    interface: str = None
    #: "ethernet", "infiniband", "omnipath", "slingshot", or None
    link_layer: str = None
    why: str = ""
    #: the node it was read on (a job's output names it)
    host: str = None

    def to_json(self):
        return {k: v for k, v in dataclasses.asdict(self).items() if v not in (None, "")}


# ---- parsers of captured text ---------------------------------------------

def parse_sysfs_speed(text):
    """Mbit/s from /sys/class/net/<if>/speed, None for an unknown speed
    (-1, or 4294967295 where the kernel prints SPEED_UNKNOWN unsigned)."""
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if 0 < value < 0xFFFFFFFF else None


_ETHTOOL_SPEED = re.compile(r"^\s*Speed:\s*(\d+)\s*Mb/s\s*$", re.MULTILINE)
_ETHTOOL_DRIVER = re.compile(r"^driver:\s*(\S+)\s*$", re.MULTILINE)


def parse_ethtool_speed(text):
    """Mbit/s from `ethtool <if>`'s Speed: line; None for "Unknown!" or none."""
    found = _ETHTOOL_SPEED.search(text or "")
    return int(found.group(1)) if found else None


def parse_ethtool_driver(text):
    """The driver of `ethtool -i <if>`, or None."""
    found = _ETHTOOL_DRIVER.search(text or "")
    return found.group(1) if found else None


_IB_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((\d+X)\s*([A-Za-z0-9]+)\))?")


def parse_ib_rate(text):
    """(Mbit/s, width, speed name) from a port's sysfs `rate`, e.g.
    "200 Gb/sec (4X HDR)" -> (200000, "4X", "HDR"); None when unreadable."""
    found = _IB_RATE.match(text or "")
    if not found:
        return None
    mbps = float(found.group(1)) * 1000
    return (int(mbps) if mbps.is_integer() else mbps, found.group(2), found.group(3))


_ROUTE_DEV = re.compile(r"\bdev\s+(\S+)")


def parse_route_device(text):
    """The interface of `ip route get <address>`'s answer, or None."""
    found = _ROUTE_DEV.search(text or "")
    return found.group(1) if found else None


def link_layer_of(ib_link_layer, hca, driver=None):
    """"infiniband", "omnipath", "ethernet" (RoCE) or "slingshot" from an HCA
    port's sysfs link_layer and the HCA's name, or a net driver."""
    if driver and driver in SLINGSHOT_DRIVERS:
        return "slingshot"
    if hca and hca.startswith(OMNIPATH_HCAS):
        return "omnipath"
    if (ib_link_layer or "").strip().lower() == "ethernet":
        return "ethernet"
    return "infiniband"


# ---- reading a node's sysfs --------------------------------------------------

def _read(path):
    try:
        return Path(path).read_text()
    except OSError:
        return None


def ib_port_rate(hca, port, sysfs=Path("/sys")):
    """The LineRate of one HCA port (e.g. mlx5_0, 1), or None."""
    folder = Path(sysfs) / "class" / "infiniband" / hca / "ports" / str(port)
    parsed = parse_ib_rate(_read(folder / "rate"))
    if parsed is None:
        return None
    return LineRate(parsed[0], "infiniband", f"{hca}:{port}",
                    link_layer_of(_read(folder / "link_layer"), hca))


def _ib_port_of_netdev(netdev_folder):
    """(HCA, port) behind a net device (IPoIB, RoCE, Omni-Path), or None."""
    hcas = sorted(p.name for p in (netdev_folder / "device" / "infiniband").glob("*"))
    if not hcas:
        return None
    # dev_port counts from 0; HCA ports from 1
    dev_port = parse_sysfs_speed(_read(netdev_folder / "dev_port"))
    return hcas[0], (dev_port or 0) + 1


def _lower_devices(folder):
    return sorted(p.name[len("lower_"):] for p in folder.glob("lower_*"))


def netdev_rate(interface, sysfs=Path("/sys"), ethtool=None, driver=None, depth=0):
    """The LineRate of a net device, following a VLAN or macvlan to its
    lower device; `ethtool(interface)` gives `ethtool <if>`'s text (None:
    not asked), `driver` the driver `ethtool -i` names."""
    folder = Path(sysfs) / "class" / "net" / interface
    if not folder.exists():
        return LineRate(interface=interface, why=f"no network interface {interface!r}")
    ib = _ib_port_of_netdev(folder)
    if ib:
        rate = ib_port_rate(*ib, sysfs=sysfs)
        if rate:
            return dataclasses.replace(rate, interface=interface)
    physical = (folder / "device").exists() or (folder / "bonding").exists()
    if not physical:
        lower = _lower_devices(folder)
        if len(lower) == 1 and not (folder / "bridge").exists() and depth < 4:
            return netdev_rate(lower[0], sysfs, ethtool, None, depth + 1)
        return LineRate(interface=interface, why=(
            f"{interface} is a virtual interface ({driver or 'no device'}): its speed is no "
            f"line rate; declare line_rate_mbps"))
    if driver in VIRTUAL_DRIVERS:
        return LineRate(interface=interface, why=f"{interface} is a {driver}: its speed is "
                                                 f"no line rate; declare line_rate_mbps")
    layer = "slingshot" if driver in SLINGSHOT_DRIVERS else "ethernet"
    speed = parse_sysfs_speed(_read(folder / "speed"))
    if speed:
        return LineRate(speed, "sysfs", interface, layer)
    speed = parse_ethtool_speed(ethtool(interface)) if ethtool else None
    if speed:
        return LineRate(speed, "ethtool", interface, layer)
    return LineRate(interface=interface, link_layer=layer,
                    why=f"{interface} reports no speed (sysfs, ethtool)")


def discover(interface=None, peer=None, sysfs=Path("/sys"), run=None):
    """The LineRate of the declared `interface` (a net device, or an HCA
    port "mlx5_0:1"), else of the one routing to `peer`; `run(argv)` runs
    a command and returns its output (None: nothing is run)."""
    if interface and ":" in interface:
        hca, port = interface.split(":", 1)
        return (ib_port_rate(hca, port, sysfs)
                or LineRate(interface=interface, why=f"no InfiniBand port {interface}"))
    if not interface and peer:
        interface = parse_route_device(run(["ip", "route", "get", peer]) if run else None)
        if not interface:
            return LineRate(why=f"no route to {peer}")
    if not interface:
        return LineRate(why="neither an interface nor a peer to find one by")
    driver = parse_ethtool_driver(run(["ethtool", "-i", interface])) if run else None
    ethtool = (lambda name: run(["ethtool", name])) if run else None
    return netdev_rate(interface, sysfs, ethtool, driver)


def resolve(extras, discovered=()):
    """The partition's LineRate: its declared `line_rate_mbps` (source
    "declared", or the extras' `line_rate_source`: "tbf" where a virtual
    cluster shapes its links), else the slowest of the nodes' `discovered`
    LineRates, else one saying why there is none."""
    declared = extras.get("line_rate_mbps")
    if declared:
        return LineRate(float(declared), extras.get("line_rate_source", "declared"),
                        extras.get("interface"))
    found = [r for r in discovered if r.mbps]
    if found:
        return min(found, key=lambda r: r.mbps)
    reasons = sorted({r.why for r in discovered if r.why})
    return LineRate(why="; ".join(reasons) or "not discovered")


# ---- the class of a discovered link --------------------------------------------

def matching_class(rate, matches):
    """The interconnect class whose `match` (thresholds.yaml: link_layer
    and the line rates it covers, {class: {"link_layer": [...],
    "mbps": [...]}}) fits `rate`, or None."""
    if not rate or not rate.mbps:
        return None
    for cname, match in matches.items():
        if (rate.link_layer in match["link_layer"]
                and any(abs(rate.mbps - m) <= 0.01 * m for m in match["mbps"])):
            return cname
    return None


# ---- what a job prints, and reads back -------------------------------------------

def marked_objects(text, marker):
    """The JSON objects of a job's output lines that start with `marker`
    (one per rank of a node reader's launch); lines that are not one are
    left out."""
    for line in (text or "").splitlines():
        if line.startswith(marker):
            try:
                data = json.loads(line[len(marker):])
            except ValueError:
                continue
            if isinstance(data, dict):
                yield data


def parse_job_output(text):
    """[LineRate] of every `@ line_rate {json}` line (one per node)."""
    fields = {f.name for f in dataclasses.fields(LineRate)}
    return [LineRate(**{k: v for k, v in data.items() if k in fields})
            for data in marked_objects(text, MARKER)]


def run_quietly(argv):
    """A command's stdout, None when it cannot run (a node without ethtool,
    scontrol or ip): what the node readers ask the system."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def peer_from_slurm(run=run_quietly):
    """The address of another node of this Slurm job, or None."""
    names = (run(["scontrol", "show", "hostnames", os.environ.get("SLURM_JOB_NODELIST", "")])
             or "").split()
    me = socket.gethostname().split(".")[0]
    for name in names:
        if name.split(".")[0] != me:
            try:
                return socket.gethostbyname(name)
            except OSError:
                continue
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interface", help="a net device, or an HCA port such as mlx5_0:1")
    parser.add_argument("--peer", help="an address of another node: the route to it names "
                                       "the interface")
    args = parser.parse_args(argv)
    peer = args.peer or (None if args.interface else peer_from_slurm())
    rate = discover(args.interface, peer, run=run_quietly)
    rate = dataclasses.replace(rate, host=socket.gethostname())
    print(MARKER + json.dumps(rate.to_json()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
