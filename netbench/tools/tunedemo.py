"""`make tune-demo` (root): the internode checks on a virtual cluster's
emulated GigE links before and after `tune.yml -e tune_profile=ethernet_1g`,
then `revert.yml`, and a comparison report of the two sessions.

The cluster's "switch" (bridge and host ends of the links) carries jumbo
frames, as a GigE switch for a cluster does; the nodes start at the default
MTU 1500, and the profile raises them to 9000 (seed 004's jumbo frames).
"""

import json
import subprocess
import sys
from pathlib import Path

from .. import paths, vcluster
from ..rfm import session

NAME = "tdemo"
PROFILE = "ethernet_1g"
BIN = Path(sys.executable).parent
SELECTION = ["-p", "^(mpich|openmpi)$", "-n", "^(PingPong|MpiVsTcp)",
             "-x", "intranode|shm|nonblocking"]
OUT = paths.STATE / "tune-demo"


def reframe(system):
    """Run the selection; returns (exit code, the session's run report)."""
    proc = session.run_reframe(system, *SELECTION)
    return proc.returncode, session.latest_report()


def playbook(state, name, *args):
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", state["files"]["inventory"],
                           name, *args], cwd=paths.REPO, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"netbench tune-demo: {name} failed:\n{proc.stdout[-3000:]}")
    print(f"# {name}: ok")


def figures(report):
    """(check, environment, variable) -> value for every performance value."""
    out = {}
    for run in report["runs"]:
        for tc in run["testcases"]:
            for key, value in (tc.get("perfvalues") or {}).items():
                out[(tc["display_name"], tc["environ"], key.split(":")[-1])] = value[0]
    return out


def compare(before, after):
    b, a = figures(before), figures(after)
    print(f"{'check':58} {'env':8} {'figure':14} {'untuned':>10} {'tuned':>10} {'ratio':>6}")
    for key in sorted(set(a) & set(b)):
        if b[key] and key[2].startswith(("bw_", "peak_bw", "latency")):
            print(f"{key[0][:58]:58} {key[1]:8} {key[2]:14} {b[key]:10.2f} {a[key]:10.2f} "
                  f"{a[key] / b[key]:6.2f}")


def main():
    state, created = vcluster.up(NAME, nodes=2, rate="1gbit", switch_mtu=9000)
    if not created:
        raise SystemExit(f"netbench tune-demo: cluster {NAME} is already up; "
                         f"`netbench vcluster down --name {NAME}` first")
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        rc_before, before = reframe(state["system"])
        (OUT / "untuned.json").write_text(json.dumps(before))
        print(f"# untuned run: reframe exit {rc_before}")
        playbook(state, "tune.yml", "-e", f"tune_profile={PROFILE}")
        try:
            rc_after, after = reframe(state["system"])
            (OUT / "tuned.json").write_text(json.dumps(after))
            print(f"# tuned run ({PROFILE}): reframe exit {rc_after}")
        finally:
            playbook(state, "revert.yml")
    finally:
        vcluster.down(NAME)
    compare(before, after)
    # `netbench report -o` replaces its own index.html in place: nothing
    # else in the folder is removed
    page_dir = paths.REPORTS / "tune-demo"
    subprocess.run([str(BIN / "netbench"), "report", str(OUT / "untuned.json"),
                    str(OUT / "tuned.json"), "-o", str(page_dir)], check=True)


if __name__ == "__main__":
    main()
