"""What is machine-wide: the lock, the registry of clusters and their owners,
the reservation of each cluster's /24, and the root-owned files netbench
writes and verifies before any daemon starts (checked like sshd's
StrictModes).
"""

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import shutil
import stat
from pathlib import Path

from .names import (BENCHMARK_NETWORK, CLUSTERS, LIB_DIR, MEMBER_NAMESPACE, NAME_PATTERN,
                    STATE_FILE, VclusterError, cluster_folder)
from .netns import namespaces, run


#: machine-wide: the lock and the registry of clusters and their owners
RUN_DIR = Path("/run/netbench")
LOCK_FILE = RUN_DIR / "lock"
REGISTRY = RUN_DIR / "registry"
#: files whose content is a secret: readable by root only
PRIVATE_FILES = ("id_ed25519", "ssh_host_ed25519_key", "munge.key")


def insecure(path, private=False):
    """Why root must not trust `path` (a file or folder it reads), or None:
    it and every folder above it must be root's and writable by root only,
    as sshd's StrictModes demands; a secret is readable by root only."""
    path = Path(path)
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return f"{path} is a symbolic link"
    except OSError as err:
        return f"{path}: {err.strerror}"
    # the folders above as sshd sees them: links resolved (/var/lib may be one)
    above = Path(os.path.realpath(path.parent))
    for part in (path, above, *above.parents):
        try:
            st = os.stat(part) if part != path else os.lstat(part)
        except OSError as err:
            return f"{part}: {err.strerror}"
        if st.st_uid != 0:
            return f"{part} is owned by uid {st.st_uid}, not root"
        if st.st_mode & 0o022:
            return f"{part} is writable by group or others (mode {st.st_mode & 0o7777:o})"
    if private and os.lstat(path).st_mode & 0o077:
        return f"{path} is readable by others (mode {os.lstat(path).st_mode & 0o777:o})"
    return None


def verify_tree(folder, skip=()):
    """Refuse to start anything from `folder` unless every file and folder in
    it (but the `skip` folders, such as the nodes' /tmp) is root's and
    writable by root only, and its secrets are readable by root only."""
    problem = insecure(folder)
    for top, dirs, files in os.walk(folder):
        if problem:
            break
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in {str(s) for s in skip}]
        for entry in dirs + files:
            path = os.path.join(top, entry)
            st = os.lstat(path)
            if st.st_uid != 0:
                problem = f"{path} is owned by uid {st.st_uid}, not root"
            elif not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                problem = (f"{path} is writable by group or others "
                           f"(mode {st.st_mode & 0o7777:o})")
            elif entry in PRIVATE_FILES and st.st_mode & 0o077:
                problem = f"{path} is readable by others (mode {st.st_mode & 0o777:o})"
            if problem:
                break
    if problem:
        raise VclusterError(f"refusing to start from {folder}: {problem}")


def make_dir(path, mode=0o755):
    """A folder of root's (new, or already root's and safe)."""
    try:
        os.mkdir(path, mode)
        os.chown(path, 0, 0)
        os.chmod(path, mode)
    except FileExistsError:
        problem = insecure(path)
        if problem:
            raise VclusterError(f"{path}: {problem}: remove it (netbench only uses "
                                f"folders of root's)") from None
    except OSError as err:              # a read-only or full file system
        raise VclusterError(f"{path}: cannot create the folder: {err.strerror}") from err


def write_file(path, data, mode=0o644):
    """Write a file of root's, atomically, without following a link."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        try:
            os.fchmod(fd, mode)
            data = data.encode() if isinstance(data, str) else data
            if os.write(fd, data) != len(data):
                raise OSError(28, os.strerror(28), str(tmp))      # ENOSPC, half written
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as err:              # a read-only or full file system
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise VclusterError(f"{path}: cannot write: {err.strerror}") from err


def write_json(path, data):
    write_file(path, json.dumps(data, indent=2) + "\n")


def remove_tree(path):
    """Remove a folder of root's (the cluster's own files)."""
    shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def locked():
    """One `up`/`down`/`mtu` at a time on this machine, whichever checkout
    it comes from."""
    for folder in (RUN_DIR, REGISTRY, LIB_DIR, CLUSTERS):
        make_dir(folder)
    try:
        fd = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if os.path.islink(LOCK_FILE):
            raise VclusterError(f"{LOCK_FILE} is a symbolic link, not netbench's lock: "
                                f"remove it") from err
        raise VclusterError(f"{LOCK_FILE}: cannot open the lock: {err.strerror}") from err
    try:
        if os.fstat(fd).st_uid != 0:
            raise VclusterError(f"{LOCK_FILE} is not root's: remove it")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def registry_file(name):
    return REGISTRY / f"{name}.json"


def read_json(path, valid, problem):
    """The JSON object in `path`, None when there is no such file;
    ValueError(`problem`) when it is not an object `valid` accepts, OSError
    or ValueError when it cannot be read.  Callers say what a broken file
    means for them (a registry entry is reported, a state refused)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    if not isinstance(data, dict) or not valid(data):
        raise ValueError(problem)
    return data


def read_entry(name):
    """The registry entry of cluster `name`; None when there is none, and
    {"name", "problem"} (no owner) when it is unreadable."""
    path = registry_file(name)
    try:
        return read_json(path, lambda e: isinstance(e.get("owner"), str), "no owner")
    except (OSError, ValueError) as err:
        return {"name": name, "problem": f"{path}: unreadable registry entry ({err})"}


def registered_names():
    with contextlib.suppress(OSError):
        return sorted(p.stem for p in REGISTRY.iterdir()
                      if p.suffix == ".json" and re.fullmatch(NAME_PATTERN, p.stem))
    return []


def remove_registration(name):
    for path in (registry_file(name), Path(f"{registry_file(name)}.tmp")):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def owner_text(entry):
    return (f"checkout {entry['owner']} (uid {entry.get('uid', '?')}, up since "
            f"{entry.get('created', '?')})")


def free_subnet():
    """The first /24 of 198.18.0.0/15 no registered cluster has and no
    route or address of this machine touches.  Called under the lock, and
    the result is registered before it is used."""
    used = []
    for other in registered_names():
        entry = read_entry(other) or {}
        with contextlib.suppress(ValueError, TypeError):
            used.append(ipaddress.ip_network(entry.get("network")))
    for argv in (["ip", "-4", "-j", "route", "show", "table", "all"],
                 ["ip", "-4", "-j", "addr", "show"]):
        with contextlib.suppress(ValueError):
            for item in json.loads(run(argv, check=False).stdout or "[]"):
                prefixes = [item.get("dst")] + [f"{a['local']}/{a['prefixlen']}"
                                                for a in item.get("addr_info", [])]
                for prefix in prefixes:
                    with contextlib.suppress(ValueError, TypeError):
                        used.append(ipaddress.ip_network(prefix, strict=False))
    for subnet in BENCHMARK_NETWORK.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in used if u.prefixlen > 0):
            return subnet
    raise VclusterError("no free /24 left in 198.18.0.0/15")


def load_state(name):
    path = cluster_folder(name) / STATE_FILE
    try:
        return read_json(path, lambda s: isinstance(s.get("nodes"), list),
                         "not a cluster description")
    except (OSError, ValueError) as err:
        raise VclusterError(f"{path}: unreadable cluster state ({err}): "
                            f"run `netbench vcluster down --name {name}`") from err


def cluster_names():
    """Every cluster of this machine: registered, with a folder, or with
    namespaces named after it."""
    names = set(registered_names())
    with contextlib.suppress(OSError):
        names |= {p.name for p in CLUSTERS.iterdir() if re.fullmatch(NAME_PATTERN, p.name)}
    for ns in namespaces():
        m = re.fullmatch(rf"nb-({NAME_PATTERN})-{MEMBER_NAMESPACE}", ns)
        if m:
            names.add(m.group(1))
    return sorted(names)
