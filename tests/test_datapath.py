"""Which path a launch's MPI library said it took (netbench.results.datapath),
read from what the four MPIs of this machine printed (tests/data/provenance),
and the verdict on it (netbench.judgement.path), as the report words it."""

import re

import pytest
import yaml

from netbench import paths
from netbench.datafiles import DataError
from netbench.judgement import FAIL, INCONCLUSIVE, PASS
from netbench.judgement.path import (ASKED_OTHER, PATH_UNKNOWN, SHM_ACROSS_NODES,
                                     SILENT_FALLBACK, judge, rdma_class)
from netbench.probe import discovery
from netbench.report import datapath as words
from netbench.results import datapath

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

CAPTURED = paths.REPO / "tests" / "data" / "provenance"

#: environment-transport: (transport, provider, device) its library named
SAID = {
    "mpich-shm": ("shm", "posix", "memory"),
    "mpich-native": ("shm", "posix", "memory"),
    "mpich-ofi-tcp": ("ofi-tcp", "tcp", "198.18.1.0/24"),
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


def test_words_of_ranks_on_one_node_do_not_count_across_nodes(rules):
    """MPICH's POSIX shared memory serves the ranks of one node: across
    nodes the netmod's words decide."""
    text = ("====== POSIX Topo Dist ======\nRank: 1, Local_rank: 1 [ 0, 0 ]\n"
            "libfabric provider: verbs;ofi_rxm - mlx5_0\n")
    assert datapath.library_path(text, rules["mpich"])["transport"] == "shm"
    across = datapath.library_path(text, rules["mpich"], across_nodes=True)
    assert (across["transport"], across["provider"], across["device"]) == \
        ("ofi-verbs", "verbs;ofi_rxm", "mlx5_0")


def test_an_rdma_lane_of_ucx_is_named_by_its_transport_layer(rules):
    line = ("[1700000000.1] [node1:42:0]     ucp_worker.c:1912 UCX  INFO    ucp_context_0 "
            "inter-node cfg#1 tag(rc_mlx5/mlx5_0:1 self/memory)  am(rc_mlx5/mlx5_0:1)")
    path = datapath.library_path(line, rules["openmpi"])
    assert (path["transport"], path["device"]) == ("ucx-rc-x", "mlx5_0:1")


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
