"""Trim a run report to what netbench reads of it, for tests/data/tune/:
    python tests/data/tune/trim.py reports/SESSION/run-report.json OUT.json
session_info, and per case its names, system, partition, environment,
result, perfvalues, record, fail_reason, and the environment the job set
(env_vars: the MCA/CVAR variables diagnosis.py reads)."""

import json
import sys

KEPT = ("name", "display_name", "unique_name", "system", "partition", "environ", "result",
        "perfvalues", "record", "fail_reason", "env_vars")


def trim(report):
    return {"session_info": report["session_info"],
            "runs": [{**{k: v for k, v in run.items() if k != "testcases"},
                      "testcases": [{k: tc[k] for k in KEPT if k in tc}
                                    for tc in run["testcases"] if tc.get("record")]}
                     for run in report["runs"]]}


if __name__ == "__main__":
    source, target = sys.argv[1:3]
    with open(source) as f:
        report = json.load(f)
    with open(target, "w") as f:
        json.dump(trim(report), f, indent=None, separators=(",", ":"))
        f.write("\n")
