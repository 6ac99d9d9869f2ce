"""What netbench guarantees about virtual clusters on a shared machine, for
real (namespaces, sshd, a second checkout, an unprivileged user):

- `down` of one cluster touches nothing of another, whatever their names;
- clusters are machine-wide: two checkouts get distinct subnets, and one
  cannot take down (or reuse the name of) the other's cluster without
  --force;
- whoever can write a checkout gets no root from it: every file a root
  process of the cluster reads or runs is root's, outside the checkout;
- a corrupt state file is reported by `status` and cleaned up by `down`;
- bad input gets one line, and Ctrl-C during `up` rolls everything back.

Every cluster is taken down in a `finally`, and every checkout removed.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from netbench import paths, vcluster
from netbench.vcluster import cluster as vc_cluster, names as vc_names, netns, registry
from helpers.vcluster import require_root

NETBENCH = [sys.executable, "-m", "netbench.cli"]
NOBODY = 65534


def cli(*args, cwd=None, timeout=120):
    """`netbench` run from the checkout `cwd` (its own netbench package)."""
    return subprocess.run(NETBENCH + list(args), capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or paths.REPO)


def one_line(text):
    return text.count("\n") == 1


def status(cwd=None):
    proc = cli("vcluster", "status", "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return {c["name"]: c for c in json.loads(proc.stdout)}


def take_down(*names, cwd=None):
    """Down from the owning checkout `cwd`; where that fails, this process's
    netbench tries (an older one has no --force).  Then nothing of them may
    be left."""
    for name in names:
        cli("vcluster", "down", "--name", name, cwd=cwd)
        if vcluster.leftovers(name):
            with contextlib.suppress(vcluster.VclusterError):
                try:
                    vcluster.down(name, force=True)
                except TypeError:
                    vcluster.down(name)
    for name in names:
        assert vcluster.leftovers(name) == [], name


def agent_ssh(state, address, *command):
    return subprocess.run([state["files"]["ssh_agent"], address, *command],
                          capture_output=True, text=True, timeout=30)


@contextlib.contextmanager
def checkout(tag, owner=None):
    """A second checkout of this repository in /tmp (`git worktree add`)
    running this checkout's netbench; `owner`: chowned to that uid, as an
    unprivileged user's clone would be."""
    path = Path(tempfile.mkdtemp(prefix=f"nb-{tag}-", dir="/tmp"))
    path.rmdir()
    subprocess.run(["git", "-C", str(paths.REPO), "worktree", "add", "--detach", str(path),
                    "HEAD"], check=True, capture_output=True)
    try:
        for sub in ("netbench", "reframe_checks/references"):
            shutil.copytree(paths.REPO / sub, path / sub, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        if owner is not None:
            subprocess.run(["chown", "-R", f"{owner}:{owner}", str(path)], check=True)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run(["git", "-C", str(paths.REPO), "worktree", "prune"], capture_output=True)


# ---- one cluster's down leaves the others alone ------------------------------------

def test_down_of_a_cluster_leaves_one_whose_name_extends_its_name_running():
    require_root()
    try:
        for name in ("xrel", "xrels"):
            proc = cli("vcluster", "up", "--name", name, "--nodes", "1")
            assert proc.returncode == 0, proc.stderr
        other = status()["xrels"]
        proc = cli("vcluster", "down", "--name", "xrel")
        assert proc.returncode == 0, proc.stderr
        assert vcluster.leftovers("xrel") == []
        after = status()["xrels"]
        assert after["healthy"], after.get("problems")
        node = other["nodes"][0]
        assert netns.alive(node["sshd_pid"])
        assert agent_ssh(other, node["address"], "hostname").stdout.strip() == "xrels-n1"
    finally:
        take_down("xrel", "xrels")


def test_names_match_whole_names_and_paths_whole_components():
    assert vc_names.owns_namespace("xrel", "nb-xrel-n1")
    assert vc_names.owns_namespace("xrel", "nb-xrel-ctl")
    for other in ("nb-xrels-n1", "nb-xrel-n1x", "nb-xrel-", "nb-xre-n1", "nb-xrel-nb-x-n1"):
        assert not vc_names.owns_namespace("xrel", other), other
    assert vc_names.owns_link("xrel", "nb-xrel") and vc_names.owns_link("xrel", "nb-xrel-12")
    assert vc_names.owns_link("xrel", "nb-xrel-c")
    # a topology's switch bridges and the ends of the links between switches
    for mine in ("nb-xrel-s1", "nb-xrel-u12", "nb-xrel-d3"):
        assert vc_names.owns_link("xrel", mine), mine
    for other in ("nb-xrels", "nb-xrels-1", "nb-xrel-n1", "nb-xrel-1a", "nb-xrel-s",
                  "nb-xrels-s1", "nb-xrel-x1", "nb-xrel-s1a"):
        assert not vc_names.owns_link("xrel", other), other
    folder = "/var/lib/netbench/clusters/xrel"
    assert netns.mentions(f"sshd -f {folder}/nodes/xrel-n1/sshd_config", folder)
    assert netns.mentions(f"munged --socket={folder}/slurm/munge/munge.socket", folder)
    assert netns.mentions(f"mount -o lowerdir=/etc,upperdir={folder}/nodes/n/etc", folder)
    assert not netns.mentions("sshd -f /var/lib/netbench/clusters/xrels/nodes/x/sshd_config",
                                 folder)
    assert not netns.mentions("tail /var/lib/netbench/clusters/xre", folder)


# ---- clusters are machine-wide ------------------------------------------------------

def test_two_checkouts_get_distinct_subnets_and_cannot_take_each_others_clusters():
    require_root()
    with checkout("wta") as a, checkout("wtb") as b:
        try:
            ups = [subprocess.Popen(NETBENCH + ["vcluster", "up", "--name", name, "--nodes", "2"],
                                    cwd=where, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
                   for where, name in ((a, "xcka"), (b, "xckb"))]
            for proc in ups:
                _, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, err
            seen = status(cwd=a)
            ka, kb = seen["xcka"], seen["xckb"]
            assert ka["healthy"] and kb["healthy"]
            assert ka["network"] != kb["network"]
            assert (ka["owner"], kb["owner"]) == (str(a), str(b))
            # each checkout's ssh reaches its own nodes only
            assert agent_ssh(ka, ka["nodes"][0]["address"], "hostname").stdout.strip() \
                == "xcka-n1"
            assert agent_ssh(ka, kb["nodes"][0]["address"], "hostname").returncode != 0
            # the other checkout's cluster: neither its name nor a down
            for action in ("up", "down"):
                proc = cli("vcluster", action, "--name", "xckb", cwd=a)
                assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
                assert f"belongs to checkout {b}" in proc.stderr, proc.stderr
            assert status(cwd=b)["xckb"]["healthy"]
            assert all(netns.alive(n["sshd_pid"]) for n in kb["nodes"])
            # --force does take it down, copies in the other checkout included
            assert (b / ".vcluster" / "xckb" / "inventory.ini").exists()
            proc = cli("vcluster", "down", "--name", "xckb", "--force", cwd=a)
            assert proc.returncode == 0, proc.stderr
            assert not (b / ".vcluster" / "xckb").exists()
            assert status(cwd=a)["xcka"]["healthy"]
        finally:
            take_down("xcka", cwd=a)
            take_down("xckb", cwd=b)


# ---- no root for whoever can write the checkout --------------------------------------

ATTACK = r"""
# as the checkout's unprivileged owner: for each "target<TAB>payload", write
# the payload there (with the payload's mode), or else move the first
# existing folder above it (below $STOP, the checkout) that may be renamed out
# of the way and recreate the path
plant() { mkdir -p "$(dirname "$1")" 2>/dev/null && cat "$2" > "$1" 2>/dev/null \
          && chmod "$(stat -c %a "$2")" "$1"; }
while IFS='	' read -r target payload; do
  if plant "$target" "$payload"; then echo "written $target"; continue; fi
  d=$(dirname "$target"); how=refused
  while [ "$d" != / ] && [ "$d" != "$STOP" ]; do
    p=$(dirname "$d")
    if [ -e "$d" ] && [ -w "$p" ] && mv "$d" "$d.moved.$$" 2>/dev/null; then
      plant "$target" "$payload" && how=replaced
      break
    fi
    d=$p
  done
  echo "$how $target"
done
"""


def as_nobody(argv, **kw):
    return subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                           "--clear-groups", *argv], capture_output=True, text=True,
                          timeout=60, **kw)


def files_root_reads(state):
    """{path: payload kind}: every file of the cluster's folder, the paths its
    state names, the key files its sshds read (the host key replaced by the
    attacker's: sshd reads it again for every connection), and a new
    authorized_keys in every folder."""
    folder = Path(state["folder"])
    found = dict.fromkeys(state["files"].values(), "pubkey")
    for top, dirs, files in os.walk(folder):
        found.update(dict.fromkeys((os.path.join(top, f) for f in files), "pubkey"))
        found[os.path.join(top, "authorized_keys")] = "pubkey"
    for config in folder.glob("nodes/*/sshd_config"):
        for line in config.read_text().splitlines():
            if line.split()[:1] == ["AuthorizedKeysFile"]:
                found.update(dict.fromkeys(line.split()[1:], "pubkey"))
            if line.split()[:1] == ["HostKey"]:
                key = line.split()[1]
                found.update({key: "hostkey", f"{key}.pub": "hostkey.pub"})
    found[state["files"]["ssh_agent"]] = "script"
    found[state["files"]["ssh_config"]] = "ssh_config"
    return found


def test_an_unprivileged_owner_of_the_checkout_gets_no_root_from_a_cluster(tmp_path):
    require_root()
    tools = Path(tempfile.mkdtemp(prefix="nb-attacker-"))
    tools.chmod(0o755)
    marker = tools / "ran-as-root"
    for key in ("key", "hostkey"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tools / key)],
                       check=True)
    (tools / "hostkey").chmod(0o644)         # the attacker reads it as nobody
    payloads = {"pubkey": ((tools / "key.pub").read_text(), 0o644),
                "script": (f"#!/bin/sh\ntouch {marker}\n", 0o755),
                "ssh_config": (f"Host *\n  ProxyCommand sh -c 'touch {marker}'\n", 0o644)}
    for kind, (text, mode) in payloads.items():
        (tools / kind).write_text(text)
        (tools / kind).chmod(mode)
    try:
        with checkout("wtx", owner=NOBODY) as mine:
            try:
                proc = cli("vcluster", "up", "--name", "xatk", "--nodes", "1", cwd=mine)
                assert proc.returncode == 0, proc.stderr
                state = status(cwd=mine)["xatk"]
                node = state["nodes"][0]
                targets = files_root_reads(state)
                copies = {str(p): "pubkey" for p in (mine / ".vcluster").rglob("*")
                          if p.is_file()}
                plan = "".join(f"{path}\t{tools / kind}\n"
                               for path, kind in {**copies, **targets}.items())
                attack = as_nobody(["sh", "-c", ATTACK], input=plan,
                                   env={"PATH": os.environ["PATH"], "STOP": str(mine)})
                outcome = dict(reversed(line.split(" ", 1)) for line in
                               attack.stdout.splitlines())
                # the attacker's key opens no node (sshd is still up) ...
                assert netns.alive(node["sshd_pid"])
                intruder = subprocess.run(
                    ["ssh", "-F", "/dev/null", "-i", str(tools / "key"),
                     "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                     "-o", "StrictHostKeyChecking=no",
                     "-o", f"UserKnownHostsFile={os.devnull}", f"root@{node['address']}", "id"],
                    capture_output=True, text=True, timeout=30)
                assert intruder.returncode != 0 and "uid=0" not in intruder.stdout, \
                    f"root shell for the checkout's owner: {outcome}"
                # ... nothing planted runs as root when root uses the cluster ...
                used = agent_ssh(state, node["address"], "hostname")
                assert used.stdout.strip() == "xatk-n1", used.stderr
                assert not marker.exists(), f"root ran the checkout owner's code: {outcome}"
                # ... because every file a root process reads was out of reach
                reached = {t: how for t, how in outcome.items()
                           if how != "refused" and t in targets}
                assert not reached, reached
                assert all(t.startswith(f"{vcluster.CLUSTERS}/xatk/") for t in targets)
                assert status(cwd=mine)["xatk"]["healthy"]
            finally:
                take_down("xatk", cwd=mine)
    finally:
        shutil.rmtree(tools, ignore_errors=True)


def test_nothing_starts_from_files_others_could_write(monkeypatch):
    """Checked like sshd's StrictModes before any daemon starts: a file or
    folder that is not root's, or writable by others, stops the bring-up."""
    require_root()
    real = vc_cluster.client_files

    def careless(folder, state):
        files = real(folder, state)
        os.chmod(files["ssh_config"], 0o666)
        return files

    monkeypatch.setattr(vc_cluster, "client_files", careless)
    try:
        with pytest.raises(vcluster.VclusterError, match="ssh_config is writable by group"):
            vcluster.up("xvfy", nodes=1)
    finally:
        monkeypatch.undo()
        vcluster.down("xvfy")
    assert vcluster.leftovers("xvfy") == []

    folder = Path(tempfile.mkdtemp(prefix="nb-verify-", dir="/run"))
    try:
        (folder / "sub").mkdir(mode=0o755)
        key = folder / "sub" / "id_ed25519"
        key.write_text("secret")
        key.chmod(0o600)
        registry.verify_tree(folder)
        for change, words in ((lambda: (folder / "sub").chmod(0o775), "writable by group"),
                              (lambda: os.chown(key, NOBODY, NOBODY), "owned by uid 65534"),
                              (lambda: key.chmod(0o644), "readable by others"),
                              (lambda: (folder / "sub" / "link").symlink_to("/etc/passwd"),
                               None)):
            change()
            if words:
                with pytest.raises(vcluster.VclusterError, match=words):
                    registry.verify_tree(folder)
            else:
                assert "symbolic link" in registry.insecure(folder / "sub" / "link")
            (folder / "sub").chmod(0o755)
            os.chown(key, 0, 0)
            key.chmod(0o600)
    finally:
        shutil.rmtree(folder)


# ---- a broken state file -----------------------------------------------------------

def test_a_corrupt_state_file_is_reported_by_status_and_cleaned_up_by_down():
    require_root()
    state_file, intact = None, None
    try:
        for name in ("xcor", "xcok"):
            proc = cli("vcluster", "up", "--name", name, "--nodes", "2")
            assert proc.returncode == 0, proc.stderr
        broken = status()["xcor"]
        state_file = Path(broken["folder"], "cluster.json")
        intact = state_file.read_text()
        state_file.write_text('{"name": "xcor", "nodes": [')
        proc = cli("vcluster", "status")
        assert proc.returncode == 0, proc.stderr
        # its own line: other clusters of the machine may be broken too
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("xcor:")]
        assert "unreadable" in line, proc.stdout
        seen = status()
        assert not seen["xcor"]["healthy"] and seen["xcok"]["healthy"]
        proc = cli("vcluster", "down", "--name", "xcor")
        assert proc.returncode == 0 and "xcor is down" in proc.stdout, proc.stderr
        assert vcluster.leftovers("xcor") == []
        assert not any(netns.alive(n["sshd_pid"]) for n in broken["nodes"])
        assert status()["xcok"]["healthy"]
    finally:
        if state_file and state_file.exists():      # down could not: let it try again
            state_file.write_text(intact)
        take_down("xcor", "xcok")


# ---- bad input, Ctrl-C ---------------------------------------------------------------

def test_a_switch_mtu_below_the_mtu_is_refused_in_one_line():
    require_root()
    try:
        proc = cli("vcluster", "up", "--name", "xmtu", "--mtu", "9000", "--switch-mtu", "1500")
        assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
        assert "--switch-mtu 1500 is below --mtu 9000" in proc.stderr
    finally:
        take_down("xmtu")


def test_interconnect_classes_are_validated_and_derived_from_the_link():
    require_root()
    from netbench import references
    try:
        proc = cli("vcluster", "up", "--name", "xic", "--interconnect", "bogus")
        assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
        assert "--interconnect 'bogus'" in proc.stderr
        assert all(c in proc.stderr for c in references.interconnect_classes())
        proc = cli("vcluster", "up", "--name", "xic", "--interconnect", "emulated")
        assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
        assert "--link none" in proc.stderr
    finally:
        take_down("xic")
    classes = vc_names.load_link_classes()
    assert vc_names.link_settings("none", classes=classes)["interconnect"] == "veth"
    assert vc_names.link_settings("1gbit", classes=classes)["interconnect"] == "gige"
    assert vc_names.link_settings("100mbit", classes=classes)["interconnect"] == "fast-ethernet"
    assert vc_names.link_settings("2gbit", classes=classes)["interconnect"] == "emulated"
    assert vc_names.link_settings("1gbit", interconnect="gige-untuned",
                                  classes=classes)["interconnect"] == "gige-untuned"


def command_lines():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            yield Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("moment, stop", [("links", signal.SIGINT), ("sshd", signal.SIGINT),
                                         ("slurm", signal.SIGINT),
                                         # `kill`, a batch system: as Ctrl-C
                                         ("links", signal.SIGTERM)])
def test_ctrl_c_during_up_rolls_everything_back(moment, stop):
    require_root()
    if moment == "slurm" and not all(shutil.which(t) for t in ("slurmctld", "munged")):
        pytest.skip("Slurm missing: apt-get install slurm-wlm munge")
    name = "xint"
    args = ["--nodes", "6"] + (["--slurm"] if moment == "slurm" else [])
    ready = {"links": lambda: os.path.exists(f"/run/netns/nb-{name}-n3"),
             "sshd": lambda: any("sshd" in line and f"{name}-n1" in line
                                 for line in command_lines()),
             "slurm": lambda: any("slurmctld" in line and f"/{name}/" in line
                                  for line in command_lines())}[moment]
    proc = subprocess.Popen(NETBENCH + ["vcluster", "up", "--name", name, *args],
                            cwd=paths.REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        assert proc.poll() is None, "the bring-up ended before it could be interrupted"
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert one_line(err) and "interrupted" in err, err
        assert vcluster.leftovers(name) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        take_down(name)


# ---- changing another checkout's cluster ---------------------------------------------

def qdisc_rate(veth):
    return subprocess.run(["tc", "qdisc", "show", "dev", veth], capture_output=True,
                          text=True).stdout


def test_another_checkout_changes_no_fault_or_mtu_without_force():
    """`fault` and `mtu` are refused like `up` and `down`; the MTU checks'
    command (the partition's set_mtu) acts for the owner, wherever its job
    runs."""
    require_root()
    with checkout("wtf") as other:
        try:
            proc = cli("vcluster", "up", "--name", "xown", "--nodes", "2", "--link", "1gbit",
                       "--switch-mtu", "9000")
            assert proc.returncode == 0, proc.stderr
            state = status()["xown"]
            node = state["nodes"][1]
            before = qdisc_rate(node["veth"]), status()["xown"]["link"]
            for args in (["fault", "--node", "2", "--rate", "10mbit"], ["mtu", "4000"],
                         ["mtu", "4000", "--owner", str(other)]):
                proc = cli("vcluster", args[0], "--name", "xown", *args[1:], cwd=other)
                assert proc.returncode == 2 and one_line(proc.stderr), (args, proc.stderr)
                assert f"belongs to checkout {paths.REPO}" in proc.stderr, proc.stderr
                assert "--force" in proc.stderr
                assert (qdisc_rate(node["veth"]), status()["xown"]["link"]) == before, args
            # told --force, it does
            proc = cli("vcluster", "fault", "--name", "xown", "--node", "2", "--rate", "10mbit",
                       "--force", cwd=other)
            assert proc.returncode == 0, proc.stderr
            assert "10Mbit" in qdisc_rate(node["veth"])
            assert cli("vcluster", "fault", "--name", "xown", "--node", "2", "--clear",
                       "--force", cwd=other).returncode == 0
            # the MTU checks' command, run from the other checkout's folder
            (system,) = json.loads(Path(state["files"]["reframe_system"]).read_text())
            set_mtu = system["partitions"][0]["extras"]["set_mtu"]
            assert set_mtu[-2:] == ["--owner", str(paths.REPO)]
            for mtu in ("4000", "1500"):
                proc = subprocess.run(set_mtu + [mtu], capture_output=True, text=True,
                                      cwd=other, timeout=60)
                assert proc.returncode == 0, proc.stderr
                assert status()["xown"]["link"]["mtu"] == int(mtu)
        finally:
            take_down("xown")


# ---- a read-only or full /var/lib/netbench, a planted lock ---------------------------

PRIVATE_MOUNTS = {
    # in a mount namespace of the test's own: the machine's stay as they are
    "full": "mount -t tmpfs -o size=8k,mode=755 nbfull /var/lib/netbench",
    "read-only": "mount --bind /var/lib/netbench /var/lib/netbench && "
                 "mount -o remount,bind,ro /var/lib/netbench",
    "symlinked lock": "mount -t tmpfs -o mode=755 nbrun /run/netbench && "
                      "ln -s /nonexistent/elsewhere /run/netbench/lock",
}


@pytest.mark.parametrize("trouble", sorted(PRIVATE_MOUNTS))
def test_a_full_or_read_only_state_folder_or_a_planted_lock_gets_one_line(trouble):
    require_root()
    name = "xdisk"
    with registry.locked():           # the machine's lock and folders exist already
        pass
    try:
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c",
             f'{PRIVATE_MOUNTS[trouble]} && exec "$@"', "sh", *NETBENCH, "vcluster", "up",
             "--name", name, "--nodes", "2"],
            capture_output=True, text=True, timeout=120, cwd=paths.REPO)
        assert proc.returncode == 2 and one_line(proc.stderr), proc.stderr
        assert "Traceback" not in proc.stderr
        words = {"full": "No space left on device", "read-only": "Read-only file system",
                 "symlinked lock": "/run/netbench/lock is a symbolic link"}[trouble]
        assert words in proc.stderr, proc.stderr
        assert vcluster.leftovers(name) == []
    finally:
        take_down(name)


# ---- Ctrl-C while the command starts --------------------------------------------------

def test_ctrl_c_in_the_first_quarter_second_of_up_is_one_line_and_leaves_nothing():
    """Python's own start (the first ~0.05 s, before any netbench code runs)
    is Python's; from the first import of netbench.cli on, one line.  A
    Ctrl-C after `up` is done (it takes ~0.3 s) finds Python exiting: it
    once ended the process by SIGINT, silently, with the cluster up (exit
    -2 in 2 of 3 runs); the command now ignores it, and exits 0."""
    require_root()
    name = "xearly"
    try:
        for delay in (0.08, 0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3):
            proc = subprocess.Popen(NETBENCH + ["vcluster", "up", "--name", name, "--nodes", "2"],
                                    cwd=paths.REPO, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            if proc.returncode == 0:          # up had finished: nothing to interrupt
                take_down(name)
                continue
            assert proc.returncode == 130 and one_line(err), (delay, err)
            assert "interrupted" in err and "Traceback" not in err, (delay, err)
            assert vcluster.leftovers(name) == [], delay
    finally:
        take_down(name)


def test_an_interrupt_caught_in_generated_code_still_exits_130_under_python_m(tmp_path):
    """A Ctrl-C that lands in code Python built from a string (a
    dataclass's __init__ while `up` imports: CI, 0.12 s into `up`) was
    said in one line, then the process died by SIGINT (-2) instead of
    exiting 130: CPython's `-m` path remembers it (netbench.cli).  Here the
    interrupt is raised in such code, deterministically, by a
    sitecustomize that replaces vcluster.up; no root, nothing is built."""
    (tmp_path / "sitecustomize.py").write_text(
        "import netbench.vcluster\n"
        "def up(*args, **kw):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "netbench.vcluster.up = up\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for command in (NETBENCH, [str(Path(sys.executable).parent / "netbench")]):
        proc = subprocess.run(command + ["vcluster", "up", "--name", "xgen", "--nodes", "2"],
                              capture_output=True, text=True, timeout=60, env=env,
                              cwd=paths.REPO)
        assert proc.returncode == 130 and one_line(proc.stderr), (command, proc.returncode,
                                                                   proc.stderr)
        assert "up interrupted" in proc.stderr, proc.stderr


# ---- up with other settings, down after a corrupt registry, escapes --------------------

def test_up_of_a_running_cluster_with_other_settings_is_refused_like_slurm():
    require_root()
    try:
        proc = cli("vcluster", "up", "--name", "xset", "--nodes", "2", "--link", "1 GBit")
        assert proc.returncode == 0, proc.stderr
        assert status()["xset"]["link"]["rate"] == "1gbit"       # stored normalized
        same = cli("vcluster", "up", "--name", "xset", "--nodes", "2", "--link", "1gbit")
        assert same.returncode == 0 and "nothing changed" in same.stdout, same.stderr
        for args, words in ((["--nodes", "3", "--link", "1gbit"], "2 nodes, not 3"),
                            (["--nodes", "2"], "links 1gbit, not none"),
                            (["--nodes", "2", "--link", "1gbit", "--slurm"], "without Slurm")):
            proc = cli("vcluster", "up", "--name", "xset", *args)
            assert proc.returncode == 2 and one_line(proc.stderr), (args, proc.stderr)
            assert words in proc.stderr and "down" in proc.stderr, proc.stderr
        assert len(status()["xset"]["nodes"]) == 2
    finally:
        take_down("xset")


def test_down_force_after_a_corrupt_registry_entry_removes_the_checkout_copies():
    require_root()
    copies = paths.REPO / ".vcluster" / "xreg"
    try:
        proc = cli("vcluster", "up", "--name", "xreg", "--nodes", "1")
        assert proc.returncode == 0, proc.stderr
        assert (copies / "inventory.ini").exists()
        registry.registry_file("xreg").write_text("{not json")
        proc = cli("vcluster", "down", "--name", "xreg", "--force")
        assert proc.returncode == 0, proc.stderr
        assert vcluster.leftovers("xreg") == []
        assert not copies.exists()
    finally:
        take_down("xreg")


def test_status_escapes_terminal_sequences_from_a_clusters_files():
    """A node name or owner holding escape sequences (a hostile or broken
    state) reaches the terminal as text."""
    require_root()
    try:
        proc = cli("vcluster", "up", "--name", "xesc", "--nodes", "1")
        assert proc.returncode == 0, proc.stderr
        state_file = vcluster.CLUSTERS / "xesc" / "cluster.json"
        state = json.loads(state_file.read_text())
        state["nodes"][0]["name"] = "evil\x1b]0;owned\x07\x1b[2J"
        state_file.write_text(json.dumps(state))
        entry = json.loads(registry.registry_file("xesc").read_text())
        registry.registry_file("xesc").write_text(json.dumps(
            {**entry, "owner": entry["owner"] + "\x1b[31m"}))
        proc = cli("vcluster", "status")
        assert proc.returncode == 0, proc.stderr
        own = "\n".join(line for line in proc.stdout.splitlines()
                        if "xesc" in line or "evil" in line)
        assert "\x1b" not in own and "\x07" not in own, own
        assert "evil\\x1b]0;owned\\x07\\x1b[2J" in own, own
        registry.registry_file("xesc").write_text(json.dumps(entry))
    finally:
        take_down("xesc")
