"""The `netbench` command."""

import signal
import sys


#: what stops a command: Ctrl-C, and SIGTERM (`kill`, a batch system's
#: time limit), alike: one line, exit code 130, what it made removed
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupted_while_starting(signum, frame):
    """Ctrl-C or SIGTERM before a command has begun (the imports take a
    quarter of a second): nothing has been done yet, so one line and exit
    code 130."""
    print("netbench: interrupted before anything was done", file=sys.stderr)
    raise SystemExit(130)       # exitcodes.INTERRUPTED, not imported yet: Ctrl-C first


# the command (`netbench`, `python -m netbench.cli`), not a module a program imports
AS_COMMAND = __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "netbench"
if AS_COMMAND:
    for _stop in STOP_SIGNALS:
        signal.signal(_stop, _interrupted_while_starting)

import argparse  # noqa: E402  (after the handler: Ctrl-C during the imports)
import json  # noqa: E402

from . import __version__, exitcodes, paths, references  # noqa: E402
from .probe import discovery, fabric  # noqa: E402
from .datafiles import DataError  # noqa: E402
from .textsafe import printable  # noqa: E402


def _command_done(previous):
    """Once a command has done its work and said so, a Ctrl-C could only
    cut Python's own exit short: Python resets its SIGINT handler while it
    finalizes, so the signal would end the process with nothing said (exit
    by SIGINT, measured: a Ctrl-C 0.2-0.25 s into a 0.28 s `vcluster up`
    whose cluster was up).  The command ignores it (and SIGTERM) from here;
    a caller importing main gets its own handlers back: `previous`, a
    handler or {signal: handler}."""
    if not isinstance(previous, dict):
        previous = {signal.SIGINT: previous}
    for signum, handler in previous.items():
        signal.signal(signum, signal.SIG_IGN if AS_COMMAND else handler)


def _stop_command(signum, frame):
    """Ctrl-C or SIGTERM while a command runs: KeyboardInterrupt, named for
    the signal, so that its `with` and `finally` blocks unwind (temporary
    folders, staged files, locks) before main says so in one line; the
    signals that follow are ignored, so that nothing cuts that unwinding
    short.  Commands that must finish a step first defer the signals
    themselves (vcluster, tune)."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, _ignore_further)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _ignore_further(signum, frame):
    """A signal after the first, while the command unwinds: nothing.  A
    handler, not SIG_IGN, which the programs it may start while unwinding
    would inherit, so that they could not be stopped in turn."""


def _stopped_by(err):
    """The signal's name a KeyboardInterrupt carries (_stop_command's, or
    a command's own), SIGINT for Python's own."""
    name = str(err.args[0]) if err.args else ""
    return name if name in {s.name for s in STOP_SIGNALS} else "SIGINT"


def cmd_discover(args):
    families = discovery.load_families()
    problems = []
    mpis = discovery.discover(families=families,
                              on_error=lambda cand, err: problems.append((cand, err)))
    if args.json:
        print(json.dumps([{
            "name": m.name, "family": m.family, "version": m.version, "source": m.source,
            "cc": m.cc, "launcher": m.launcher, "prefix": m.prefix,
            "capabilities": sorted(m.capabilities), "transports": m.transports,
            "fabric_not_found": m.fabric_not_found,
        } for m in mpis], indent=2))
    else:
        for m in mpis:
            print(f"{m.name:18} {m.family:8} {m.version:10} {m.source:7} "
                  f"transports: {', '.join(m.transports)}  ({m.launcher})")
        # what the RDMA transports found of the node's fabric (probe/fabric.py)
        print(f"fabric: {fabric.node_fabric().summary()}")
        for cand, err in problems:
            print(f"netbench: {cand.name}: skipped: {err}", file=sys.stderr)
    if not mpis:
        print("netbench: no MPI found: run `make setup`", file=sys.stderr)
        return exitcodes.LOSS
    return exitcodes.OK


def cmd_references(args):
    from .report import findings
    folder = args.folder or paths.REFERENCES
    figures, table = references.validate(folder)
    claims = findings.load_claims(folder)
    if args.show:
        for key, fig in figures.items():
            print(f"{key} = {fig}")
        # what `interconnect: auto` picks for a discovered link
        for cname, match in references.class_matches(folder).items():
            rates = ", ".join(f"{m / 1000:g}" for m in match["mbps"])
            print(f"auto: {' or '.join(match['link_layer'])} at {rates} Gbit/s -> {cname}")
        # ... and for the RDMA cases, from the RDMA devices discovered
        for cname, match in references.rdma_class_matches(folder).items():
            rates = ", ".join(f"{m / 1000:g}" for m in match["mbps"])
            print(f"auto, RDMA cases: {' or '.join(match['device'])} port at {rates} Gbit/s "
                  f"-> {cname}")
    print(f"netbench: {len(figures)} documented figures, {len(table)} threshold groups, "
          f"{len(claims)} findings in {folder}")
    return 0


def cmd_report(args):
    from . import report
    page = report.write_report(args.run_reports, args.output)   # DataError: main, exit 2
    what = "comparison of %d sessions" % len(args.run_reports) if len(args.run_reports) > 1 \
        else "report"
    print(f"netbench: {what}: {page}")
    return 0


def cmd_compare(args):
    from .report import compare, compare_page, sides, store
    if not (args.b or args.baseline):
        raise DataError(args.a, None, "compare it with a session B or with --baseline")
    if args.baseline:
        a = store.find_session(args.a)       # DataError: main, exit 2
        comparison = compare.compare_with_baseline(a, baselines_of(a))
    else:
        # one whole session in memory at a time
        a_name, a_side, b_name, b_side = sides.session_sides(
            lambda: store.find_session(args.a), lambda: store.find_session(args.b))
        comparison = compare.compare(a_side, b_side, a_name, b_name)
    for line in compare_page.text(comparison, every_size=args.all,
                                  colour=compare_page.colour_wanted(sys.stdout)):
        print(line)
    folder = args.output or compare_page.default_folder(comparison)
    print(f"netbench compare: HTML {compare_page.write(comparison, folder)}")
    return compare.exit_code(comparison)


def baselines_of(session):
    """The learned baselines of the session's partitions; DataError when
    none has one."""
    from .judgement import baseline
    partitions = sorted({baseline.partition_of(tc) for tc in session.testcases})
    found = [b for b in (baseline.for_partition(p) for p in partitions) if b]
    if not found:
        raise DataError(baseline.BASELINES, None,
                        f"no baseline of {', '.join(partitions)}: `netbench baseline "
                        f"accept` makes one from 3 runs")
    return found


def cmd_publish(args):
    from pathlib import Path
    from . import report
    reports_dir = Path(args.reports_dir or paths.REPORTS)
    folder = report.publish(args.run_report, reports_dir)      # DataError: main, exit 2
    latest = reports_dir / "latest"
    page = latest if latest.resolve() == folder.resolve() else folder   # an older session
    print(f"netbench: HTML report {page / 'index.html'} (session {folder.name})")
    print_layer_notes(folder / "run-report.json")
    print_verdict(folder / "run-report.json")
    return 0


def print_layer_notes(run_report):
    """Once per reason, a layer not run beside the MPIs (the page's notes)."""
    from . import report
    from .report import page
    for note in page.layer_notes([report.load_session(run_report)]):
        print(printable(f"netbench: {note}"))


def cmd_baseline(args):
    from pathlib import Path
    from .report import baselines
    folder = Path(args.folder) if args.folder else baselines.baseline.BASELINES
    if args.action == "accept":
        # one line per partition (and per session skipped); DataError, exit 2,
        # only when nothing at all was accepted or a named session is bad
        for outcome in baselines.accept(args.sessions, args.partition,
                                        Path(args.reports_dir or paths.REPORTS), folder):
            print(f"netbench baseline: {outcome.line()}")
    else:
        print("\n".join(baselines.show(args.partition, folder)))
    return 0


def add_baseline_parser(sub):
    p = sub.add_parser("baseline", help="learned per-size baselines of this system's own "
                                        "accepted runs")
    actions = p.add_subparsers(dest="action", required=True)
    accept = actions.add_parser("accept", help="build the baseline of each system:partition "
                                               "from accepted sessions (default: the last 3)")
    accept.add_argument("sessions", nargs="*", metavar="SESSION",
                        help="published session folder names (reports/) or run reports")
    accept.add_argument("--reports", dest="reports_dir", metavar="DIR",
                        help="the folder of published sessions SESSION names (default: "
                             "reports/)")
    hidden_alias(accept, "--reports-dir", "reports_dir")
    output_folder(accept, "folder", "write the baseline files into DIR (default: "
                                    "reframe_checks/references/baselines/, where the "
                                    "checks read them)")
    hidden_alias(accept, "--folder", "folder")
    show = actions.add_parser("show", help="print the baselines")
    show.add_argument("--baselines", dest="folder", metavar="DIR",
                      help="the folder of baseline files (default: "
                           "reframe_checks/references/baselines/)")
    hidden_alias(show, "--folder", "folder")
    for action in (accept, show):
        action.add_argument("--partition", metavar="SYSTEM:PARTITION",
                            help="this partition only (default: every one)")
    p.set_defaults(func=cmd_baseline)


def cmd_tune(args):
    import shlex

    from .tuning import loop
    try:
        checks = shlex.split(args.checks or "")
    except ValueError as err:
        print(f"netbench tune: --checks: {err}", file=sys.stderr)
        return 2
    profiles = args.profile_dir or loop.PROFILES
    if args.repeats < 1:
        print("netbench tune: --repeats: at least 1", file=sys.stderr)
        return 2
    if args.dry_run:
        loop.profile_data(args.profile, args.flavour, profiles)   # DataError: main, exit 2
        try:
            loop.dry_run(args.inventory or loop.paths.REPO / "inventory" / "hosts.yml",
                         args.profile, args.flavour, profiles)
        except loop.TuneError as err:
            print(f"netbench tune: {err}", file=sys.stderr)
            return 2
        return 0
    code, _ = loop.run(args.profile, args.flavour, args.inventory, args.system, checks,
                       keep=args.keep, repeats=args.repeats, profiles=profiles,
                       reports_dir=args.reports_dir or loop.paths.REPORTS)
    return code


def add_tune_parser(sub):
    p = sub.add_parser("tune", help="measure, apply a tuning profile, measure again: keep it "
                                    "if it helped, revert it exactly if not")
    p.add_argument("--profile", required=True, help="a profile of playbooks/profiles/")
    p.add_argument("--flavour", help="throughput (default) or latency")
    p.add_argument("-i", "--inventory", help="Ansible inventory (default: inventory/hosts.yml, "
                                             "this machine)")
    p.add_argument("--system", help="the ReFrame system the checks run on (e.g. vcluster-NAME)")
    p.add_argument("--checks", metavar="SELECTION",
                   help="ReFrame selection options, quoted as one argument (default: the "
                        "focused default set)")
    p.add_argument("--repeats", type=int, default=4, metavar="N",
                   help="sessions before and after the tuning, measured in turns "
                        "(B AA BB AA B ...): N rounds of one beside the other, at least "
                        "4 (default: 4)")
    output_folder(p, "reports_dir", "write the tuning session's folder into DIR (default: "
                                    "reports/)")
    hidden_alias(p, "--reports-dir", "reports_dir")
    p.add_argument("--profile-dir", metavar="DIR",
                   help="a folder of your own profiles (default: playbooks/profiles/)")
    p.add_argument("--dry-run", action="store_true",
                   help="run tune.yml in check mode and list what would change")
    p.add_argument("--keep", action="store_true",
                   help="keep the tuning whatever the measurement says (recorded as "
                        "overridden)")
    p.set_defaults(func=cmd_tune)


def cmd_drain(args):
    from . import slurmdrain, slurmresume
    try:
        if args.command == "drain":
            try:
                return slurmdrain.drain(args.report, dry_run=args.dry_run)
            except DataError as err:
                # a report's names and the path given reach the line: shown
                # as their escapes, never driving the terminal
                print(printable(f"netbench: {err}"), file=sys.stderr)
                return exitcodes.INVALID_INPUT
        return slurmresume.resume(args.system, dry_run=args.dry_run, partners=args.partners,
                                  output=args.evidence, wait_s=args.wait)
    except (slurmdrain.SlurmError, slurmresume.PartitionBusy) as err:
        print(f"netbench {args.command}: {err}", file=sys.stderr)
        return exitcodes.INVALID_INPUT


def add_drain_parsers(sub):
    p = sub.add_parser("drain", help="drain the suspect nodes of a sweep's report through "
                                     "Slurm (scontrol), with netbench's reason")
    p.add_argument("report", metavar="SESSION",
                   help="a published session: its folder under reports/ (or "
                        "reports/latest), whose run report names the suspects; or its "
                        "suspects.json, drained only when it is what that run report gives")
    p.add_argument("--dry-run", action="store_true", help="print what it would do")
    p.set_defaults(func=cmd_drain)
    p = sub.add_parser("resume", help="re-test each node netbench drained against nodes in "
                                      "service and return it to Slurm only if it passes")
    p.add_argument("--system", metavar="SYSTEM",
                   help="the ReFrame system whose netbench-ssh partition reaches the nodes "
                        "outside Slurm (e.g. vcluster-NAME); required but with --dry-run")
    p.add_argument("--partners", type=int, default=2, metavar="K",
                   help="healthy nodes in service each node is measured against, 2 or more "
                        "(default: 2); a node with fewer available stays drained, "
                        "inconclusive")
    p.add_argument("--wait", type=int, default=60, metavar="S",
                   help="seconds to wait for a sweep holding the partition, and for Slurm "
                        "to allocate the partners, before refusing (default: 60)")
    p.add_argument("--evidence", metavar="FILE", help="write the re-tests' evidence here "
                                                      "(default: reports/resume/"
                                                      "resume-<time>.json)")
    p.add_argument("--dry-run", action="store_true", help="print what it would do")
    p.set_defaults(func=cmd_drain)


def cmd_spack_check(args):
    from .spack import check as spackcheck
    return spackcheck.main(args.spack_yaml, args.facts)


def cmd_vcluster(args):
    interrupted = []

    def on_interrupt(signum, frame):
        interrupted.append(signum)
        raise KeyboardInterrupt

    # Ctrl-C or SIGTERM: one line and exit code 130; `up` has rolled back by
    # then, `down`, `mtu` and `fault` finish first (vcluster.netns.
    # deferred_interrupts).  Set before the import: a signal while it runs
    # is an interrupted `up` too
    previous = {stop: signal.signal(stop, on_interrupt) for stop in STOP_SIGNALS}
    try:
        from . import vcluster
        try:
            return VCLUSTER_ACTIONS[args.action](vcluster, args)
        except vcluster.VclusterError as err:
            print(f"netbench vcluster: {'interrupted: ' if interrupted else ''}"
                  f"{printable(err)}", file=sys.stderr)
            return 130 if interrupted else 2
        except OSError as err:       # not one of netbench's: still one line
            where = f"{err.filename}: " if err.filename else ""
            print(f"netbench vcluster: {printable(where)}{err.strerror or err}",
                  file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        done = (f": {args.name} rolled back, nothing of it is left" if args.action == "up"
                else "")
        print(f"netbench vcluster: {args.action} interrupted{done}", file=sys.stderr)
        return 130
    finally:
        _command_done(previous)


def vcluster_up(vcluster, args):
    state, created = vcluster.up(args.name, args.nodes, args.link, args.mtu, args.interconnect,
                                 args.switch_mtu, args.slurm, topology=args.topology)
    if not created:      # with the same settings: another's are refused (VclusterError)
        print(f"netbench vcluster: {args.name} is already up ({len(state['nodes'])} nodes, "
              f"links {state['link']['rate']} MTU {state['link']['mtu']}): nothing changed")
        return 0
    print(f"netbench vcluster: {args.name} up: {len(state['nodes'])} nodes on "
          f"{state['network']}, links {state['link']['rate']} MTU {state['link']['mtu']}, "
          f"interconnect {state['link']['interconnect']}")
    print(f"  files (root's): {state['folder']}")
    print(f"  reframe: --system {state['system']}")
    print(f"  ansible: -i {state['files']['inventory']}")
    print(f"  mpi hostfile: {state['files']['hostfile']}, ssh: {state['files']['ssh_agent']}")
    if state.get("slurm"):
        print(f"  slurm: export SLURM_CONF={state['slurm']['conf']} (partition "
              f"{state['slurm']['partition']})")
        print(f"  reframe through Slurm: --system {state['slurm']['reframe']['srun']} (srun), "
              f"--system {state['slurm']['reframe']['mpirun']} (mpirun in the allocation)")
    return 0


def vcluster_down(vcluster, args):
    if vcluster.down(args.name, force=args.force):
        print(f"netbench vcluster: {args.name} is down")
    else:
        print(f"netbench vcluster: {args.name} is not up: nothing changed")
    return 0


def vcluster_status(vcluster, args):
    clusters = [c for c in vcluster.status() if args.name in (None, c["name"])]
    if args.json:        # JSON escapes control characters itself
        print(json.dumps(clusters, indent=2))
        return 0
    if not clusters:
        print(f"netbench vcluster: {args.name} is not up" if args.name
              else "netbench vcluster: no virtual cluster is up")
    for c in clusters:
        # every text from the cluster's files goes through printable: a
        # hostname or path holding terminal escapes reaches no terminal raw
        print(printable(status_line(c)))
        for n in c.get("nodes", []):
            print(printable(f"  {n['name']:10} {n['address']:15} netns {n['namespace']:12} "
                            f"sshd pid {n['sshd_pid']}"))
        if c.get("slurm") and "nodes" in c:
            ctl = c["slurm"]["controller"]
            print(printable(f"  {ctl['name']:10} {ctl['address']:15} netns "
                            f"{ctl['namespace']:12} slurmctld pid "
                            f"{c['slurm']['pids']['slurmctld']}; SLURM_CONF={c['slurm']['conf']}"))
    return 0


def status_line(c):
    """A cluster's first line in `vcluster status`."""
    owner = (f"owner {c['owner']} (uid {c['uid']}{', this checkout' if c['mine'] else ''})"
             if c.get("owner") else "owner unknown")
    if "nodes" not in c:
        return f"{c['name']}: {owner}: BROKEN: {c['problem']}"
    health = "healthy" if c["healthy"] else "BROKEN: " + "; ".join(c["problems"])
    if c.get("faults"):
        health += "; DEGRADED on purpose (vcluster fault): " + ", ".join(
            " ".join(f"{k}={v}" for k, v in f.items()) for f in c["faults"])
    if c.get("drift"):
        health += "; LINKS DIFFER from the recorded settings: " + "; ".join(c["drift"])
    return (f"{c['name']}: {len(c['nodes'])} nodes, {c['network']}, links "
            f"{c['link']['rate']} MTU {c['link']['mtu']}, system {c['system']}, {owner}, "
            f"{health}")


def vcluster_mtu(vcluster, args):
    state = vcluster.set_mtu(args.name, args.mtu, force=args.force, acting_for=args.owner)
    print(f"netbench vcluster: {args.name}: MTU {state['link']['mtu']} on every link")
    return 0


def vcluster_fault(vcluster, args):
    if args.switch_link is not None:
        if args.mtu is not None or args.link_down:
            raise vcluster.VclusterError("--mtu, --link-down: a switch link's fault is its --rate")
        state = vcluster.set_switch_link_fault(args.name, args.switch_link, args.rate,
                                               args.direction, clear_fault=args.clear,
                                               force=args.force)
    else:
        state = vcluster.set_fault(args.name, args.node, args.rate, args.direction, args.mtu,
                                   clear_fault=args.clear, force=args.force,
                                   link_down=args.link_down)
    faults = ", ".join(" ".join(f"{k}={v}" for k, v in f.items()) for f in state["faults"])
    print(f"netbench vcluster: {args.name}: faults: {faults or 'none'}")
    return 0


VCLUSTER_ACTIONS = {"up": vcluster_up, "down": vcluster_down, "status": vcluster_status,
                    "mtu": vcluster_mtu, "fault": vcluster_fault}


def add_vcluster_parser(sub):
    p = sub.add_parser("vcluster", help="a virtual cluster of network-namespace nodes "
                                        "(needs root)")
    actions = p.add_subparsers(dest="action", required=True)
    up = actions.add_parser("up", help="bring a cluster up (nothing changes if it is up)")
    up.add_argument("--nodes", type=int, metavar="N",
                    help="how many nodes (default: 2, or as many as --topology names)")
    up.add_argument("--topology", metavar="FILE",
                    help="build the fabric of Slurm's topology.conf (or netbench's topology "
                         "YAML) naming the nodes NAME-n1..: a bridge per switch, a shaped "
                         "link between each switch and its parent")
    up.add_argument("--link", default="none", metavar="RATE",
                    help="shape each link with tbf: 100mbit (Fast Ethernet), 1gbit (GigE), "
                         "none (default)")
    up.add_argument("--mtu", type=int, default=1500, help="MTU of the nodes' interfaces")
    up.add_argument("--switch-mtu", type=int, metavar="MTU",
                    help="largest frame the links and bridge carry, at least --mtu (default: "
                         "--mtu); e.g. 9000 lets tune.yml raise the nodes to jumbo frames")
    up.add_argument("--slurm", action="store_true",
                    help="run Slurm on the cluster: munged, slurmctld on a controller node, "
                         "a slurmd in every node (needs slurm-wlm and munge)")
    up.add_argument("--interconnect", metavar="CLASS",
                    help="interconnect class of the ReFrame partition, a class of "
                         "thresholds.yaml (default: veth unshaped, the links.yaml class of "
                         "the rate, else emulated), e.g. gige-untuned")
    down = actions.add_parser("down", help="remove every namespace, link, mount, process and "
                                           "file of a cluster this checkout brought up")
    down.add_argument("--force", action="store_true",
                      help="also a cluster another checkout owns")
    status = actions.add_parser("status", help="every cluster of this machine, with its owner")
    status.add_argument("--json", action="store_true", help="print the clusters as JSON")
    status.add_argument("--name", help="this cluster only")
    mtu = actions.add_parser("mtu", help="change the MTU of a running cluster's links")
    mtu.add_argument("mtu", type=int, metavar="MTU", help="the MTU of every link and node")
    mtu.add_argument("--owner", metavar="CHECKOUT",
                     help="act for CHECKOUT, which must own the cluster (its MTU checks' "
                          "jobs name it)")
    fault = actions.add_parser("fault", help="degrade one node or switch link, as a fabric "
                                             "sweep must find it: a slower link, one "
                                             "direction, a smaller MTU, a link down")
    target = fault.add_mutually_exclusive_group(required=True)
    target.add_argument("--node", help="node name or index (1 = first)")
    target.add_argument("--switch-link", metavar="SWITCH",
                        help="the link between SWITCH and its parent (a cluster brought up "
                             "with --topology): --rate, --direction (out: what leaves "
                             "SWITCH's subtree)")
    fault.add_argument("--rate", metavar="RATE", help="shape the node's link, e.g. 333mbit")
    fault.add_argument("--direction", default="both", choices=("in", "out", "both"),
                       help="what the node receives (in), sends (out) or both")
    fault.add_argument("--mtu", type=int, help="the node's interface MTU")
    fault.add_argument("--link-down", action="store_true",
                       help="take the node's link down (its switch port): nothing reaches it")
    fault.add_argument("--clear", action="store_true",
                       help="restore the node (or switch link) to the cluster's link settings")
    for action in (mtu, fault):
        action.add_argument("--force", action="store_true",
                            help="also a cluster another checkout owns")
    for action in (up, down, mtu, fault):
        action.add_argument("--name", default="vc", help="cluster name (default: vc)")
    p.set_defaults(func=cmd_vcluster)


DESCRIPTION = """\
netbench measures an HPC interconnect with every MPI it finds on the
machine (and raw TCP beside them): latency and bandwidth per message size,
throughput, a sweep of every pair of nodes.  Each figure is judged against
documented references (a floor from published measurements) or, once
accepted, this system's own learned baseline; each session's HTML report
goes to reports/ (reports/latest is the newest).

Run the checks, from the checkout:
  make run
      set up the venv and the MPIs (once), then run the default suite here
  .venv/bin/reframe -C reframe_checks/settings.py -c reframe_checks -r
      the same suite, with ReFrame's own options (e.g. --system, -n, -t full)

The commands below discover MPIs, validate data, draw, publish and compare
reports, learn baselines, tune, and run virtual clusters."""


# The commands' one spelling of each shared flag: an output folder
# (-o/--output), a machine-readable result (--json), a cluster's name
# (--name); older spellings parse as hidden aliases (hidden_alias).
def output_folder(parser, dest, help_text, required=False):
    """The folder a command writes into: -o/--output everywhere."""
    parser.add_argument("-o", "--output", dest=dest, metavar="DIR", required=required,
                        help=help_text)


def hidden_alias(parser, spelling, dest):
    """An older spelling of a flag: it still parses, so scripts written
    against it keep working, but no help or reference shows it."""
    parser.add_argument(spelling, dest=dest, help=argparse.SUPPRESS)


def version_text(mpis=None):
    """netbench's version, ReFrame's and the MPIs discovery finds (each
    launcher asked its version: no compiling).  `mpis`: already found."""
    import importlib.metadata
    from pathlib import Path
    from .rfm.patches import REFRAME_VERSION
    lines = [f"netbench {__version__} ({Path(__file__).parent})"]
    try:
        reframe = importlib.metadata.version("reframe-hpc")
        pinned = "" if reframe == REFRAME_VERSION else f", netbench pins {REFRAME_VERSION}"
        lines.append(f"ReFrame {reframe}{pinned}")
    except importlib.metadata.PackageNotFoundError:
        lines.append(f"ReFrame: not installed (netbench pins {REFRAME_VERSION})")
    if mpis is None:
        try:
            mpis = discovery.discover()
        except DataError as err:
            return "\n".join(lines + [f"MPI: not discovered: {printable(err)}"])
    lines += [printable(f"MPI {m.name}: {m.family} {m.version} ({m.source}, {m.launcher})")
              for m in mpis] or ["MPI: none found (`make setup` installs them)"]
    return "\n".join(lines)


def print_verdict(run_report):
    """The session's verdict line, and what it was judged against, as the
    page's first line says them: the last thing a session prints."""
    from . import report
    from .report import verdict
    print(printable(f"netbench: {verdict.one_line_verdict([report.load_session(run_report)])}"))


class ShowVersion(argparse.Action):
    """--version, worked out when asked: discovery runs each MPI's launcher,
    which no other command should wait for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit(exitcodes.OK)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="netbench", description=DESCRIPTION,
        epilog="exit codes, the same for every command and for a session of the checks:\n"
               + "\n".join(exitcodes.table_lines()),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=ShowVersion,
                        help="print netbench's version, ReFrame's and the MPIs found")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("discover", help="list the MPIs netbench finds on this machine")
    p.add_argument("--json", action="store_true", help="print the MPIs as JSON")
    p.set_defaults(func=cmd_discover)
    p = sub.add_parser("references", help="validate the documented reference data")
    p.add_argument("folder", nargs="?", metavar="FOLDER",
                   help="the references folder (default: reframe_checks/references)")
    p.add_argument("--show", action="store_true", help="print every figure with its citation")
    p.set_defaults(func=cmd_references)
    p = sub.add_parser("report", help="HTML report of saved ReFrame run reports "
                                      "(several: a comparison)")
    p.add_argument("run_reports", nargs="+", metavar="RUN_REPORT.json",
                   help="run reports ReFrame wrote (a session's run-report.json in "
                        "reports/, or .reframe/reports/run-report-*.json)")
    output_folder(p, "output", "write the page to DIR/index.html", required=True)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("compare", help="what changed from session A to B, per figure and "
                                       "message size: the change in %%, better or worse, "
                                       "and whether it is more than noise")
    p.add_argument("a", metavar="A", help="a run report, a session folder of reports/ "
                                          "(or `latest`), or a uuid of ReFrame's results "
                                          "database (`reframe --list-stored-sessions`)")
    p.add_argument("b", metavar="B", nargs="?",
                   help="the same for the session compared with A")
    p.add_argument("--baseline", action="store_true",
                   help="compare A with the learned baselines of its partitions "
                        "(netbench baseline accept) instead of a session B")
    p.add_argument("--all", action="store_true",
                   help="print every message size, not only the significant changes")
    output_folder(p, "output", "write the page to DIR/index.html (default: "
                               "reports/compare-<A>-<B>/)")
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("publish", help="publish a raw ReFrame run report as a session of "
                                       "reports/ (done after every run by the configuration)")
    p.add_argument("run_report", metavar="RUN_REPORT.json",
                   help="the run report ReFrame wrote (.reframe/reports/run-report-*.json)")
    output_folder(p, "reports_dir", "publish into DIR instead of reports/")
    hidden_alias(p, "--reports-dir", "reports_dir")
    p.set_defaults(func=cmd_publish)
    add_vcluster_parser(sub)
    add_baseline_parser(sub)
    add_tune_parser(sub)
    add_drain_parsers(sub)
    p = sub.add_parser("spack-check", help="validate spack.yaml against the facts of Spack's "
                                           "builtin repository and spack_repo/ (no Spack "
                                           "needed)")
    p.add_argument("spack_yaml", nargs="?", metavar="SPACK_YAML",
                   help="the Spack environment (default: spack.yaml)")
    p.add_argument("--facts", metavar="JSON", help="the builtin repository's package facts "
                                                   "(default: netbench/data/"
                                                   "spack-builtin-packages.json)")
    p.set_defaults(func=cmd_spack_check)
    return parser


def main(argv=None):
    """The command `argv` names; its exit code (exitcodes).  Ctrl-C and
    SIGTERM stop it as one: its `with` and `finally` blocks unwind
    (_stop_command), then one line says it was interrupted, exit code 130;
    vcluster and tune handle them first, to finish or revert a step."""
    args = build_parser().parse_args(argv)
    try:
        previous = {stop: signal.signal(stop, _stop_command) for stop in STOP_SIGNALS}
    except ValueError:                   # not the main thread: signals are not ours
        previous = {}
    try:
        return args.func(args)
    except DataError as err:
        print(f"netbench: {err}", file=sys.stderr)
        return exitcodes.INVALID_INPUT
    except KeyboardInterrupt as err:
        print(f"netbench {args.command}: interrupted by {_stopped_by(err)}",
              file=sys.stderr)
        return exitcodes.INTERRUPTED
    finally:
        _command_done(previous)


def _forget_a_caught_interrupt():
    """Under `python -m`, CPython (3.11 here; 3.12's source too) ends the
    process by SIGINT, silently, whatever main returned, once a
    KeyboardInterrupt has ended a string exec anywhere (a dataclass's or
    namedtuple's generated code, while the command imports): Py_RunMain
    reads a flag that run_eval_code_obj sets however the interrupt is
    caught afterwards, and resets at the start of each string exec.  An
    empty one resets it: the command's own exit code stands (Ctrl-C is
    ignored by now).  The `netbench` script runs the file path, which
    never reads the flag."""
    exec("None")


if __name__ == "__main__":
    code = main()
    _forget_a_caught_interrupt()
    sys.exit(code)
