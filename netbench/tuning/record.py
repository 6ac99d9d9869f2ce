"""The tuning session's record, reports/tune-<time>-<profile>/tune.json:
what was tuned, on which hosts and how (tune_record's controller record),
the sessions before and after (copies of their run reports beside it),
the decision with its evidence, and the revert with its read-back.
Validated (JSON Schema) when written and when read."""

import datetime
import json
from pathlib import Path

from .. import datafiles
from ..report import reasons, sessions
from ..safefile import atomic_write
from . import decision

FILE = "tune.json"
VERSION = 1

EVIDENCE = {
    "type": "object", "additionalProperties": False,
    "required": ["case", "figure", "unit", "bytes", "before", "after", "pct", "call"],
    "properties": {"case": {"type": "string"}, "figure": {"type": "string"},
                   "unit": {"type": "string"}, "bytes": {"type": ["number", "null"]},
                   "before": {"type": "number"}, "after": {"type": "number"},
                   "pct": {"type": ["number", "null"]},
                   "call": {"enum": ["better", "worse"]},
                   # the size's paired verdict (judgement.model.judge_paired)
                   "numbers": {"type": "object"}},
}
SESSION = {
    "type": "object", "additionalProperties": False,
    "required": ["session", "run_report", "exit_code"],
    "properties": {"session": {"type": "string"},
                   # the copy beside the record, by name only
                   "run_report": {"type": "string", "pattern": r"^(before|after)-[0-9]+\.json$"},
                   "exit_code": {"type": "integer"}},
}
DIAGNOSIS = {
    "type": "object", "additionalProperties": False,
    "required": ["rule", "case", "cause", "evidence", "setting", "source", "proposal"],
    "properties": {k: {"type": "string"} for k in
                   ("rule", "case", "cause", "evidence", "setting", "source")}
    | {"proposal": {"type": "array", "items": {"type": "string"}}}}
SIDE = {"type": "object", "additionalProperties": False,
        "properties": {"sessions": {"type": "array", "items": SESSION}}}
SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["version", "profile", "flavour", "inventory", "system", "checks", "started",
                 "before", "after"],
    "properties": {
        "version": {"const": VERSION},
        "profile": {"type": "string"}, "flavour": {"type": ["string", "null"]},
        "inventory": {"type": "string"}, "system": {"type": ["string", "null"]},
        "checks": {"type": "array", "items": {"type": "string"}},
        "started": {"type": "string"}, "finished": {"type": "string"},
        # {host: readback.py's settings}: what a revert must restore
        "baseline_state": {"type": "object"},
        # tune_record's controller record (tune.yml's tune_record_file)
        "changes": {"type": ["object", "null"]},
        "repeats": {"type": "integer", "minimum": 1},
        # how the playbooks ran (engine.describe); absent before 2026-11-30
        "ansible": {"type": "object", "additionalProperties": False,
                    "required": ["strategy"],
                    "properties": {"strategy": {"type": "string"},
                                   "ansible_core": {"type": ["string", "null"]},
                                   "mitogen": {"type": ["string", "null"]}}},
        "before": SIDE, "after": SIDE,
        # sessions that measured nothing (measured again in their turn)
        "measured_nothing": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["session", "exit_code", "side"],
            "properties": {"session": {"type": "string"}, "exit_code": {"type": "integer"},
                           "side": {"enum": ["before", "after"]}}}},
        # the sessions' copies in the order they ran (the sides in turns)
        "order": {"type": "array",
                  "items": {"type": "string", "pattern": r"^(before|after)-[0-9]+\.json$"}},
        "decision": {
            "type": "object", "additionalProperties": False,
            "required": ["kept", "overridden", "reason", "improved", "worse"],
            "properties": {"kept": {"type": "boolean"}, "overridden": {"type": "boolean"},
                           # why: the code and its numbers (tuning.decision),
                           # and their words (report/reasons.py) as written
                           "code": {"type": "string"}, "numbers": {"type": "object"},
                           "reason": {"type": "string"},
                           "improved": {"type": "array", "items": EVIDENCE},
                           "worse": {"type": "array", "items": EVIDENCE},
                           # beyond the noise at a single size only: shown, not counted
                           "isolated": {"type": "array", "items": EVIDENCE}},
        },
        "revert": {
            "type": "object", "additionalProperties": False, "required": ["ran", "exact"],
            "properties": {"ran": {"type": "boolean"}, "exact": {"type": ["boolean", "null"]},
                           "differences": {"type": "array", "items": {"type": "string"}},
                           "state": {"type": "object"}, "error": {"type": "string"}},
        },
        "failure": {"type": "object", "additionalProperties": False,
                    "required": ["stage", "message"],
                    "properties": {"stage": {"enum": ["failed", "interrupted"]},
                                   "message": {"type": "string"}}},
        # diagnosis.py's Diagnoses of the sessions before, with the profile's
        # values against each
        "diagnoses": {"type": "array", "items": DIAGNOSIS},
        # those every tuned session names and no untuned one did
        "diagnoses_after": {"type": "array", "items": DIAGNOSIS},
    },
}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new(profile, flavour, inventory, system, checks, repeats):
    return {"version": VERSION, "profile": profile, "flavour": flavour,
            "inventory": str(inventory), "system": system, "checks": checks,
            "repeats": repeats,
            "started": now(), "before": {}, "after": {}, "order": []}


def decision_entry(decided):
    """The record's decision: its code and numbers, and their words
    (report/reasons.py) for a reader of the record alone."""
    def entries(found):
        return [e.to_json() for e in found]
    return {"kept": decided.kept, "overridden": decided.overridden, "code": decided.code,
            "numbers": decided.numbers, "reason": reasons.render(decided.code, decided.numbers),
            "improved": entries(decided.improved), "worse": entries(decided.worse),
            "isolated": entries(decided.isolated)}


def write(rec, folder):
    datafiles.validate(rec, SCHEMA, Path(folder) / FILE)
    atomic_write(Path(folder) / FILE, json.dumps(rec, indent=1, sort_keys=True) + "\n")


def load(folder):
    path = Path(folder) / FILE
    return datafiles.validate(datafiles.load_json(path, kind="record"), SCHEMA, path)


def launch_values_of(side, folder):
    """Every launch's figures of each session of a record's side
    (decision.launch_values)."""
    return [decision.launch_values(sessions.load_session(Path(folder) / s["run_report"]))
            for s in side.get("sessions", [])]


def side_of(side, folder):
    """The pooled compare side of a record's sessions (decision.pooled_side)."""
    return decision.pooled_side(launch_values_of(side, folder))
