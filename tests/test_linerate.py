"""The line rate discovered on a node (netbench/probe/linerate.py, issue #25):
parsers on captured text (tests/data/linerate/), discovery on sysfs trees
laid out as the kernel lays them out, and the class a discovered link
selects (thresholds.yaml `match`)."""

import subprocess
import sys
from pathlib import Path

import pytest

from netbench import references
from netbench.probe import linerate
from netbench.probe.linerate import LineRate

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

DATA = Path(__file__).parent / "data" / "linerate"


def captured(name):
    return (DATA / name).read_text()


# ---- parsers -----------------------------------------------------------------

def test_sysfs_speed_of_a_veth_reads_10000_and_unknown_speeds_read_none():
    assert linerate.parse_sysfs_speed(captured("sysfs-speed-veth.txt")) == 10000
    assert linerate.parse_sysfs_speed(captured("sysfs-speed-unknown.txt")) is None
    assert linerate.parse_sysfs_speed("4294967295\n") is None     # SPEED_UNKNOWN unsigned
    assert linerate.parse_sysfs_speed("") is None
    assert linerate.parse_sysfs_speed(None) is None
    assert linerate.parse_sysfs_speed("25000\n") == 25000


def test_ethtool_speed_and_driver():
    assert linerate.parse_ethtool_speed(captured("ethtool-100g.txt")) == 100000
    assert linerate.parse_ethtool_speed(captured("ethtool-veth.txt")) == 10000
    assert linerate.parse_ethtool_speed(captured("ethtool-virtio-unknown.txt")) is None
    assert linerate.parse_ethtool_speed(None) is None
    assert linerate.parse_ethtool_driver(captured("ethtool-i-veth.txt")) == "veth"


def infiniband_rates():
    for line in captured("infiniband-rates.txt").splitlines():
        if line and not line.startswith("#"):
            text, expected = line.split("\t")
            mbps, width, speed = expected.split()
            yield text, (float(mbps), width, speed)


@pytest.mark.parametrize("text,expected", list(infiniband_rates()))
def test_infiniband_port_rates(text, expected):
    assert linerate.parse_ib_rate(text + "\n") == expected


def test_unreadable_infiniband_rates_are_none():
    assert linerate.parse_ib_rate("") is None
    assert linerate.parse_ib_rate("Unknown") is None


def test_route_device():
    assert linerate.parse_route_device(captured("ip-route-get.txt")) == "nb-tlost"
    assert linerate.parse_route_device("RTNETLINK answers: Network is unreachable") is None


# ---- discovery on a sysfs tree ---------------------------------------------

def netdev(sysfs, name, speed=None, device=True, **files):
    folder = sysfs / "class" / "net" / name
    folder.mkdir(parents=True)
    if speed is not None:
        (folder / "speed").write_text(speed)
    if device:
        (folder / "device").mkdir()
    for fname, text in files.items():
        (folder / fname).write_text(text)
    return folder


def hca_port(sysfs, hca, port, rate, link_layer="InfiniBand"):
    folder = sysfs / "class" / "infiniband" / hca / "ports" / str(port)
    folder.mkdir(parents=True)
    (folder / "rate").write_text(rate + "\n")
    (folder / "link_layer").write_text(link_layer + "\n")


def test_a_physical_nic_is_read_from_sysfs(tmp_path):
    netdev(tmp_path, "ens1f0", "25000\n")
    assert linerate.discover("ens1f0", sysfs=tmp_path) == LineRate(
        25000, "sysfs", "ens1f0", "ethernet")


def test_ethtool_answers_where_sysfs_cannot(tmp_path):
    netdev(tmp_path, "eth0", captured("sysfs-speed-unknown.txt"))
    run = {("ethtool", "eth0"): captured("ethtool-100g.txt"),
           ("ethtool", "-i", "eth0"): "driver: mlx5_core\n"}
    rate = linerate.discover("eth0", sysfs=tmp_path, run=lambda argv: run.get(tuple(argv)))
    assert (rate.mbps, rate.source, rate.link_layer) == (100000, "ethtool", "ethernet")


def test_a_nic_that_reports_no_speed_says_so(tmp_path):
    netdev(tmp_path, "eth0", captured("sysfs-speed-unknown.txt"))
    run = {("ethtool", "eth0"): captured("ethtool-virtio-unknown.txt")}
    rate = linerate.discover("eth0", sysfs=tmp_path, run=lambda argv: run.get(tuple(argv)))
    assert rate.mbps is None and "reports no speed" in rate.why


def test_a_veth_reports_no_line_rate_though_sysfs_says_10000(tmp_path):
    """A veth has no device below it; its 10000 is no wire's rate."""
    netdev(tmp_path, "nb-x-1", captured("sysfs-speed-veth.txt"), device=False)
    rate = linerate.discover("nb-x-1", sysfs=tmp_path,
                             run=lambda argv: captured("ethtool-i-veth.txt")
                             if argv[:2] == ["ethtool", "-i"] else None)
    assert rate.mbps is None
    assert "virtual interface (veth)" in rate.why and "line_rate_mbps" in rate.why


def test_a_vlan_is_followed_to_its_nic_and_a_bridge_is_not(tmp_path):
    netdev(tmp_path, "ens1f0", "100000\n")
    vlan = netdev(tmp_path, "ens1f0.100", "100000\n", device=False)
    (vlan / "lower_ens1f0").mkdir()
    assert linerate.discover("ens1f0.100", sysfs=tmp_path).mbps == 100000
    bridge = netdev(tmp_path, "br0", "10000\n", device=False)
    (bridge / "bridge").mkdir()
    (bridge / "lower_ens1f0").mkdir()
    assert linerate.discover("br0", sysfs=tmp_path).mbps is None


def test_ipoib_reads_its_hca_port(tmp_path):
    ib0 = netdev(tmp_path, "ib0", "-1\n", dev_port="0\n")
    (ib0 / "device" / "infiniband" / "mlx5_0").mkdir(parents=True)
    hca_port(tmp_path, "mlx5_0", 1, "200 Gb/sec (4X HDR)")
    assert linerate.discover("ib0", sysfs=tmp_path) == LineRate(
        200000, "infiniband", "ib0", "infiniband")


def test_a_declared_hca_port_and_roce_and_omnipath(tmp_path):
    hca_port(tmp_path, "mlx5_1", 1, "400 Gb/sec (4X NDR)")
    hca_port(tmp_path, "mlx5_2", 1, "100 Gb/sec (4X EDR)", link_layer="Ethernet")
    hca_port(tmp_path, "hfi1_0", 1, "100 Gb/sec (4X EDR)")
    assert linerate.discover("mlx5_1:1", sysfs=tmp_path) == LineRate(
        400000, "infiniband", "mlx5_1:1", "infiniband")
    assert linerate.discover("mlx5_2:1", sysfs=tmp_path).link_layer == "ethernet"
    assert linerate.discover("hfi1_0:1", sysfs=tmp_path).link_layer == "omnipath"
    assert "no InfiniBand port" in linerate.discover("mlx5_9:1", sysfs=tmp_path).why


def test_the_route_to_a_peer_names_the_interface(tmp_path):
    netdev(tmp_path, "nb-tlost", "10000\n", device=False)
    seen = []

    def run(argv):
        seen.append(argv)
        return captured("ip-route-get.txt") if argv[:2] == ["ip", "route"] else None

    rate = linerate.discover(peer="198.18.1.12", sysfs=tmp_path, run=run)
    assert seen[0] == ["ip", "route", "get", "198.18.1.12"]
    assert rate.interface == "nb-tlost" and rate.mbps is None


def test_this_machines_loopback_has_no_line_rate():
    rate = linerate.discover("lo")
    assert rate.mbps is None and "virtual" in rate.why


# ---- the partition's rate: declared overrides discovered ---------------------

def test_declared_overrides_discovered_and_the_slowest_node_wins():
    nodes = [LineRate(200000, "infiniband", "ib0", "infiniband", host="n1"),
             LineRate(100000, "infiniband", "ib0", "infiniband", host="n2")]
    assert linerate.resolve({}, nodes).host == "n2"
    assert linerate.resolve({"line_rate_mbps": 200000}, nodes) == LineRate(200000.0, "declared")
    assert linerate.resolve({"line_rate_mbps": 1000, "line_rate_source": "tbf"}).source == "tbf"
    none = linerate.resolve({}, [LineRate(why="nb-x-1 is a virtual interface")])
    assert none.mbps is None and "virtual" in none.why


def test_a_jobs_output_is_read_back_per_node():
    text = ("some launcher noise\n"
            '@ line_rate {"mbps": 200000, "source": "infiniband", "interface": "ib0", '
            '"link_layer": "infiniband", "host": "n1"}\n'
            "@ line_rate {not json\n"
            '@ line_rate {"why": "no route to 10.0.0.2", "host": "n2", "future": 1}\n')
    found = linerate.parse_job_output(text)
    assert [r.host for r in found] == ["n1", "n2"]
    assert found[0].mbps == 200000 and found[1].why == "no route to 10.0.0.2"


def test_the_job_snippet_prints_one_line_a_job_can_read():
    proc = subprocess.run([sys.executable, "-m", "netbench.probe.linerate", "--interface", "lo"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (rate,) = linerate.parse_job_output(proc.stdout)
    assert rate.mbps is None and rate.host and "lo" in rate.why


# ---- the class of a discovered link ------------------------------------------

@pytest.mark.parametrize("rate,cname", [
    (LineRate(200000, "infiniband", link_layer="infiniband"), "ib-hdr"),
    (LineRate(400000, "infiniband", link_layer="infiniband"), "ib-ndr"),
    (LineRate(100000, "infiniband", link_layer="omnipath"), "omnipath"),
    (LineRate(200000, "sysfs", link_layer="slingshot"), "slingshot"),
    (LineRate(10000, "sysfs", link_layer="ethernet"), "10gbe"),
    (LineRate(25000, "ethtool", link_layer="ethernet"), "25gbe"),
    (LineRate(100000, "infiniband", link_layer="ethernet"), "100gbe"),     # RoCE
    (LineRate(200000, "sysfs", link_layer="ethernet"), "200gbe"),
    (LineRate(400000, "sysfs", link_layer="ethernet"), "400gbe"),
    (LineRate(100000, "infiniband", link_layer="infiniband"), None),       # EDR: declare it
    (LineRate(40000, "sysfs", link_layer="ethernet"), None),
    (LineRate(why="virtual"), None),
])
def test_a_discovered_link_selects_its_class(rate, cname):
    assert linerate.matching_class(rate, references.class_matches()) == cname
