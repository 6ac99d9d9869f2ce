"""Site descriptions (reframe_checks/sites/*.yaml): the shipped Slurm
template is valid, becomes a ReFrame system ReFrame accepts and selects by
hostname, and broken copies fail with one line naming file and key."""

import os
import socket
import subprocess

import pytest
import yaml

from netbench import paths
from netbench.datafiles import DataError
from netbench.rfm import sites

# what it asserts holds however busy the host: `make test` runs it beside others
pytestmark = pytest.mark.alongside

EXAMPLE = sites.SITES / "example-slurm.yaml"
VIEWS = ["mpich-ofi", "mpich-tcp", "mpich-ucx", "openmpi-ofi", "openmpi-ucx"]


def test_the_template_takes_each_fabrics_spack_views():
    system = sites.load_site(EXAMPLE, VIEWS)
    parts = {p["name"]: p for p in system["partitions"]}
    assert parts["ib"]["environs"] == ["mpich-ucx", "openmpi-ucx"]
    assert parts["eth"]["environs"] == ["mpich-ofi", "mpich-tcp", "openmpi-ofi"]
    for part in parts.values():
        assert part["scheduler"] == "slurm" and part["launcher"] == "srun"
        assert "--exclusive" in part["access"] and part["time_limit"] == "10m"
        assert part["extras"]["nodes"] >= 3      # enough for the fabric sweep


def test_templates_are_not_loaded_as_systems():
    assert EXAMPLE not in sites.site_files()
    assert all(not p.name.startswith("example") for p in sites.site_files())


def site_copy(tmp_path, **changes):
    """The template as site `mysite`, matched by this host's name, every
    environment in each partition, with `changes` applied to partition 0."""
    data = yaml.safe_load(EXAMPLE.read_text())
    data["name"] = "mysite"
    data["hostnames"] = [f"^{socket.gethostname()}$"]
    for part in data["partitions"]:
        part["environs"] = ".*"
    data["partitions"][0].update(changes)
    folder = tmp_path / "sites"
    folder.mkdir(exist_ok=True)
    (folder / "mysite.yaml").write_text(yaml.safe_dump(data))
    return folder


def reframe_site(folder, *args, tmpdir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RFM_", "NETBENCH_"))}
    env["NETBENCH_SITES"] = str(folder)
    if tmpdir:
        env["TMPDIR"] = str(tmpdir)
    reframe = paths.REPO / ".venv" / "bin" / "reframe"
    return subprocess.run([str(reframe), "-C", str(paths.CONFIG), "-c", str(paths.CHECKS),
                           *args], cwd=paths.REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_site_is_selected_by_hostname_and_reframe_accepts_it(tmp_path):
    proc = reframe_site(site_copy(tmp_path), "-l")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "selected system:   'mysite'" in proc.stdout
    # 2-node partitions: the internode checks are generated for the site
    assert "placement=internode" in proc.stdout


def test_a_site_partition_writes_slurm_job_scripts(tmp_path):
    """ReFrame's dry run writes the job script it would submit."""
    proc = reframe_site(site_copy(tmp_path), "--system", "mysite:ib", "-p", "^(mpich|openmpi)$",
                        "-n", "PingPong%variant=blocking%transport=ofi-tcp%placement=internode",
                        "--dry-run")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for env, mpi_type in (("mpich", "pmi2"), ("openmpi", "pmix")):
        (script,) = (paths.STATE / "stage" / "mysite" / "ib" / env).glob(
            "PingPong_*/rfm_job.sh")
        text = script.read_text()
        for line in ("#SBATCH --partition=compute", "#SBATCH --exclusive",
                     "#SBATCH --ntasks-per-node=1", "#SBATCH --time=",
                     "export UCX_NET_DEVICES=mlx5_0:1", f"export SLURM_MPI_TYPE={mpi_type}"):
            assert line in text, text
        assert "\nsrun " in text, text


@pytest.mark.parametrize("change,key,problem", [
    ({"scheduler": "slurmd"}, "partitions[0].scheduler", "'slurmd': use one of slurm, squeue"),
    ({"environs": "(ucx"}, "partitions[0].environs", "not a regular expression"),
    ({"extras": {"interconnect": "hdr", "nodes": 2}}, "partitions[0].extras.interconnect",
     "'hdr' is not a class of thresholds.yaml"),
    ({"extras": {"interconnect": "gige"}}, "partitions[0].extras.nodes", "missing"),
])
def test_a_broken_site_fails_with_one_line(tmp_path, change, key, problem):
    folder = site_copy(tmp_path, **change)
    with pytest.raises(DataError) as err:
        sites.site_systems(VIEWS, folder)
    assert str(err.value).startswith(f"{folder / 'mysite.yaml'}: {key}: {problem}")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = reframe_site(folder, "-l", tmpdir=tmpdir)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"netbench: {err.value}"]
    # ReFrame names no log after netbench's line: its start-up log is gone
    assert list(tmpdir.glob("rfm-*.log")) == []
