"""Which node a launch lost mid-run, in the words of the launcher that lost
it (#23, #54); tests/data/sweep_lost/ holds real outputs, with their source.

A launcher that loses a node takes the job's other ranks down after it and
says so about them too: srun's "h2-n2: task 1: Terminated" is a rank srun
killed because another node failed, hydra's "[proxy:1@n2] ... assert
(!closed) failed" a surviving proxy whose parent hung up, slurmstepd's
"*** JOB 1 ON n1 CANCELLED ... DUE TO NODE FAILURE" the node that ran the
batch script.  None of those is the lost node, and none is read as one.
What names it, the surest first:

1. Slurm's controller, through srun or salloc: ``srun: error: Node failure
   on NODELIST`` (Slurm's src/api/step_launch.c, _node_fail_handler; the
   list is a hostlist expression), the node(s) among the job's.
2. The MPI launcher about its remote daemon: PRRTE's "PRTE has lost
   communication with a remote daemon." with its "Remote daemon: [...] on
   node Y" (share/prte/help-errmgr-base.txt [node-died]), the same in
   ORTE's words, ORTE's older "...lost communication with its daemon
   located on node: hostname: Y", and ssh's own "ssh: connect to host Y
   port 22: ..." or "Connection closed by Y port 22".
3. A rank's own death (netbench.results.sweep.LOST): hydra's BAD
   TERMINATION "PID N RUNNING AT host", prterun's "noticed that process
   rank N ... on node X exited on signal", a peer's "Peer host: X", or
   srun's "NODE: task N: <signal>" for a signal that is not srun's own
   SIGTERM to the step, and not an exit code (a rank that exited when its
   peer went).  The first report is the cause.

When Slurm's controller ended a batch job for a node failure and no srun
was there to be told which node (a launch of the MPI's own launcher inside
the allocation, which netbench ended on Slurm's SIGTERM), slurmstepd's
"CANCELLED ... DUE TO NODE FAILURE" says only that one failed: then the
job's node that Slurm holds DOWN as not responding (`sinfo`'s `down*`) is
the one (`not_responding`).

A name is the job's node as the sweep's placement lines name it: Slurm's
node name where the two agree; else through the task layout (the job's
node list and one task per node, in order, as srun places a step's tasks:
its block distribution) to the rank, and the rank's host.
"""

import re

from ..fleet.topology import MAX_NAMES, expand_hostlist

#: Slurm's controller, through srun (step_launch.c) or salloc (salloc.c)
NODE_FAILURE = re.compile(r"^(?:srun|salloc): error: Node failure on (?P<nodes>\S{1,1000})\s*$",
                          re.MULTILINE)

#: the MPI launcher's, or its agent's, words about a remote daemon it lost
DAEMON_LOST = (
    # PRRTE (Open MPI 5) and ORTE (Open MPI 4): [node-died] of help-errmgr-base.txt
    re.compile(r"^\s*(?:PRTE|ORTE) has lost communication with a remote daemon\.\s*\n"
               r"(?:[^\n]*\n){0,4}?\s*Remote daemon\s*:\s*\S+ on node (?P<host>\S+)",
               re.MULTILINE),
    # ORTE before 4: the same help entry, older words
    re.compile(r"^\s*ORTE has lost communication with its daemon located on node:\s*\n"
               r"\s*\n?\s*hostname:\s+(?P<host>\S+)", re.MULTILINE),
    # ssh, the launchers' agent, could not reach the node's sshd again
    re.compile(r"^ssh: connect to host (?P<host>\S+) port \d+: ", re.MULTILINE),
    re.compile(r"^Connection closed by (?P<host>\S+) port \d+", re.MULTILINE),
)

#: srun's report of the tasks of one or more nodes (src/srun/launch.c,
#: _task_finish): "NODES: task(s) IDS: what"
SRUN_TASKS = re.compile(r"^srun: error: (?P<nodes>[^\s:]+): tasks? (?P<tasks>[\d,-]+): "
                        r"(?P<what>.+)$", re.MULTILINE)
#: what srun says of a rank that is no cause: its own SIGTERM to the step
#: once something else failed, and a rank that exited (when its peer went)
NOT_A_CAUSE = re.compile(r"Terminated|Exited with exit code")


def hostlist_names(text):
    """The names of a hostlist that Slurm printed; [] for one that is not
    one, or that would name more hosts than a job has (counted from its
    brackets before anything is built)."""
    count = 1
    for ranges in re.findall(r"\[([^\[\]]*)\]", text):
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not (low.isascii() and low.isdigit() and (not high or
                                                         (high.isascii() and high.isdigit()))):
                return []
            if len(low) > 9 or len(high) > 9:
                return []
            count *= max(1, int(high or low) - int(low) + 1)
            if count > MAX_NAMES:
                return []
    try:
        return expand_hostlist(text)
    except Exception:           # topology._Problem: a malformed list names no node
        return []


def task_nodes(job_nodes, tasks_per_node=1):
    """{task: node} of a step over the job's nodes, in Slurm's order, with
    `tasks_per_node` tasks on each, as srun's block distribution places them."""
    return {node_index * tasks_per_node + k: node
            for node_index, node in enumerate(job_nodes or ())
            for k in range(tasks_per_node)}


def as_placed(node, placed, job_nodes=None, tasks_per_node=1):
    """The host of the sweep's placement lines (`placed`: {rank: host})
    that Slurm's node `node` is: the same name, else the host of the rank
    the task layout put there; the node's own name for a job node that ran
    no placed rank; None for a node that is not the job's."""
    hosts = set(placed.values())
    if node in hosts:
        return node
    layout = task_nodes(job_nodes, tasks_per_node)
    ranks = [task for task, on in layout.items() if on == node and task in placed]
    if ranks:
        return placed[ranks[0]]
    return node if node in (job_nodes or ()) else None


def slurm_lost(text, placed, job_nodes=None, tasks_per_node=1):
    """The nodes Slurm's controller said failed (srun's "Node failure on"),
    as placed hosts, in the order said; [] when it said none."""
    found = []
    for match in NODE_FAILURE.finditer(text or ""):
        for node in hostlist_names(match["nodes"]):
            host = as_placed(node, placed, job_nodes, tasks_per_node)
            if host is not None and host not in found:
                found.append(host)
    return found


def srun_task_deaths(text):
    """(position, node, first task) of each srun line reporting tasks that
    died of their own (a signal but srun's SIGTERM; not an exit code)."""
    for match in SRUN_TASKS.finditer(text or ""):
        if NOT_A_CAUSE.match(match["what"]):
            continue
        first_task = int(re.match(r"\d+", match["tasks"])[0])
        for node in hostlist_names(match["nodes"])[:1]:
            yield match.start(), node, first_task


#: slurmstepd's words when Slurm's controller ended the job or step because a
#: node failed (src/slurmd/slurmstepd/req.c); the node it names is the one
#: that slurmstepd runs on, a survivor
CANCELLED_FOR_NODE_FAILURE = re.compile(r"^slurmstepd\S*: error: \*\*\* (?:JOB|STEP) \S+ ON \S+ "
                                        r"CANCELLED AT \S+ DUE TO NODE FAILURE", re.MULTILINE)

#: the job's node list as its batch script saw it (LinkSweep prints it
#: first): Slurm's hostlist, in Slurm's order, whatever squeue later shows
#: of a job whose node failed
JOB_NODES_LINE = "netbench: slurm job nodes "
JOB_NODES = re.compile(rf"^{JOB_NODES_LINE}(?P<nodes>\S{{1,10000}})\s*$", re.MULTILINE)


def job_nodes_said(text):
    """The job's nodes from its JOB_NODES_LINE; None without one."""
    match = JOB_NODES.search(text or "")
    return hostlist_names(match["nodes"]) or None if match else None


#: how to ask Slurm for the job's nodes as `not_responding` reads them
SINFO_FORMAT = "%N|%T|%E"


def not_responding(sinfo_text, placed, job_nodes):
    """The job's nodes that Slurm's controller holds DOWN because they do
    not respond (`sinfo -h -N -o '%N|%T|%E'`: state `down*`, the `*` being
    Slurm's "not responding"), as placed hosts: the nodes it lost when it
    ended a batch job for a node failure without naming one to srun.  A
    node an administrator set down still responds (no `*`): never one."""
    found = []
    for line in (sinfo_text or "").splitlines():
        node, _, rest = line.strip().partition("|")
        state = rest.partition("|")[0]
        if node in (job_nodes or ()) and state.startswith("down") and state.endswith("*"):
            host = as_placed(node, placed, job_nodes)
            if host is not None and host not in found:
                found.append(host)
    return found
