"""The files a cluster's clients use: the ssh client's configuration, known
hosts and wrapper, the MPI hostfile, the Ansible inventory and group
variables (root's, in the cluster's folder), and the copies its owning
checkout gets for its user (`.vcluster/<name>/`, written with that user's
rights).
"""

import io
import os
import shutil
import tarfile
import time
from pathlib import Path

from .. import paths
from ..datafiles import load_yaml
from .names import STATE_FILE, VclusterError, checkout_folder
from .netns import run
from .registry import make_dir, write_file


#: the copies a cluster's owning checkout gets in .vcluster/<name>/ (for its
#: user: `ansible-playbook -i`, an MPI hostfile); no netbench process reads them
CHECKOUT_COPIES = ("inventory.ini", "hostfile", "group_vars/{name}.yml")
# Ansible reads group_vars/ next to an inventory: how tune.yml must treat
# namespace nodes (see playbooks/roles/*/meta/argument_specs.yml)
TUNING_VARS_FILE = paths.DATA / "vcluster-tuning-vars.yaml"
#: the sockets of Ansible's shared ssh connections, in the cluster's folder
CONTROL_FOLDER = "control"


def tuning_vars():
    """The Ansible variables of a cluster's group, as the data file has them
    (comments included): checked to be a mapping, written as they are."""
    load_yaml(TUNING_VARS_FILE)
    return TUNING_VARS_FILE.read_text()


def keygen(path, comment):
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    os.chmod(path, 0o600)


def inventory_text(state, folder):
    """The Ansible inventory; its keys and ssh configuration are root's."""
    lines = [f"# Ansible inventory of netbench virtual cluster {state['name']}",
             f"[{state['name']}]"]
    lines += [f"{n['name']} ansible_host={n['address']}" for n in state["nodes"]]
    lines += ["", f"[{state['name']}:vars]", "ansible_user=root",
              f"ansible_ssh_private_key_file={folder / 'id_ed25519'}",
              f"ansible_ssh_common_args='-F {folder / 'ssh_config'}'",
              # one shared connection per node for Ansible's tasks (a third of
              # tune.yml's time): its socket in the cluster's root-only folder,
              # where `down` ends it with the nodes; a master whose node
              # stopped answering (a link down) ends within 9 s, not at TCP's
              # timeout (docs/explanation/platform-facts.md)
              f"ansible_ssh_args='-o ControlMaster=auto -o ControlPersist=60s "
              f"-o ControlPath={folder / CONTROL_FOLDER}/%C "
              f"-o ServerAliveInterval=3 -o ServerAliveCountMax=3'",
              # the nodes' sshd serves no sftp subsystem, and scp rides on
              # sftp since OpenSSH 9: Ansible's default (smart) would make two
              # failed connections for every file it copies before piping it
              "ansible_ssh_transfer_method=piped",
              "ansible_python_interpreter=/usr/bin/python3", ""]
    return "\n".join(lines)


def client_files(folder, state):
    """ssh configuration, known host keys and agent, MPI hostfile, Ansible
    inventory: root's, in the cluster's folder."""
    ssh_config = folder / "ssh_config"
    known_hosts = folder / "known_hosts"
    write_file(known_hosts, "".join(
        f"{n['address']},{n['name']} "
        + " ".join((folder / "nodes" / n["name"] / "ssh_host_ed25519_key.pub")
                   .read_text().split()[:2]) + "\n"
        for n in state["nodes"]))
    write_file(ssh_config, "\n".join([
        "# ssh into the nodes of netbench virtual cluster " + state["name"],
        "Host *",
        f"  IdentityFile {folder / 'id_ed25519'}",
        "  IdentitiesOnly yes",
        "  User root",
        # the nodes' host keys are known: netbench made them
        "  StrictHostKeyChecking yes",
        f"  UserKnownHostsFile {known_hosts}",
        "  GlobalKnownHostsFile /dev/null",
        "  BatchMode yes",
        "  LogLevel ERROR",
        # shared connections outlive a node's sshd and keep its old mount
        # namespace (docs/explanation/platform-facts.md): one connection per session
        "  ControlMaster no",
        "  ControlPath none",
        "  ConnectTimeout 5",
        "", ]))
    agent = folder / "ssh"
    write_file(agent, f'#!/bin/sh\n# ssh into the nodes of cluster {state["name"]}\n'
                      f'exec ssh -F {ssh_config} "$@"\n', mode=0o755)
    hostfile = folder / "hostfile"
    write_file(hostfile, "".join(n["address"] + "\n" for n in state["nodes"]))
    inventory = folder / "inventory.ini"
    write_file(inventory, inventory_text(state, folder))
    make_dir(folder / CONTROL_FOLDER, mode=0o700)
    make_dir(folder / "group_vars")
    write_file(folder / "group_vars" / f"{state['name']}.yml", tuning_vars())
    return {"ssh_config": str(ssh_config), "ssh_agent": str(agent), "hostfile": str(hostfile),
            "inventory": str(inventory), "ssh_key": str(folder / "id_ed25519"),
            "known_hosts": str(known_hosts), "authorized_keys": str(folder / "authorized_keys")}


def as_owner_of(checkout, script, *args, data=None, check=True):
    """Run a shell script with the rights of whoever owns `checkout` (never
    root's rights in a folder someone else may write)."""
    st = os.stat(checkout)
    return run(["setpriv", f"--reuid={st.st_uid}", f"--regid={st.st_gid}", "--clear-groups",
                "sh", "-c", script, "sh", *map(str, args)], input=data or b"", check=check)


def write_checkout_copies(state, checkout):
    """inventory.ini, group_vars/ and hostfile in the checkout's
    .vcluster/<name>/, for its user; the inventory names root's key and ssh
    configuration in the cluster's folder."""
    name = state["name"]
    folder = Path(state["folder"])
    texts = {"inventory.ini": inventory_text(state, folder),
             "hostfile": "".join(n["address"] + "\n" for n in state["nodes"]),
             f"group_vars/{name}.yml": tuning_vars()}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for rel, text in texts.items():
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(text.encode()), 0o644, time.time()
            tar.addfile(info, io.BytesIO(text.encode()))
    target = checkout_folder(name, checkout)
    proc = as_owner_of(checkout, 'umask 022 && mkdir -p "$1" && exec tar -x -f - -C "$1" '
                                 '--no-same-owner --no-same-permissions', target,
                       data=buffer.getvalue(), check=False)
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or "no output").splitlines()[0]
        raise VclusterError(f"{target}: cannot write the copies for the checkout's owner "
                            f"(uid {os.stat(checkout).st_uid}): {detail}")
    return {"folder": str(target), "inventory": str(target / "inventory.ini"),
            "hostfile": str(target / "hostfile")}


def remove_checkout_copies(name, checkout):
    """Remove the copies from the checkout, with its owner's rights, and
    the folders netbench made for them if they are empty now."""
    if not checkout or not os.path.isdir(checkout):
        return
    files = " ".join(f'"{c.format(name=name)}"' for c in CHECKOUT_COPIES)
    as_owner_of(checkout, f'cd "$1" 2>/dev/null || exit 0; rm -f {files}; '
                          'rmdir group_vars 2>/dev/null; cd .. && rmdir "$2" 2>/dev/null; '
                          'cd .. && rmdir .vcluster 2>/dev/null; exit 0',
                checkout_folder(name, checkout), name)


def is_legacy_folder(folder):
    """An older netbench's cluster folder in a checkout (node layers, state)."""
    return any(os.path.lexists(Path(folder) / entry) for entry in ("nodes", STATE_FILE))


def remove_legacy_folder(name, checkout):
    """A cluster folder older netbench kept in the checkout
    (.vcluster/<name>/ with nodes/ or cluster.json): root's files, removed
    without following any link."""
    try:
        top = os.open(Path(checkout) / ".vcluster", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=top)
        try:
            legacy = any(entry in os.listdir(inner) for entry in ("nodes", STATE_FILE))
        finally:
            os.close(inner)
        if legacy:                       # no live mount in it: down stopped its nodes
            shutil.rmtree(name, dir_fd=top, ignore_errors=True)
    except OSError:
        pass
    finally:
        os.close(top)


def ssh_command(state, node_name, *argv):
    node = next(n for n in state["nodes"] if n["name"] == node_name)
    return [state["files"]["ssh_agent"], node["address"], *argv]
