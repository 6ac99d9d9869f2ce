"""How a ReFrame session ended: whether it ran every case it was meant to,
and what stopped it if not.  A session cut short (Ctrl-C, SIGTERM from a
batch system's time limit or `kill`, ReFrame's own --duration or
--maxfail) has cases that never ran, and ReFrame's run report lists only
the cases it had started (with its serial policy) or marks the rest
aborted (with its asynchronous one): neither says how many were meant to
run.  rfm.patches.record_how_the_session_ended counts them when the
session starts and stores the record below in the run report's
`session_info`, each key prefixed `netbench_` (PREFIX: ReFrame reads a
session_info back from its results database with a pattern that ends at
the first `}`, so its values stay flat, as session extras are); the
report renders it, first.

    interrupted    true when the session did not run every case it was
                   meant to, or a signal stopped it
    stopped_by     what stopped it (STOP_CODES' values), or null
    cases_planned  the test cases the session was to run (its checks'
                   cases after the filters; the MPI builds, fixtures, not
                   counted)
    cases_ran      of those, the ones that ran to their end (passed,
                   failed, skipped: anything but aborted or never started)

Pure data: no ReFrame.
"""

#: the prefix of the record's keys in session_info
PREFIX = "netbench_"
#: the record's keys
KEYS = ("interrupted", "stopped_by", "cases_planned", "cases_ran")

#: what stopped a session, by the name of the exception ReFrame ended on
#: (for SIGTERM and SIGHUP, ReFrame raises ForceExitError, netbench
#: Terminated (rfm.patches), each naming the signal in its text: stop_code)
STOP_CODES = {"KeyboardInterrupt": "SIGINT", "RunSessionTimeout": "time_limit",
              "FailureLimitError": "failure_limit"}
#: the signals whose ForceExitError ReFrame raises ("received signal 15")
SIGNAL_NAMES = {1: "SIGHUP", 15: "SIGTERM"}
#: the stops that are a signal: the session exits 130 (exitcodes.INTERRUPTED)
SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")

#: the record's keys in session_info and their JSON schema
#: (sessions.RUN_REPORT_SCHEMA checks them on read)
SESSION_INFO_SCHEMA = {
    PREFIX + "interrupted": {"type": "boolean"},
    PREFIX + "stopped_by": {"enum": [*STOP_CODES.values(), *SIGNAL_NAMES.values(), None]},
    PREFIX + "cases_planned": {"type": "integer", "minimum": 0},
    PREFIX + "cases_ran": {"type": "integer", "minimum": 0}}


def stop_code(err):
    """The record's `stopped_by` of the exception a session ended on; None
    for one that is not a stop (ReFrame reports other errors itself)."""
    name = type(err).__name__
    if name == "Terminated":             # rfm.patches: the signal's name
        text = str(err)
        return text if text in SIGNAL_NAMES.values() else "SIGTERM"
    if name == "ForceExitError":
        digits = "".join(c for c in str(err) if c.isdigit())
        return SIGNAL_NAMES.get(int(digits) if digits else 0, "SIGTERM")
    return STOP_CODES.get(name)


def case_key(tc):
    return (tc.get("unique_name") or tc.get("name"), tc.get("system"), tc.get("partition"),
            tc.get("environ"))


def cases_ran(runs):
    """How many of the cases in ReFrame's `runs` (its run report's), not
    counting fixtures, ran to their end in their last run: a case retried
    and aborted in its retry did not."""
    last = {}
    for run in runs:
        for tc in run.get("testcases", []):
            if not tc.get("fixture"):
                last[case_key(tc)] = tc.get("result")
    return sum(1 for result in last.values() if result != "abort")


def record(planned, ran, stopped_by=None):
    """The record of a session meant to run `planned` cases, which ran
    `ran` of them to their end and was stopped by `stopped_by` (a
    stop_code, or None)."""
    planned = max(planned, ran)
    return {"interrupted": bool(stopped_by in SIGNALS or ran < planned),
            "stopped_by": stopped_by, "cases_planned": planned, "cases_ran": ran}


def in_session_info(end):
    """The record as session_info's keys."""
    return {PREFIX + key: end[key] for key in KEYS}


def from_session_info(info):
    """The record a session_info holds; None for a run report from before
    records (or one that lacks any of its numbers)."""
    if not all(PREFIX + key in (info or {}) for key in KEYS):
        return None
    return {key: info[PREFIX + key] for key in KEYS}


def cut_short(end):
    """Whether a session's record (None: a run report from before records)
    says it was interrupted or cut short."""
    return bool(end and end.get("interrupted"))
