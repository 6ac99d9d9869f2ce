"""`python -m netbench.fleet.remeasure [--bandwidth-only] [--passes-to-fail N]
[--references DIR] [--profile NAME] [--topology FILE] [--confirming FILE]
SWEEP_OUTPUT`: the pairs a sweep must measure again before anything is named,
by the judging rule (netbench.judgement.model: a pair is named only when it is
outside the band in every pass, at least N of them; judging.yaml's
`min_to_fail`, which the check passes), as the benchmark's `-L` list of rank
pairs (`0:1,2:3`), or nothing when every pair is decided.  The band is the
check's: its references folder and judging profile, which it passes too.
With them, each end of those pairs against `confirm_partners` hosts the
sweep found healthy (thresholds.yaml `sweep:`; netbench.fleet.confirm),
under another leaf switch of the partition's topology (`--topology`) where
it can: confirm before blame.

The passes so far are SWEEP_OUTPUT and its later launches beside it,
`sweep-2.out`, `sweep-3.out`, ... (netbench.judgement.remeasure's naming).
With `--confirming FILE` it writes there, as JSON (`{"confirming": [[a, b],
...]}`, host names), the pairs it added to confirm a suspect against a
healthy partner: the check reads them (judge.judge's `confirming`) instead
of judging the first pass a second time.
LinkSweep's job script runs it between passes, on the node that runs the job
script, so each pass follows the last within the same job (one allocation,
one launch per pass).  Pure: it reads the passes and prints one line.
"""

import dataclasses
import json
import os
import sys
from pathlib import Path

from .. import paths, references, safefile
from ..datafiles import DataError
from ..judgement.remeasure import launch_files
from ..judgement import knobs as judging_knobs
from ..results.sweep import parse_sweep
from . import confirm
from .judge import pairs_still_undecided
from .topology import partition_topology

#: the run name of a sweep's passes: its later launches are `sweep-N.out`
RUN = "sweep"
USAGE = ("usage: python -m netbench.fleet.remeasure [--bandwidth-only] [--passes-to-fail N] "
         "[--references DIR] [--profile NAME] [--topology FILE] [--confirming FILE] SWEEP_OUTPUT")


class Unusable(Exception):
    """The sweep output cannot say what to measure again (one line)."""


def rank_pairs(sweep, host_pairs):
    """`-L` text for directed host pairs: each unordered pair once, by the
    ranks that ran on those hosts (the benchmark measures both directions
    of a pair it is given)."""
    rank_of = {host: rank for rank, host in sorted(sweep.hosts.items(), reverse=True)}
    wanted = sorted({tuple(sorted((rank_of[a], rank_of[b]))) for a, b in host_pairs})
    return ",".join(f"{a}:{b}" for a, b in wanted)


def without_latency(measurements):
    return {pair: {**figs, "latency_us": None} for pair, figs in measurements.items()}


@dataclasses.dataclass
class Options:
    bandwidth_only: bool = False
    passes_to_fail: int = None
    references: str = str(paths.REFERENCES)
    profile: str = None
    topology: str = None
    confirming: str = None
    first: str = None


def parse_args(argv):
    """The Options; ValueError on anything else."""
    options, files = Options(), []
    args = iter(argv)
    for arg in args:
        if arg == "--bandwidth-only":
            options.bandwidth_only = True
        elif arg == "--passes-to-fail":
            options.passes_to_fail = int(next(args, ""))
            if options.passes_to_fail < 1:
                raise ValueError
        elif arg in ("--references", "--profile", "--topology", "--confirming"):
            value = next(args, None)
            if not value:
                raise ValueError
            setattr(options, arg[2:], value)
        else:
            files.append(arg)
    if len(files) != 1:
        raise ValueError
    options.first = files[0]
    return options


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        options = parse_args(argv)
    except ValueError:
        print(USAGE, file=sys.stderr)
        return 2
    first = options.first
    try:
        chosen = next_pass(first, options.bandwidth_only, options.passes_to_fail,
                           options.references, options.profile, options.topology)
    except DataError as err:
        print(f"netbench.fleet.remeasure: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"netbench.fleet.remeasure: {err.filename or first}: cannot read: "
              f"{err.strerror}", file=sys.stderr)
        return 2
    except (Unusable, ValueError) as err:
        print(f"netbench.fleet.remeasure: {first}: {err}", file=sys.stderr)
        return 2
    if options.confirming:
        try:
            safefile.atomic_write(options.confirming, confirming_json(chosen.confirming))
        except OSError as err:
            print(f"netbench.fleet.remeasure: {options.confirming}: cannot write: "
                  f"{err.strerror}", file=sys.stderr)
            return 2
    print(chosen.listed)
    return 0


def confirming_file(later_pass):
    """Where the pass `sweep-N.out` says which of its pairs confirm."""
    return later_pass.removesuffix(".out") + ".confirming.json"


def confirming_json(pairs):
    return json.dumps({"confirming": [list(p) for p in pairs]}) + "\n"


def read_confirming(text, name):
    """The host pairs of a `--confirming` file's `text`, sorted within
    each; ValueError naming the file `name` on anything else."""
    try:
        pairs = json.loads(text)["confirming"]
        if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(h, str) for h in p)
                   for p in pairs):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"{name}: confirming: not a list of host pairs") from None
    return {tuple(sorted(p)) for p in pairs}


def passes_of(first):
    """The file of every pass so far: the first, then `sweep-N.out`."""
    folder = os.path.dirname(first) or "."
    return [first] + [os.path.join(folder, f)
                      for f in launch_files(folder, RUN, os.path.basename(first))[1:]]


@dataclasses.dataclass(frozen=True)
class NextPass:
    """What the next pass measures: `listed`, the benchmark's `-L` text
    ("" for no pass); `confirming`, the sorted host pairs of it that are
    there to confirm a suspect against a healthy partner, not undecided."""
    listed: str
    confirming: tuple = ()


def pairs_to_measure_again(path, bandwidth_only=False, passes_to_fail=None,
                           folder=paths.REFERENCES, profile=None, topology=None):
    """The `-L` text of next_pass."""
    return next_pass(path, bandwidth_only, passes_to_fail, folder, profile, topology).listed


def next_pass(path, bandwidth_only=False, passes_to_fail=None, folder=paths.REFERENCES,
              profile=None, topology=None):
    """The NextPass of the sweep whose first pass is in `path`: its
    undecided pairs and those that confirm each end against healthy
    partners (`topology`: the partition's file, whose leaves they are
    chosen across); no pass when every pair is decided, or when the sweep
    did not finish (a node that went silent would fail the next launch
    too; the check names it).  ValueError (a figure that is not finite)
    or Unusable otherwise."""
    with open(path, errors="replace") as f:
        sweep = parse_sweep(f.read())
    if sweep.sweep_seconds is None:
        print(f"netbench.fleet.remeasure: {path}: the sweep did not finish: nothing is "
              f"measured again", file=sys.stderr)
        return NextPass("")
    unplaced = sorted({rank for pair in sweep.by_rank for rank in pair} - set(sweep.hosts))
    if unplaced:
        raise Unusable(f"no '# rank R host H' line for rank {unplaced[0]}: the output's "
                       f"header is cut or edited")
    shared = sorted({rank for rank, host in sweep.hosts.items()
                     if list(sweep.hosts.values()).count(host) > 1})
    if shared:
        raise Unusable(f"ranks {', '.join(map(str, shared))} ran on one host "
                       f"({sweep.hosts[shared[0]]}): a sweep measures the links between "
                       f"nodes, one rank each")
    passes = [sweep.measurements()]
    for later in passes_of(path)[1:]:
        with open(later, errors="replace") as f:
            passes.append(parse_sweep(f.read()).measurements())
    if bandwidth_only:
        passes = [without_latency(m) for m in passes]
    knobs = judging_knobs.load(folder, profile)
    if passes_to_fail is not None:
        knobs = dataclasses.replace(knobs, min_to_fail=passes_to_fail)
    rule = references.sweep_thresholds(Path(folder), profile)
    rank_of = {host: rank for rank, host in sweep.hosts.items()}
    fabric = partition_topology(topology, rank_of) if topology else None
    undecided = pairs_still_undecided(passes, knobs, rule, fabric)
    leaf_of = fabric.leaf_of() if fabric else None
    confirming = confirm.confirmation_pairs(undecided, sorted(rank_of), rule,
                                            rule.confirm_partners, rank_of, leaf_of)
    outside = {tuple(sorted(p)) for p in undecided}
    return NextPass(rank_pairs(sweep, undecided + confirming),
                    tuple(p for p in confirming if p not in outside))


if __name__ == "__main__":
    sys.exit(main())
