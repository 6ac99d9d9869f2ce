"""Which path a launch's MPI library said it took (netbench.results.datapath),
read from what the four MPIs of this machine printed (tests/data/provenance)
and from what UCX and MPICH printed on real RDMA clusters
(tests/data/provenance_rdma), and the verdict on it
(netbench.judgement.path), as the report words it."""

import re

import pytest
import yaml

from netbench import paths
from netbench.datafiles import DataError
from netbench.judgement import FAIL, INCONCLUSIVE, PASS
from netbench.judgement.path import (ASKED_OTHER, PATH_UNKNOWN, SHM_ACROSS_NODES,
                                     SILENT_FALLBACK, WRONG_DEVICE, judge, rdma_class)
from netbench.probe import discovery
from netbench.report import datapath as words
from netbench.results import datapath

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

CAPTURED = paths.REPO / "tests" / "data" / "provenance"
#: lines printed on real RDMA clusters, from public threads (README.md there)
CAPTURED_RDMA = paths.REPO / "tests" / "data" / "provenance_rdma"

#: environment-transport: (transport, provider, device) its library named
SAID = {
    "mpich-shm": ("shm", "posix", "memory"),
    "mpich-native": ("shm", "posix", "memory"),
    # the NIC of `Rank to NIC assignment`, not the fabric (198.18.1.0/24)
    "mpich-ofi-tcp": ("ofi-tcp", "tcp", "nb-drsl"),
    "mpich-ucx-tcp": ("ucx-tcp", "ucx tcp", "eth0"),
    "openmpi-shm": ("shm", "btl sm", "node vm"),
    "openmpi-native": ("shm", "btl sm", "node vm"),
    "openmpi-tcp": ("tcp", "btl tcp", "node vm"),
    "openmpi-ofi-tcp": ("ofi-tcp", "mtl ofi tcp", "nb-drsl"),
    "openmpi-ucx-tcp": ("ucx-tcp", "ucx tcp", "eth0"),
    "system-mpich-shm": ("shm", "ucx sysv", "memory"),
    "system-mpich-native": ("shm", "ucx sysv", "memory"),
    "system-mpich-ucx-tcp": ("ucx-tcp", "ucx tcp", "nb-drsl"),
    "system-openmpi-shm": ("shm", "btl vader", "node vm"),
    "system-openmpi-native": ("shm", "btl vader", "node vm"),
    "system-openmpi-tcp": ("tcp", "btl tcp", "node vm"),
    "system-openmpi-ofi-tcp": ("ofi-tcp", "mtl ofi tcp;ofi_rxm", "nb-tom"),
    "system-openmpi-ucx-tcp": ("ucx-tcp", "ucx tcp", "nb-tom"),
}


@pytest.fixture(scope="module")
def rules():
    families = discovery.load_families()
    return {family: spec["provenance"]["says"] for family, spec in families.items()}


def said(name, rules, across_nodes=False):
    family = "openmpi" if "openmpi" in name else "mpich"
    text = (CAPTURED / f"{name}.out").read_text()
    return datapath.library_path(text, rules[family], across_nodes), text


@pytest.mark.parametrize("name", sorted(SAID))
def test_each_mpi_names_the_path_of_each_transport(name, rules):
    path, text = said(name, rules)
    assert (path["transport"], path["provider"], path["device"]) == SAID[name]
    # the evidence is a whole line of the launch's output, as printed
    assert path["evidence"] in [line.strip() for line in text.splitlines()]


def test_every_captured_output_is_covered():
    assert sorted(p.stem for p in CAPTURED.glob("*.out")) == sorted(SAID)


#: capture, family, across nodes: (transport, provider, device) the rules read
SAID_ON_RDMA = {
    # UCX 1.14+: the rank's intra-node endpoints (shared memory first) are
    # printed before its inter-node ones: between nodes rc_mlx5 carries it
    ("ucx-intra-node-first", "openmpi", True): ("ucx-rc-x", "ucx rc_mlx5", "mlx5_3:1"),
    ("ucx-intra-node-first", "mpich", True): ("ucx-rc-x", "ucx rc_mlx5", "mlx5_3:1"),
    # UCX before 1.14: across nodes the endpoint over a network lane decides
    # (TCP over IPoIB's ib1); on one node the first endpoint, shared memory
    ("ucx-ep-cfg-ipoib", "openmpi", True): ("ucx-tcp", "ucx tcp", "ib1"),
    ("ucx-ep-cfg-ipoib", "mpich", True): ("ucx-tcp", "ucx tcp", "ib1"),
    ("ucx-ep-cfg-ipoib", "openmpi", False): ("shm", "ucx sysv", "memory"),
    # MPICH on Slingshot: ch4 POSIX serves the node's ranks; across nodes
    # a NIC line without the provider's names no transport: never a guess
    ("mpich-nic-assignment-cxi", "mpich", False): ("shm", "posix", "memory"),
    ("mpich-nic-assignment-cxi", "mpich", True): (datapath.UNKNOWN, "", ""),
}


@pytest.mark.parametrize("name, family, across", sorted(SAID_ON_RDMA))
def test_lines_captured_on_rdma_clusters_name_their_transport_and_device(
        name, family, across, rules):
    text = (CAPTURED_RDMA / f"{name}.out").read_text()
    path = datapath.library_path(text, rules[family], across_nodes=across)
    assert (path["transport"], path["provider"], path["device"]) == \
        SAID_ON_RDMA[(name, family, across)]
    if path["evidence"]:
        assert path["evidence"] in [line.strip() for line in text.splitlines()]


def test_an_intra_node_line_printed_first_never_decides_between_nodes(rules):
    text = (CAPTURED_RDMA / "ucx-intra-node-first.out").read_text()
    assert text.index("intra-node") < text.index("inter-node")
    path = datapath.library_path(text, rules["openmpi"], across_nodes=True)
    assert "inter-node cfg#6" in path["evidence"] and path["transport"] == "ucx-rc-x"


def test_mpich_ofi_device_is_its_nic_not_the_fabric_it_names(rules):
    """MPICH's `libfabric provider: tcp - 198.18.1.0/24` names the fabric;
    its `Rank to NIC assignment` line the NIC.  Without that line (an MPICH
    before pmodels/mpich#6755, or MPIR_CVAR_DEBUG_SUMMARY=1) no device is
    named, and the fabric stays in the provider's words."""
    text = (CAPTURED / "mpich-ofi-tcp.out").read_text()
    path = datapath.library_path(text, rules["mpich"], across_nodes=True)
    assert (path["transport"], path["device"]) == ("ofi-tcp", "nb-drsl")
    assert path["evidence"] == "libfabric provider: tcp - 198.18.1.0/24"
    without_nic = "\n".join(line for line in text.splitlines() if ", NIC: " not in line)
    path = datapath.library_path(without_nic, rules["mpich"], across_nodes=True)
    assert (path["transport"], path["provider"], path["device"]) == \
        ("ofi-tcp", "tcp on fabric 198.18.1.0/24", "")


def test_words_no_rule_knows_leave_the_path_unknown(rules):
    text = ("[vm:1] select: component ucx selected\n"
            "[1.0] [vm:1:0]  ucp_worker.c:1912 UCX  INFO    ucp_context_0 inter-node cfg#1 "
            "tag(gga/mlx5_0:1)\n")
    assert datapath.library_path(text, rules["openmpi"])["transport"] == datapath.UNKNOWN
    assert datapath.library_path("", rules["mpich"]) == datapath.unknown_path()


def test_each_mpi_version_gets_switches_it_accepts():
    """MPICH 4.0.2 refuses MPIR_CVAR_DEBUG_SUMMARY=2 (MPI_Init fails)."""
    families = discovery.load_families()
    assert discovery.provenance_env("mpich", "5.0.2", families)["MPIR_CVAR_DEBUG_SUMMARY"] == "2"
    assert discovery.provenance_env("mpich", "4.0.2", families)["MPIR_CVAR_DEBUG_SUMMARY"] == "1"
    assert discovery.provenance_env("openmpi", "4.1.4", families)[
        "OMPI_MCA_mca_base_verbose"] == "stdout"


def test_every_family_offers_native_with_nothing_forced():
    families = discovery.load_families()
    for family, spec in families.items():
        assert spec["transports"]["native"] == [{"requires": [], "env": {}}], family
    fabrics = discovery.load_fabrics()
    for fabric, transports in fabrics.items():
        # after the forced ones: the existing cases keep their names and order
        assert transports[-1] == "native", fabric


@pytest.mark.parametrize("edit, key", [
    (lambda r: r.update(regex="tag\\((?P<tl>"), "regex"),
    (lambda r: r.update(device="{nic}"), "device"),
])
def test_a_malformed_rule_is_refused_naming_file_and_key(tmp_path, edit, key):
    data = yaml.safe_load((discovery.FAMILIES_FILE).read_text())
    edit(data["openmpi"]["provenance"]["says"][0])
    bad = tmp_path / "mpi_families.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(DataError) as err:
        discovery.load_families(bad)
    assert str(bad) in str(err.value) and f"openmpi.provenance.says[0].{key}" in str(err.value)
    assert "\n" not in str(err.value)


# ---- the verdict (netbench.judgement.path) and its words ----

def path(transport, evidence="line"):
    return {"transport": transport, "provider": "p", "device": "d", "evidence": evidence}


def test_another_path_than_asked_fails_saying_both():
    verdict = judge("ucx-tcp", [path("ucx-tcp"), path("shm", "tag(sysv/memory)")])
    assert (verdict.verdict, verdict.code, verdict.launch) == (FAIL, ASKED_OTHER, 2)
    assert words.sentence(verdict.to_json()).startswith(
        "asked ucx-tcp, the library used shm (launch 2 of 2: tag(sysv/memory))")


def test_an_unknown_path_is_inconclusive_never_a_pass():
    verdict = judge("tcp", [path(datapath.UNKNOWN)])
    assert (verdict.verdict, verdict.code) == (INCONCLUSIVE, PATH_UNKNOWN)
    assert "could not tell which path the library used" in words.sentence(verdict.to_json())
    assert judge("tcp", []).verdict == INCONCLUSIVE


def test_native_takes_the_library_choice_but_not_tcp_on_an_rdma_fabric():
    assert judge("native", [path("ucx-tcp")], across_nodes=True).verdict == PASS
    assert judge("native", [path("ucx-rc-x")], across_nodes=True, rdma=True).verdict == PASS
    # one node: shared memory, whatever the partition's link
    assert judge("native", [path("shm")], across_nodes=False, rdma=True).verdict == PASS
    fallback = judge("native", [path("ofi-tcp")], across_nodes=True, rdma=True)
    assert (fallback.verdict, fallback.code) == (FAIL, SILENT_FALLBACK)
    text = words.sentence(fallback.to_json())
    assert "silent fallback" in text and "asked native" in text and "used ofi-tcp" in text


@pytest.mark.parametrize("fallback", ["ofi-sockets", "ofi-udp"])
def test_libfabric_sockets_and_udp_are_silent_fallbacks(fallback):
    """fi_sockets(7) and fi_udp(7): libfabric's providers over the host's
    IP stack, no RDMA."""
    verdict = judge("native", [path(fallback)], across_nodes=True, rdma=True)
    assert (verdict.verdict, verdict.code) == (FAIL, SILENT_FALLBACK)
    assert f"used {fallback}, libfabric's {fallback[4:]} provider, no RDMA" in \
        words.sentence(verdict.to_json())
    # asked for by name, it is the path asked for
    assert judge(fallback, [path(fallback)], across_nodes=True, rdma=True).verdict == PASS


def rdma_capture(name):
    text = (CAPTURED_RDMA / f"{name}.out").read_text()
    return datapath.library_path(text, discovery.load_families()["openmpi"]["provenance"]["says"],
                                 across_nodes=True)


def test_a_run_on_another_hca_or_port_fails_naming_both():
    used = rdma_capture("ucx-intra-node-first")            # rc_mlx5 on mlx5_3:1
    for expected in ("mlx5_3:1", "mlx5_3"):
        assert judge("native", [used], across_nodes=True, rdma=True,
                     expected_device=expected).verdict == PASS
    for expected in ("mlx5_0:1", "mlx5_3:2", "mlx5_30"):
        verdict = judge("native", [used], across_nodes=True, rdma=True,
                        expected_device=expected)
        assert (verdict.verdict, verdict.code) == (FAIL, WRONG_DEVICE), expected
        assert (verdict.expected_device, verdict.device) == (expected, "mlx5_3:1")
    assert words.sentence(verdict.to_json()).startswith(
        "wrong device: asked native on mlx5_30, the library used ucx-rc-x on mlx5_3:1 "
        "(launch 1 of 1: [1750940427.480195]")
    # on one node the ranks' own path is shared memory: no device compared
    assert judge("native", [path("shm")], rdma=True, expected_device="mlx5_0:1").verdict == PASS


def test_native_over_ipoib_fails_naming_the_device_expected_and_the_interface():
    used = rdma_capture("ucx-ep-cfg-ipoib")                # tcp on ib1
    verdict = judge("native", [used], across_nodes=True, rdma=True, expected_device="mlx5_0:1")
    assert (verdict.verdict, verdict.code) == (FAIL, SILENT_FALLBACK)
    assert words.sentence(verdict.to_json()).startswith(
        "silent fallback: asked native on mlx5_0:1 of an RDMA interconnect class, the library "
        "used ucx-tcp on ib1, a TCP stack (launch 1 of 1:")


def test_shared_memory_between_nodes_fails_whatever_was_asked():
    """Namespace nodes of one host: UCX's endpoint said intra-node sysv."""
    for asked in ("native", "shm"):
        verdict = judge(asked, [path("shm")], across_nodes=True)
        assert (verdict.verdict, verdict.code) == (FAIL, SHM_ACROSS_NODES)
    assert "did not cross the interconnect" in words.sentence(verdict.to_json())


def test_rdma_classes_are_those_that_say_so_or_match_only_rdma_links():
    assert rdma_class({"judges": "rdma"})
    assert rdma_class({"match": {"link_layer": ["infiniband"], "mbps": [200000]}})
    assert not rdma_class({"match": {"link_layer": ["ethernet"], "mbps": [100000]}})
    assert not rdma_class({"description": "veth"}) and not rdma_class(None)


def test_the_headline_cell_escapes_the_library_words():
    assert words.cell(path("ucx-tcp")) == "ucx-tcp (p, d)"
    shown = words.cell({"transport": "tcp", "provider": "btl\x1b[31m", "device": "",
                        "evidence": ""})
    assert "\x1b" not in shown and re.match(r"tcp \(btl", shown)
    assert words.cell(None) == ""


def test_the_captured_files_name_their_source():
    readme = (CAPTURED / "README.md").read_text()
    assert "mpi_families.yaml" in readme and "MPICH 4.0.2" in readme
    readme = (CAPTURED_RDMA / "README.md").read_text()
    for capture in CAPTURED_RDMA.glob("*.out"):
        row = next(line for line in readme.splitlines() if f"`{capture.name}`" in line)
        assert re.search(r"https://github\.com/[\w.-]+/[\w.-]+/issues/\d+", row), capture.name
