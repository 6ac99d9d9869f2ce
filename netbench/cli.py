"""The `netbench` command."""

import argparse
import json
import sys

from . import discovery, paths, references
from .datafiles import DataError


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
        } for m in mpis], indent=2))
    else:
        for m in mpis:
            print(f"{m.name:18} {m.family:8} {m.version:10} {m.source:7} "
                  f"transports: {', '.join(m.transports)}  ({m.launcher})")
        for cand, err in problems:
            print(f"netbench: {cand.name}: skipped: {err}", file=sys.stderr)
    if not mpis:
        print("netbench: no MPI found: run `make setup`", file=sys.stderr)
        return 1
    return 0


def cmd_references(args):
    folder = args.folder or paths.REFERENCES
    figures, table = references.validate(folder)
    if args.show:
        for key, fig in figures.items():
            print(f"{key} = {fig}")
    print(f"netbench: {len(figures)} documented figures, {len(table)} threshold groups "
          f"in {folder}")
    return 0


def cmd_report(args):
    from . import report
    try:
        page = report.write_report(args.run_reports, args.output)
    except ValueError as err:
        print(f"netbench: {err}", file=sys.stderr)
        return 2
    what = "comparison of %d sessions" % len(args.run_reports) if len(args.run_reports) > 1 \
        else "report"
    print(f"netbench: {what}: {page}")
    return 0


def cmd_publish(args):
    from . import report
    folder = report.publish(args.run_report)
    print(f"netbench: HTML report {paths.REPORTS / 'latest' / 'index.html'} "
          f"(session {folder.name})")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="netbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("discover", help="list the MPIs netbench finds on this machine")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_discover)
    p = sub.add_parser("references", help="validate the documented reference data")
    p.add_argument("folder", nargs="?", help="default: reframe_checks/references")
    p.add_argument("--show", action="store_true", help="print every figure with its citation")
    p.set_defaults(func=cmd_references)
    p = sub.add_parser("report", help="HTML report of saved ReFrame run reports "
                                      "(several: a comparison)")
    p.add_argument("run_reports", nargs="+", metavar="RUN_REPORT.json")
    p.add_argument("-o", "--output", required=True, metavar="DIR")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("publish", help="publish a raw ReFrame run report as a session of "
                                       "reports/ (done after every run by the configuration)")
    p.add_argument("run_report", metavar="RUN_REPORT.json")
    p.set_defaults(func=cmd_publish)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except DataError as err:
        print(f"netbench: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
