"""A virtual cluster on one machine.

Each node is a network namespace with its own TCP stack, plus private mount
and UTS namespaces: its own hostname and its own `/etc` (an overlay on the
host's), and an sshd that listens on the node's address only and accepts
the cluster's key only.  The nodes hang off a bridge through veth links
whose rate a token bucket (`tbf`) can shape to a link class.  The host is
the cluster's head: it holds the bridge's first address and launches MPI
jobs into the nodes over ssh, as a login node would.

Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for network
benchmarking: one /24 per cluster.  Namespaces, links, addresses and ports
belong to the machine, not to a checkout, so clusters are machine-wide:

- one lock, `/run/netbench/lock`, serialises every `up`, `down`, `mtu`
  and `fault` of the machine;
- the registry, `/run/netbench/registry/<name>.json`, records each cluster's
  owner (the checkout that brought it up, the uid that ran it, when) and its
  /24, reserved there under the lock before any address exists; `down`,
  `mtu` and `fault` of a cluster another checkout owns are refused without
  --force (the MTU checks' jobs name the owner: `mtu --owner`);
- every file a root process reads or runs (sshd's configuration, host keys
  and authorized_keys, the node's /etc layer, the ssh client's key, config
  and wrapper, Slurm's configuration, state, spool and munge key) lives in
  `/var/lib/netbench/clusters/<name>/`, root's, writable by root only,
  checked like sshd's StrictModes before any daemon starts.  (Not under
  /run: a node may mount a /run of its own, and its sshd re-reads its host
  key for every connection.)  The owning checkout
  gets copies for its user (`.vcluster/<name>/`: inventory, hostfile),
  written with the checkout owner's rights and read by no netbench process.

Everything a cluster owns is named after it, by exact pattern:
`nb-<name>` bridge, `nb-<name>-<i>` host-side veths, `nb-<name>-n<i>`
namespaces (`nb-<name>-ctl` and `nb-<name>-c` for Slurm's controller).
`down` stops the processes inside those namespaces, the daemons the state
recorded (each checked to be the same process, still the cluster's), and
host processes whose command line names the cluster's folder as a path.

The package, from the bottom up (no module imports one above it):

- `names`: names, patterns, addresses, link settings, VclusterError;
- `netns`: namespaces, links, shaping, processes (`run`, `stop_processes`);
- `fabric`: a cluster's switches from a topology file (`up --topology`);
- `registry`: the lock, the registry and subnets, root's files (`verify_tree`);
- `files`: the clients' files (ssh, hostfile, inventory, checkout copies);
- `nodes`: a node's namespace and sshd, the head's namespace;
- `systems`: the cluster's ReFrame systems;
- `slurm`: Slurm on a cluster (`up --slurm`);
- `linkstate`: what each node's link must be (the cluster's settings, its
  fault), changing links all or nothing, reading them back (`drift`);
- `cluster`: up, down, status, set_mtu;
- `faults`: a degraded node (rate, direction, MTU) or switch link (rate,
  direction) for the fabric sweep.

This module is the API the rest of netbench uses.
"""

from .cluster import down, leftovers, set_mtu, status, up
from .faults import set_fault, set_switch_link_fault
from .files import ssh_command
from .names import CLUSTERS, VclusterError, printable
from .netns import link_bytes, link_mtus
from .nodes import SSHD
from .registry import load_state
from .systems import launch_environment, running_systems

__all__ = ["CLUSTERS", "SSHD", "VclusterError", "down", "launch_environment", "leftovers",
           "link_bytes", "link_mtus", "load_state", "printable", "running_systems", "set_fault",
           "set_mtu", "set_switch_link_fault", "ssh_command", "status", "up"]
