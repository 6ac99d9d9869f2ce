"""Site descriptions (reframe_checks/sites/*.yaml): the shipped Slurm
template is valid, becomes a ReFrame system ReFrame accepts and selects by
hostname, and broken copies fail with one line naming file and key."""

import os
import socket
import subprocess

import pytest
import yaml

from conftest import require
from netbench import paths
from netbench.datafiles import DataError, validate
from netbench.judgement import knobs
from netbench.rfm import sites
from netbench.vcluster import systems as vcluster_systems

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
    # a typo is refused, naming the keys there are, and so is a key's wrong type
    ({"extras": {"interconnect": "gige", "nodes": 2, "topolgy": "t.conf"}},
     "partitions[0].extras.topolgy", "unknown key (known: container_image, "),
    ({"extras": {"interconnect": "gige", "nodes": 2, "topology": [1, 2]}},
     "partitions[0].extras.topology", "expected a string, got list"),
    # root reads what a site file names: an arbitrary path is refused unread
    ({"extras": {"interconnect": "gige", "nodes": 2, "judging_profile": "/etc/shadow"}},
     "partitions[0].extras.judging_profile", "'/etc/shadow': outside the site's folder"),
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


def site_with(tmp_path, **extras):
    """A site file whose first partition's extras add `extras`."""
    return site_copy(tmp_path, extras={"interconnect": "gige", "nodes": 3, **extras})


def refusal(folder):
    with pytest.raises(DataError) as err:
        sites.site_systems(VIEWS, folder)
    return str(err.value)


def test_a_profile_is_named_or_a_file_beside_the_site(tmp_path):
    folder = site_with(tmp_path, judging_profile="virtual-cluster")
    (part, *_), = [s["partitions"] for s in sites.site_systems(VIEWS, folder)]
    assert part["extras"]["judging_profile"] == "virtual-cluster"
    (folder / "profiles").mkdir()
    loose = folder / "profiles" / "loose.yaml"
    loose.write_text("min_change: {fleet: 0.3}\n")
    for named in ("profiles/loose.yaml", "./profiles/loose.yaml", str(loose)):
        folder = site_with(tmp_path, judging_profile=named)
        (part, *_), = [s["partitions"] for s in sites.site_systems(VIEWS, folder)]
        # the checks and the sweep's job read the very file that was checked
        assert part["extras"]["judging_profile"] == str(loose.resolve())
        assert knobs.load(profile=part["extras"]["judging_profile"]).min_change["fleet"] == 0.3
    # a *.yaml of the site's folder is a site: never a profile
    folder = site_with(tmp_path, judging_profile="other.yaml")
    assert "'other.yaml': a file of the site's folder is read as a site: put the profile " \
           "in a folder beside the site file (e.g. profiles/other.yaml)" in refusal(folder)


def test_a_profile_leading_out_of_the_site_folder_is_refused_unread(tmp_path):
    key = "partitions[0].extras.judging_profile"
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("min_change: {fleet: 0.3}\n")
    folder = site_with(tmp_path, judging_profile="../elsewhere.yaml")
    assert f"{key}: '../elsewhere.yaml': '..' leads out of the site's folder" in refusal(folder)
    folder = site_with(tmp_path, judging_profile=str(outside))
    assert f"{key}: '{outside}': outside the site's folder" in refusal(folder)
    (folder / "profiles").mkdir()
    (folder / "profiles" / "link.yaml").symlink_to("/etc/shadow")
    folder = site_with(tmp_path, judging_profile="profiles/link.yaml")
    assert f"{key}: 'profiles/link.yaml': a symbolic link leading out" in refusal(folder)
    # a site file that is a link out of the sites folder is not read either
    folder = site_with(tmp_path)
    (folder / "shadow.yaml").symlink_to("/etc/shadow")
    assert refusal(folder) == (f"{folder / 'shadow.yaml'}: a symbolic link leading out of "
                               f"the sites folder {folder}: refused")
    (folder / "shadow.yaml").unlink()
    folder = site_with(tmp_path, judging_profile="no-such")
    assert f"{key}: 'no-such': no such judging profile (known: virtual-cluster" in \
        refusal(folder)


def test_a_profile_others_could_write_or_not_a_file_is_refused(tmp_path):
    key = "partitions[0].extras.judging_profile"
    folder = site_with(tmp_path, judging_profile="p/p.yaml")
    (folder / "p").mkdir()
    profile = folder / "p" / "p.yaml"
    profile.write_text("min_change: {fleet: 0.3}\n")
    sites.site_systems(VIEWS, folder)
    profile.chmod(0o664)
    assert f"{key}: {profile}: writable by group or others (mode 664): refused, as " \
           f"sshd's StrictModes" in refusal(folder)
    profile.chmod(0o644)
    os.link(profile, folder / "p" / "again.yaml")
    assert f"{key}: {profile}: has 2 hard links" in refusal(folder)
    (folder / "p" / "again.yaml").unlink()
    sub = folder / "profiles"
    sub.mkdir(mode=0o777)
    sub.chmod(0o777)
    (sub / "q.yaml").write_text("min_change: {fleet: 0.3}\n")
    folder = site_with(tmp_path, judging_profile="profiles/q.yaml")
    assert f"{key}: {sub}: writable by group or others (mode 777)" in refusal(folder)
    sub.chmod(0o755)
    sites.site_systems(VIEWS, folder)
    os.mkfifo(sub / "fifo.yaml")
    folder = site_with(tmp_path, judging_profile="profiles/fifo.yaml")
    assert f"{key}: {sub / 'fifo.yaml'}: not a regular file" in refusal(folder)


def test_a_profile_of_another_user_is_refused(tmp_path):
    require(os.geteuid() == 0, "giving a file to another user needs root")
    folder = site_with(tmp_path, judging_profile="p/p.yaml")
    (folder / "p").mkdir()
    (folder / "p" / "p.yaml").write_text("min_change: {fleet: 0.3}\n")
    os.chown(folder / "p" / "p.yaml", 65534, 65534)
    assert "p.yaml: owned by uid 65534, neither root nor the caller" in refusal(folder)
    # the site file itself, as the files it names
    os.chown(folder / "mysite.yaml", 65534, 65534)
    assert refusal(folder) == (f"{folder / 'mysite.yaml'}: {folder / 'mysite.yaml'}: owned by "
                               f"uid 65534, neither root nor the caller: refused, as sshd's "
                               f"StrictModes refuses it")


SECRET = "s3cret-Entry"


@pytest.mark.parametrize("text,problem", [
    # /etc/shadow's shape: its first entry parses as a key
    (f"{SECRET}:$y$j9T$x:19000:0:99999:7:::\n", ": an unknown key (known: baseline, "),
    (f"min_change: {{fleet: {SECRET}}}\n", ": min_change.fleet: expected a finite number, "
                                             "got a string"),
    (f"min_change: {{{SECRET}: 0.1}}\n", ": min_change: an unknown key (known: baseline, "),
    (f"{SECRET}: [unclosed\n", ": line 2: not valid YAML"),
    (f"{SECRET}: \"\\q\"\n", ": line 1: not valid YAML"),
    (f"{SECRET}\n", ": expected a mapping at the top level, got str"),
])
def test_a_profiles_errors_never_quote_it(tmp_path, text, problem):
    folder = site_with(tmp_path, judging_profile="p/p.yaml")
    (folder / "p").mkdir()
    (folder / "p" / "p.yaml").write_text(text)
    error = refusal(folder)
    assert f"partitions[0].extras.judging_profile: {folder / 'p' / 'p.yaml'}{problem}" in error
    assert SECRET.lower() not in error.lower()


def test_a_site_topology_is_trusted_and_read_before_any_check(tmp_path):
    key = "partitions[0].extras.topology"
    folder = site_with(tmp_path, topology="topology.conf")
    (folder / "topology.conf").write_text("SwitchName=s1 Nodes=n[1-3]\n")
    (part, *_), = [s["partitions"] for s in sites.site_systems(VIEWS, folder)]
    assert part["extras"]["topology"] == str((folder / "topology.conf").resolve())
    (folder / "topology.conf").write_text(f"{SECRET}:x:0:0::/root:/bin/sh\n")
    error = refusal(folder)
    assert f"{key}: {(folder / 'topology.conf').resolve()}: line 1: not a topology " in error
    assert SECRET not in error
    # a topology elsewhere may be Slurm's own, but not in a folder others write
    planted = tmp_path / "shared"
    planted.mkdir()
    planted.chmod(0o1777)
    (planted / "topology.conf").write_text("SwitchName=s1 Nodes=n[1-3]\n")
    folder = site_with(tmp_path, topology=str(planted / "topology.conf"))
    assert f"{key}: {planted}: writable by group or others (mode 1777)" in refusal(folder)


def test_every_extras_key_a_virtual_cluster_gives_is_in_the_site_schema():
    """The virtual cluster's partitions use the most extras (links, lock,
    MTU command, Slurm, topology): each key is one the site schema knows,
    with its type, so the schema keeps up with what the code reads."""
    state = {"name": "vc", "owner": str(paths.REPO), "network": "198.18.0.0/24",
             "nodes": [{"name": f"vc-n{i}", "veth": f"nb-vc-{i}"} for i in (1, 2, 3)],
             "link": {"interconnect": "emulated", "mtu": 1500, "rate_mbps": 100.0,
                      "rate": "100mbit"},
             "fabric": {"conf": "SwitchName=s1 Nodes=vc-n[1-3]\n"},
             "slurm": {"conf": "/var/lib/netbench/vc/slurm.conf", "partition": "vc",
                       "pids": {"munged": 1}},
             "files": {"hostfile": "/h", "ssh_agent": "/a"},
             "launcher": {"address": "198.18.0.1", "namespace": "nb-vc-head"}}
    systems = vcluster_systems.reframe_systems(state)
    assert len(systems) == 3
    for system in systems:
        for part in system["partitions"]:
            validate(part["extras"], sites.EXTRAS_SCHEMA, system["name"])
    assert {"topology", "set_mtu", "slurm_conf", "link_counters", "partition_lock"} <= \
        set(systems[1]["partitions"][0]["extras"])
