"""Synthetic sweep outputs in the benchmark's format (netbench.c's sweep
mode, as results.sweep.parse_sweep reads it): the files in
tests/data/sweep_confirm/ are made by `python tests/helpers/sweepfiles.py`."""

import random
import sys
from pathlib import Path

from netbench.results.sweep import round_robin

SIZE = 1 << 20
LINE_MBPS = 900.0
DATA = Path(__file__).resolve().parent.parent / "data" / "sweep_confirm"


def sweep_text(hosts, rate_of, seed, pairs=None, noise=0.02):
    """One pass over `pairs` of rank numbers (every pair without), in the
    tournament's rounds; rate_of(src, dst) is the share of the line rate."""
    rng = random.Random(seed)
    lines = [f"# netbench 1.0 mode=sweep variant=concurrent nprocs={len(hosts)}"]
    lines += [f"# rank {r} host {h} cpu 0 allowed 0" for r, h in enumerate(hosts)]
    lines += ["# sweep: latency_bytes=8 window=8 order=concurrent pairs="
              + ("all" if pairs is None else "list"),
              "# columns: round src dst bytes latency usec usec_min mad_pct Mbps samples reps"]
    wanted = None if pairs is None else {tuple(sorted(p)) for p in pairs}
    rounds = measured = 0
    for r, round_pairs in enumerate(round_robin(len(hosts))):
        chosen = [p for p in round_pairs if wanted is None or p in wanted]
        rounds += bool(chosen)
        measured += len(chosen)
        for a, b in chosen:
            lines.append(f"{r:5d} {a:5d} {b:5d} {8:10d} 1 {20 * rng.uniform(0.98, 1.02):12.4f}"
                         f" {19.0:12.4f} {1.0:8.3f} {0.4:12.3f} {3:4d} {100:9d}")
            for src, dst in ((a, b), (b, a)):
                mbps = LINE_MBPS * rate_of(hosts[src], hosts[dst]) * rng.uniform(1 - noise,
                                                                                  1 + noise)
                usec = SIZE * 8 / mbps
                lines.append(f"{r:5d} {src:5d} {dst:5d} {SIZE:10d} 0 {usec:12.4f} "
                             f"{usec * 0.98:12.4f} {1.0:8.3f} {mbps:12.3f} {3:4d} {8:9d}")
    lines += [f"@ rounds {rounds}", f"@ pairs {measured}", "@ sweep_seconds 1.000",
              "@ order concurrent"]
    return "\n".join(lines) + "\n"


HOSTS = [f"n{i}" for i in range(6)]
#: one node at a third of the rate; three bad cables at one node (bad with
#: 3 of its 5 partners: a majority, so named as the node without confirmation)
CASES = {
    "slow-node": lambda s, d: 1 / 3 if "n3" in (s, d) else 1.0,
    "three-cables": lambda s, d: 1 / 3 if "n0" in (s, d) and {s, d} & {"n1", "n2", "n3"}
    else 1.0,
}


def write_case(name):
    """The case's first pass, then its second: the pairs fleet.remeasure
    asks for, as LinkSweep's job runs it between passes."""
    from netbench.fleet import remeasure
    folder = DATA / name
    folder.mkdir(parents=True, exist_ok=True)
    first = folder / "sweep.out"
    first.write_text(sweep_text(HOSTS, CASES[name], seed=1))
    again = folder / "sweep-2.out"
    again.unlink(missing_ok=True)
    listed = remeasure.pairs_to_measure_again(str(first))
    pairs = [tuple(map(int, p.split(":"))) for p in listed.split(",")]
    again.write_text(sweep_text(HOSTS, CASES[name], seed=2, pairs=pairs))


if __name__ == "__main__":
    for case in sys.argv[1:] or CASES:
        write_case(case)
