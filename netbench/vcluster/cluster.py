"""A cluster's life: up (build, with rollback), down (teardown), status and
MTU changes, all under the machine-wide lock.
"""

import contextlib
import ipaddress
import os
import shutil
import time

from ..safefile import invoking_uid
from .fabric import TOPOLOGY_FILE, build_switches, fabric_of, leaf_bridge, read_topology
from .files import (client_files, is_legacy_folder, keygen, remove_checkout_copies,
                    remove_legacy_folder, write_checkout_copies)
from .linkstate import change_links, drift
from .names import (FIRST_NODE_HOST, LOCK_NAME, MAX_NODES, STATE_FILE, SYSTEM_FILE,
                    VclusterError, bridge_name, check_name, checkout_folder, cluster_folder,
                    host_name, link_settings, system_name, this_checkout)
from .netns import (Undo, all_pids, ancestors, deferred_interrupts, delete_link,
                    delete_namespace, is_recorded, namespace_id, namespaces, owned_links,
                    owned_namespaces, processes_using, run, stop_processes)
from .nodes import SSHD, make_head, make_node, node_files, start_sshd, wait_for_sshd
from .registry import (cluster_names, free_subnet, load_state, locked, make_dir,
                       owner_text, read_entry, registry_file, remove_registration, remove_tree,
                       verify_tree, write_file, write_json)
from .slurm import problems as slurm_problems, records as slurm_records, require_slurm
from .slurm import start as start_slurm
from .systems import reframe_systems


def require_root():
    if os.geteuid() != 0:
        raise VclusterError("the virtual cluster needs root (network namespaces, links, "
                            "mounts): run it with sudo")
    for tool in ("ip", "tc", "unshare", "setpriv", "ssh", "ssh-keygen", SSHD):
        if not shutil.which(tool):
            package = "openssh-server" if tool == SSHD else "openssh-client" \
                if tool.startswith("ssh") else "iproute2/util-linux"
            raise VclusterError(f"{tool} not found: install {package}")


def require_owner(name, entry, if_other, if_unknown, acting_for=None):
    """VclusterError unless this checkout (or the checkout `acting_for`,
    a grant its jobs carry) owns cluster `name` (its registry `entry`):
    clusters are the machine's, and one checkout never takes or changes
    another's.  `if_other`, `if_unknown`: what the user should do."""
    if "owner" not in entry:
        raise VclusterError(f"cluster {name}: {entry['problem']}: its owner is unknown: "
                            f"{if_unknown}")
    if entry["owner"] != (acting_for or this_checkout()):
        raise VclusterError(f"cluster {name} belongs to {owner_text(entry)}: {if_other}")


def require_changer(name, force, acting_for, what):
    """Under the lock: `fault` and `mtu` change a cluster's links, which
    only its owning checkout may do (or whoever says --force).  `what`:
    the command, for the way out."""
    entry = read_entry(name)
    if entry is None or force:
        return                           # not up: running_state says so
    require_owner(name, entry, f"change it from there, or add --force to `{what}`",
                  f"add --force to `{what}` if it is yours", acting_for=acting_for)


def same_settings(state, nodes, link, slurm, fabric=None):
    """What differs between a running cluster and the settings asked for,
    as text (empty: the same cluster)."""
    have = state["link"]
    differences = [] if len(state["nodes"]) == nodes else [
        f"{len(state['nodes'])} nodes, not {nodes}"]
    for key, what in (("rate_mbps", "links"), ("mtu", "MTU"), ("switch_mtu", "switch MTU"),
                      ("interconnect", "interconnect")):
        if have.get(key) != link[key]:
            shown = "rate" if key == "rate_mbps" else key     # 1gbit, not 1000.0
            differences.append(f"{what} {have.get(shown)}, not {link[shown]}")
    if bool(state.get("slurm")) != bool(slurm):
        differences.append("with Slurm" if state.get("slurm") else "without Slurm")
    if (state.get("fabric") or {}).get("conf") != (fabric or {}).get("conf"):
        differences.append("another topology" if state.get("fabric") else "no topology")
    return differences


def up(name="vc", nodes=None, rate="none", mtu=1500, interconnect=None, switch_mtu=None,
       slurm=False, topology=None):
    """Bring a cluster up; returns (state, created).  A cluster this
    checkout has up with the same settings is left as it is (created
    False), with other settings refused (VclusterError naming what
    differs); a name another checkout owns is refused.  `slurm`: with a
    Slurm controller and a slurmd per node (netbench.vcluster.slurm).  `topology`: a
    topology.conf or netbench YAML file naming the cluster's nodes; its
    switches are built as bridges (netbench.vcluster.fabric), and `nodes`
    (None: as many as it names) must match it.  Whatever ends a bring-up
    early (an error, Ctrl-C) takes back all of it."""
    check_name(name)
    # --nodes as given (a topology's count is read_topology's to refuse)
    if nodes is not None and not 1 <= nodes <= MAX_NODES:
        raise VclusterError(f"--nodes {nodes}: use 1 to {MAX_NODES}")
    fabric = None
    if topology is not None:
        parsed = read_topology(topology, name, nodes)
        fabric, nodes = fabric_of(name, parsed), len(parsed.all_nodes())
    nodes = 2 if nodes is None else nodes
    link = link_settings(rate, mtu, interconnect, switch_mtu=switch_mtu)
    require_root()
    if slurm:
        require_slurm()
    with locked():
        entry = read_entry(name)
        if entry is not None:
            require_owner(name, entry, "choose another --name",
                          f"run `netbench vcluster down --force --name {name}` first")
            existing = load_state(name)
            if existing:
                differences = same_settings(existing, nodes, link, slurm, fabric)
                if differences:
                    raise VclusterError(f"cluster {name} is already up with other settings "
                                        f"({'; '.join(differences)}): to change them, take it "
                                        f"down first (`netbench vcluster down --name {name}`)")
                # up, but not working: never "nothing changed"
                broken = health_problems(existing)
                if broken:
                    raise VclusterError(f"cluster {name} is up but BROKEN "
                                        f"({'; '.join(broken)}): take it down first "
                                        f"(`netbench vcluster down --name {name}`), then bring "
                                        f"it up again")
                return existing, False
        rest = leftovers(name)
        if entry is None and unclaimed_but_running(name):
            raise VclusterError(f"cluster {name}: not in the registry, but its nodes run "
                                f"(an older netbench's, from another checkout?): choose "
                                f"another --name")
        if entry is not None or rest:
            what = f" ({rest[0]}{', ...' if len(rest) > 1 else ''})" if rest else ""
            raise VclusterError(f"cluster {name}: remnants of an earlier cluster exist{what}: "
                                f"run `netbench vcluster down --name {name}` first")
        undo = Undo()
        entry = {"name": name, "owner": this_checkout(), "uid": invoking_uid(),
                 "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                 "folder": str(cluster_folder(name)), "pids": []}
        try:
            entry["network"] = str(free_subnet())
            # the /24 is reserved: registered before any address exists
            write_json(registry_file(name), entry)
            return build(name, nodes, link, undo, entry, slurm, fabric), True
        except BaseException as err:
            with deferred_interrupts():
                undo.run()
                # what the undo list could not take back (an interrupt
                # between two steps, a step that failed half-way)
                problems = sweep(name, entry)
            if problems and isinstance(err, (VclusterError, KeyboardInterrupt, OSError)):
                raise VclusterError(f"{error_text(err) or 'interrupted'}; rollback incomplete "
                                    f"({'; '.join(problems)}): run `netbench vcluster down "
                                    f"--name {name}`") from err
            if isinstance(err, OSError):   # a full or read-only disk: one line
                raise VclusterError(f"{error_text(err)}: rolled back, nothing of {name} is "
                                    f"left") from err
            raise


def error_text(err):
    """One line for an error; an OSError names its file."""
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror}"
    return str(err)


def sweep(name, entry):
    """Take back whatever a broken bring-up left under the cluster's names,
    and its registration; the problems met (none: nothing is left)."""
    try:
        teardown(name, None, entry)
        return []
    except VclusterError as err:
        return [str(err)]


def build(name, nnodes, link, undo, entry, with_slurm=False, fabric=None):
    folder = cluster_folder(name)
    undo.push(remove_tree, folder)
    make_dir(folder)
    make_dir(folder / "nodes")
    subnet = ipaddress.ip_network(entry["network"])
    hosts = list(subnet.hosts())
    head = hosts[0]
    addresses = [hosts[FIRST_NODE_HOST - 2 + i] for i in range(1, nnodes + 1)]
    # the cluster's partitions hold it with this lock while a job needs the
    # nodes to itself (the fabric sweep: reframe_checks/link_sweep.py)
    write_file(folder / LOCK_NAME, "", mode=0o600)
    keygen(folder / "id_ed25519", f"netbench vcluster {name}")
    write_file(folder / "authorized_keys", (folder / "id_ed25519.pub").read_text())
    br = bridge_name(name)
    undo.push(delete_link, br)
    run(["ip", "link", "add", br, "mtu", str(link["switch_mtu"]), "type", "bridge"])
    run(["ip", "addr", "add", f"{head}/{subnet.prefixlen}", "dev", br])
    run(["ip", "link", "set", br, "up"])
    launcher = make_head(name, subnet, link, undo)
    if fabric:
        build_switches(fabric, link, undo)
        write_file(folder / TOPOLOGY_FILE, fabric["conf"])
    nodes = [make_node(name, i, addr, subnet.prefixlen, link, undo,
                       leaf_bridge(fabric, host_name(name, i)) if fabric else None)
             for i, addr in enumerate(addresses, 1)]
    cluster_hosts = "".join(["127.0.0.1\tlocalhost\n", f"{head}\t{name}-head\n"]
                            + [f"{n['address']}\t{n['name']}\n" for n in nodes])
    node_dirs = [node_files(folder, node, cluster_hosts) for node in nodes]
    state = {"name": name, "system": system_name(name), "network": str(subnet),
             "head_address": str(head), "launcher": launcher, "bridge": br, "link": link,
             "nodes": nodes, **({"fabric": fabric} if fabric else {}),
             "folder": str(folder), "owner": entry["owner"], "uid": entry["uid"],
             "created": entry["created"]}
    state["files"] = client_files(folder, state)
    verify_tree(folder)
    procs = []
    for node, nd in zip(nodes, node_dirs):
        procs.append(start_sshd(node, nd))
        undo.push(stop_processes, [node["namespace"]],
                  [[node["sshd_pid"], node["sshd_start"]]], folder)
    wait_for_sshd(nodes, procs, folder)
    if with_slurm:
        state["slurm"] = start_slurm(state, undo)
        state["files"]["slurm_conf"] = state["slurm"]["conf"]
    state["files"]["reframe_system"] = str(folder / SYSTEM_FILE)
    undo.push(remove_checkout_copies, name, entry["owner"])
    state["copies"] = write_checkout_copies(state, entry["owner"])
    write_json(folder / SYSTEM_FILE, reframe_systems(state))
    write_json(folder / STATE_FILE, state)
    write_json(registry_file(name), {**entry, "pids": recorded_processes(state)})
    return state


def recorded_processes(state):
    """[pid, start time] of every daemon the state records."""
    found = [[n.get("sshd_pid"), n.get("sshd_start")] for n in state.get("nodes", [])
             if isinstance(n, dict)]
    if state.get("slurm"):
        found += slurm_records(state)
    return [r for r in found if r[0]]


def down(name="vc", force=False):
    """Take a cluster down; returns False when there was none.  A cluster
    another checkout owns (by the registry) is refused unless `force`.
    Works from what it finds when the cluster's state is unreadable: the
    registry's recorded processes, the namespaces and links named after the
    cluster, the processes that name its folder."""
    check_name(name)
    require_root()
    with locked():
        entry = read_entry(name)
        if entry is None and not leftovers(name):
            return False
        if entry is None and not force and unclaimed_but_running(name):
            raise VclusterError(f"cluster {name}: not in the registry, but its nodes run (an "
                                f"older netbench's, from another checkout?): if it is yours, "
                                f"add --force")
        if entry is not None and not force:
            require_owner(name, entry, "take it down from there, or add --force",
                          f"run `netbench vcluster down --force --name {name}`")
        try:
            state = load_state(name)
        except VclusterError:
            state = None                 # unreadable: clean up from the rest
        with deferred_interrupts():
            teardown(name, state, entry)
        return True


def teardown(name, state, entry):
    """Remove everything of cluster `name`: processes, namespaces, links,
    its folder, the owning checkout's copies, its registry entry (last, once
    nothing else is left)."""
    folder = cluster_folder(name)
    state, entry = state or {}, entry or {}
    records = recorded_processes(state) + [r for r in entry.get("pids", [])
                                           if isinstance(r, list)]
    # an older netbench kept a cluster's files (munged's socket among them)
    # in the checkout
    legacy = [checkout_folder(name)] if is_legacy_folder(checkout_folder(name)) else []
    stop_processes(owned_namespaces(name), records, [folder, *legacy])
    for ns in owned_namespaces(name):
        delete_namespace(ns)
    delete_link(bridge_name(name))
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and owned_links(name):
        for link in owned_links(name):
            delete_link(link)
        time.sleep(0.02)
    # only now: deleting a node's upper dir while mounted would detach it
    remove_tree(folder)
    # the owner by the registry, or by the state when the registry entry is
    # unreadable; with neither, this checkout's copies (if any: only the
    # files netbench writes there are removed)
    owners = {entry.get("owner"), state.get("owner")} - {None}
    for checkout in owners or {this_checkout()}:
        remove_checkout_copies(name, checkout)
    for checkout in {entry.get("owner"), this_checkout()} - {None}:
        remove_legacy_folder(name, checkout)
    rest = leftovers(name, registry=False)
    if rest:
        raise VclusterError(f"cluster {name}: still present after down: {'; '.join(rest)}")
    remove_registration(name)


def unclaimed_but_running(name):
    """No checkout claims cluster `name` (no registry entry, no older
    netbench's folder in this checkout), yet processes run in its
    namespaces: someone's cluster, not remnants to sweep away."""
    if os.path.lexists(checkout_folder(name) / STATE_FILE):
        return False
    ids = {namespace_id(f"/run/netns/{ns}") for ns in owned_namespaces(name)} - {None}
    return any(namespace_id(f"/proc/{pid}/ns/net") in ids for pid in all_pids())


def leftovers(name, registry=True):
    """Everything of cluster `name` that exists on this machine, as text;
    empty once `down` has done its job."""
    rest = [f"namespace {ns}" for ns in owned_namespaces(name)]
    rest += [f"link {link}" for link in owned_links(name)]
    keep = ancestors()
    rest += [f"{kind} in pid {pid}" for pid, kind in processes_using(cluster_folder(name))
             if pid not in keep]
    if os.path.lexists(cluster_folder(name)):
        rest.append(f"folder {cluster_folder(name)}")
    if is_legacy_folder(checkout_folder(name)):
        rest.append(f"folder {checkout_folder(name)}")
    if registry and os.path.lexists(registry_file(name)):
        rest.append(f"registry entry {registry_file(name)}")
    return rest


def status():
    """Every cluster of this machine with its owner, nodes, links, files and
    health; a cluster whose state is unreadable is reported as such."""
    clusters = []
    present = namespaces()
    for name in cluster_names():
        entry = read_entry(name) or {}
        owner = {"owner": entry.get("owner"), "uid": entry.get("uid"),
                 "created": entry.get("created"),
                 "mine": entry.get("owner") == this_checkout()}
        try:
            state = load_state(name)
        except VclusterError as err:
            clusters.append({"name": name, **owner, "healthy": False, "problem": str(err),
                             "problems": [str(err)]})
            continue
        if state is None:
            if entry.get("problem"):
                problem = f"{entry['problem']}: owner unknown: `netbench vcluster down " \
                          f"--force --name {name}`"
            elif not entry and unclaimed_but_running(name):
                problem = ("not in the registry, but its nodes run: an older netbench's "
                           "cluster, from another checkout?")
            elif not entry and is_legacy_folder(checkout_folder(name)):
                problem = (f"brought up by an older netbench from this checkout: run "
                           f"`netbench vcluster down --name {name}`")
            elif not entry:
                problem = (f"remnants, not in the registry: run `netbench vcluster down "
                           f"--name {name}`")
            else:
                problem = (f"incomplete: being brought up, or an interrupted bring-up: run "
                           f"`netbench vcluster down --name {name}`")
            clusters.append({"name": name, **owner, "healthy": False, "problem": problem,
                             "problems": [problem]})
            continue
        problems = health_problems(state, present)
        state.update(owner)
        state["healthy"] = not problems
        state["problems"] = problems
        # the links as they are: a fault or MTU change that failed half-way,
        # or a node tuned by hand, shows here rather than being hidden
        state["drift"] = drift(state, present)
        clusters.append(state)
    return clusters


def health_problems(state, present=None):
    """What is wrong with a cluster that is up (its recorded `state`):
    daemons not running, namespaces missing; `present`: the namespaces
    there are (default: read now)."""
    present = namespaces() if present is None else present
    problems = [f"{n['name']}: sshd (pid {n['sshd_pid']}) is not running"
                for n in state["nodes"]
                if not is_recorded([n.get("sshd_pid"), n.get("sshd_start")])]
    problems += [f"{n['name']}: namespace {n['namespace']} is missing"
                 for n in state["nodes"] if n["namespace"] not in present]
    head = state.get("launcher") or {}
    if head.get("namespace") not in present:
        problems.append(f"head namespace {head.get('namespace', '(none recorded)')} is "
                        f"missing: MPI launchers have nowhere to start")
    return problems + slurm_problems(state)


def running_state(name):
    """The state of cluster `name`, which must be up (under the lock)."""
    state = load_state(name)
    if state is None:
        raise VclusterError(f"cluster {name} is not up")
    return state


def set_mtu(name, mtu, force=False, acting_for=None):
    """Change the MTU of every link of a running cluster (seed 004's MTU
    sweep); the switch's MTU and the tbf bucket grow with it where needed,
    and a node's fault (its rate, its smaller MTU) stays.  All links or
    none; only the owning checkout (or `acting_for` it: the MTU checks'
    jobs, or `force`)."""
    check_name(name)
    require_root()
    with locked():
        require_changer(name, force, acting_for, "netbench vcluster mtu")
        state = running_state(name)
        link = link_settings(state["link"]["rate"], mtu, state["link"]["interconnect"],
                             switch_mtu=max(int(mtu), state["link"].get("switch_mtu", 0)),
                             validate=False)
        new = {**state, "link": link}
        commit_links(state, new, state["nodes"], switch=True)
        return new


def commit_links(old, new, nodes, switch=False, uplinks=()):
    """Under the lock: `nodes`' links (with `switch`, the bridges' and the
    head's too; `uplinks`: the fabric's switches whose link to their parent
    changes) from what state `old` says to what `new` says, then `new`
    written as the cluster's state; all or nothing, and Ctrl-C waits."""
    folder = cluster_folder(new["name"])
    with deferred_interrupts():
        change_links(old, new, nodes, switch=switch, uplinks=uplinks)
        try:
            write_json(folder / SYSTEM_FILE, reframe_systems(new))
            write_json(folder / STATE_FILE, new)
        except VclusterError:
            change_links(new, old, nodes, switch=switch, uplinks=uplinks)
            with contextlib.suppress(VclusterError):     # written atomically: intact
                write_json(folder / SYSTEM_FILE, reframe_systems(old))
            raise
