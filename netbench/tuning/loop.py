"""`netbench tune`: does a tuning profile help this cluster?

1. read back every host's settings (readback.py), the baseline a revert
   must restore exactly;
2. measure the chosen checks, untuned ("before") and tuned ("after"), in
   turns: B AA BB AA B ...  The tuning is applied with tune.yml before
   each tuned block and reverted with revert.yml (read back, exact)
   before each untuned one.  Each side gets `repeats` sessions, at least
   decision.MIN_ROUNDS: the i-th of each side ran next to each other, a
   round;
3. judge each size by its rounds' ratios and decide (decision.py); a
   loss beside a gain is measured again first, as many rounds more
   (decision.retest_wanted), and decided on all the rounds; then keep
   (applied again if the last turn was untuned), or run revert.yml and
   read the settings back.

Why in turns: a busy host's load drifts over the minutes a tune takes.
Measured all before, then all after, a drift falls on one side: in
session 11 a profile that changed nothing (the MTU the nodes had) was
called worse that way.  In turns (ABBA), each tuned block has untuned
sessions on both sides of it in time, so a drift falls on both sides,
and each round's two sessions share the load of their moment; it costs
two playbook runs a cycle (measured here: 4 rounds, 8 sessions and 4
playbook runs, about 3.5 minutes for one ping-pong case).

Any failure after the tuning started (a playbook, a session that wrote
no report, Ctrl-C, SIGTERM, or any exception at all: run()'s `finally`)
reverts the hosts, and the record says where it stopped.  From the moment
the revert begins, a further Ctrl-C or SIGTERM waits until the hosts are
reverted and the record and page written.  Ansible is the engine:
netbench runs its playbooks and reads what they write.  The tuning session's record and page go to
reports/tune-<time>-<profile>/ (record.py, page.py).
"""

import contextlib
import datetime
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import exitcodes, paths
from ..datafiles import DataError, load_yaml, read_bytes, validate
from ..report import diagnosis, reasons, sessions
from ..rfm import session
from ..textsafe import printable
from . import decision, engine, record

BIN = Path(sys.executable).parent
PROFILES = paths.REPO / "playbooks" / "profiles"
READBACK = Path(__file__).with_name("readback.py")
NAME = re.compile(r"^[A-Za-z0-9_]+$")
#: the line publishing prints after a session: its folder under reports/
PUBLISHED = re.compile(r"\(session (\d{8}T\d{6}-[0-9a-f]{8})\)")
PLAYBOOK_TIMEOUT = 900
#: sessions a side, in turns: decision.MIN_ROUNDS rounds, the fewest a
#: change is called on
REPEATS = decision.MIN_ROUNDS


class TuneError(Exception):
    """A step of the loop failed; str() is one line."""


#: a sysctl's or an ethtool setting's value as a profile gives it
_SCALAR = {"type": ["string", "number", "boolean"]}
_SCALARS = {"type": "object", "additionalProperties": _SCALAR}
#: the sections of a profile's settings (and of each flavour): what the
#: tune_* roles read of tune_profile_settings (playbooks/roles/*/meta/
#: argument_specs.yml); a section no role reads would be ignored silently
SETTINGS_SCHEMA = {
    "type": ["object", "null"], "additionalProperties": False,
    "properties": {
        "sysctl": _SCALARS,
        "nic": {"type": "object", "additionalProperties": False,
                "properties": {"mtu": {"type": "integer", "minimum": 68},
                               "features": _SCALARS, "coalesce": _SCALARS, "rings": _SCALARS}},
        "modules": {"type": "object", "additionalProperties": _SCALARS},
        "cpu": {"type": "object", "additionalProperties": False,
                "properties": {"governor": {"type": "string"}}},
        "ucx": _SCALARS}}
PROFILE_SCHEMA = {
    "type": "object", "required": ["flavours"],
    "properties": {
        "description": {"type": "string"},
        "drivers": {"type": "array", "items": {"type": "string"}},
        "settings": SETTINGS_SCHEMA,
        "flavours": {"type": "object", "additionalProperties": SETTINGS_SCHEMA},
        "history": {"type": "array"}}}


def profile_data(name, flavour, profiles=PROFILES):
    """The profile's YAML, checked against PROFILE_SCHEMA; DataError for an
    unknown profile or flavour, or a profile the roles could not read."""
    path = Path(profiles) / f"{name}.yml"
    if not NAME.match(name or "") or not path.is_file():
        known = ", ".join(sorted(p.stem for p in Path(profiles).glob("*.yml")))
        raise DataError(path, None, f"no such profile; use one of {known}")
    data = validate(load_yaml(path), PROFILE_SCHEMA, path)
    if flavour is not None and flavour not in (data.get("flavours") or {}):
        raise DataError(path, "flavours",
                        f"no flavour {flavour!r}; use one of "
                        f"{', '.join(data.get('flavours') or {})}")
    return data


def sysctl_keys(profiles=PROFILES):
    """Every sysctl any profile sets, in any flavour: what a read-back holds.
    DataError for a profile the roles could not read."""
    keys = set()
    for path in {*PROFILES.glob("*.yml"), *Path(profiles).glob("*.yml")}:
        data = validate(load_yaml(path), PROFILE_SCHEMA, path)
        keys.update((data.get("settings") or {}).get("sysctl") or {})
        for flavour in (data.get("flavours") or {}).values():
            keys.update((flavour or {}).get("sysctl") or {})
    return sorted(keys)


def ansible(tool, inventory, *args, timeout=PLAYBOOK_TIMEOUT, detached=False):
    """`detached`: in a session of its own, so that a Ctrl-C at the
    terminal does not stop a revert half-way."""
    return subprocess.run([str(BIN / tool), "-i", str(inventory), *args], cwd=paths.REPO,
                          capture_output=True, text=True, timeout=timeout,
                          start_new_session=detached, env=engine.environment())


def playbook(inventory, name, *args, detached=False):
    """Run a playbook; TuneError with the end of its output if it fails."""
    proc = ansible("ansible-playbook", inventory, name, *args, detached=detached)
    if proc.returncode != 0:
        tail = " | ".join(line.strip() for line in
                          (proc.stdout + proc.stderr).splitlines()
                          if re.search(r"fatal|FAILED|ERROR|failed=[1-9]", line))[-800:]
        raise TuneError(f"{name} failed (exit {proc.returncode}): {tail or 'see ansible output'}")
    return proc


def read_back(inventory, profiles=PROFILES, detached=False):
    """{host: settings} of every host (readback.py through Ansible's script
    module; each host's result in a tree folder)."""
    with tempfile.TemporaryDirectory(prefix="netbench-readback-") as tree:
        proc = ansible("ansible", inventory, "all", "--become", "-m", "ansible.builtin.script",
                       "-a", " ".join([str(READBACK), *sysctl_keys(profiles)]), "--tree", tree,
                       timeout=300, detached=detached)
        found, why = {}, {}
        for path in Path(tree).iterdir():
            found[path.name], why[path.name] = host_settings(path)
    missing = [h for h, v in found.items() if v is None]
    if proc.returncode != 0 or missing or not found:
        said = "; ".join(f"{host}: {why[host]}" for host in missing) or \
            " ".join((proc.stdout + proc.stderr).split())[-400:]
        raise TuneError(f"cannot read the hosts' settings back ({', '.join(missing) or 'no host'}"
                        f"): {said[:800]}")
    return found


def host_settings(path):
    """(settings, None) of one host's result in read_back's tree, or (None,
    why not) in one line: an unreachable host, a script that failed."""
    try:
        result = json.loads(read_bytes(path, "record"))
    except (DataError, ValueError):
        return None, "no result"
    try:
        return json.loads(result["stdout"]), None
    except (KeyError, TypeError, ValueError):
        said = (result.get("msg") or result.get("stderr") or "no settings read") \
            if isinstance(result, dict) else "no result"
        return None, " ".join(str(said).split())[:300]


def measure(system, checks, label):
    """A ReFrame session of the chosen checks; (run report path, exit code).
    TuneError when the session published no report."""
    proc = session.run_reframe(system, *checks)
    found = PUBLISHED.findall(proc.stdout + proc.stderr)
    if not found:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
        raise TuneError(f"the {label} session wrote no report (reframe exit "
                        f"{proc.returncode}): {' | '.join(tail)}")
    return paths.REPORTS / found[-1] / "run-report.json", proc.returncode


#: what stops a tune: Ctrl-C, and SIGTERM (a batch system ending the job, kill)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred():
    """Ctrl-C and SIGTERM wait until the block (a revert, the record's
    writing) is done; the list yielded holds the names of those that came
    meanwhile.  Nothing is installed outside the main thread (Python
    delivers signals there only)."""
    caught = []
    with stop_signals_handled(lambda signum, _: caught.append(signal.Signals(signum).name)):
        yield caught


@contextlib.contextmanager
def stop_signals_handled(handler):
    """STOP_SIGNALS go to `handler` inside the block, and back to what they
    did before it after."""
    try:
        previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    except ValueError:                  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, handler_before in previous.items():
            signal.signal(s, handler_before)


def dry_run(inventory, profile, flavour, profiles=PROFILES, say=print):
    """tune.yml in check mode: per host, the tasks that would change."""
    proc = playbook(inventory, "tune.yml", "--check", "--diff",
                    *profile_vars(profile, flavour, profiles))
    changes = would_change(proc.stdout)
    for host in sorted(changes):
        say(f"{host}: {len(changes[host])} would change")
        for task in changes[host]:
            say(f"  {task}")
    if not changes:
        say("netbench tune: nothing would change")
    return changes


def would_change(output):
    """{host: [task]} of ansible-playbook's default output: each `changed:`
    line under its TASK header."""
    changes, task = {}, None
    for line in output.splitlines():
        header = re.match(r"^TASK \[(.*)\]", line)
        if header:
            task = header.group(1)
        hit = re.match(r"^changed: \[([^\]]+)\]", line)
        if hit and task:
            tasks = changes.setdefault(hit.group(1), [])
            if task not in tasks:
                tasks.append(task)
    return changes


def profile_vars(profile, flavour, profiles=PROFILES):
    args = ["-e", f"tune_profile={profile}"]
    if Path(profiles).resolve() != PROFILES.resolve():
        args += ["-e", f"tune_profile_dir={Path(profiles).resolve()}"]
    return args + (["-e", f"tune_flavour={flavour}"] if flavour else [])


def new_folder(profile, reports_dir=paths.REPORTS):
    """The tuning session's own new folder in `reports_dir`; DataError
    (before anything is applied) when it cannot be made there."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    folder = Path(reports_dir) / f"tune-{stamp}-{profile}"
    if Path(reports_dir).exists() and not Path(reports_dir).is_dir():
        raise DataError(reports_dir, None, "--reports-dir: not a folder")
    try:
        folder.mkdir(parents=True)      # an existing folder is never reused
    except OSError as err:
        raise DataError(reports_dir, None, f"--reports-dir: cannot make {folder.name} "
                                           f"there: {err.strerror}") from err
    return folder


def run(profile, flavour=None, inventory=None, system=None, checks=(), keep=False,
        repeats=REPEATS, profiles=PROFILES, reports_dir=paths.REPORTS, say=print):
    """The loop; returns (exit code, record folder).  Exit 0: kept (by the
    measurement or --keep), 1: reverted, 2: a step failed (reverted), 130:
    Ctrl-C or SIGTERM stopped it (reverted exactly, the record written; a
    revert or record that failed is 2 whatever stopped the loop).
    Everything a user gave is checked before anything is applied."""
    profile_data(profile, flavour, profiles)
    sysctl_keys(profiles)               # every read-back reads every profile
    inventory = Path(inventory or paths.REPO / "inventory" / "hosts.yml")
    if not inventory.is_file():
        raise DataError(inventory, None, "no such inventory")
    folder = new_folder(profile, reports_dir)
    rec = record.new(profile, flavour, inventory, system, list(checks), repeats)
    rec["ansible"] = engine.describe(engine.environment())
    turns = Turns(rec, inventory, folder / "tuning-state.json", profile_vars(
        profile, flavour, profiles), profiles, say)
    # Outside the loop, a Ctrl-C or SIGTERM waits (interrupts_deferred):
    # once the loop is left, however it is left, the revert and the record
    # must run to their end.  Inside it, either stops the loop (reverted).
    with interrupts_deferred() as deferred:
        try:
            with stop_signals_handled(raise_interrupt):
                measure_and_decide(rec, turns, profile, flavour, system, checks, keep, repeats,
                                   profiles, folder, say)
        except BaseException as err:
            rec["failure"] = failure_entry(err)
            say(f"netbench tune: {rec['failure']['stage']}: {rec['failure']['message']}")
            if not isinstance(err, (Exception, KeyboardInterrupt)):
                raise                   # SystemExit and the like: reverted first, below
        finally:
            # every exit after apply, whatever the exception: only a loop that
            # ran to its decision to keep leaves the tuning on
            if turns.applied and (rec.get("failure") or not rec["decision"]["kept"]):
                revert(inventory, turns.state_file, rec, profiles, say)
            rec["finished"] = record.now()
            written = write_outputs(rec, folder, say)
    if deferred:
        say(f"netbench tune: {', '.join(dict.fromkeys(deferred))} waited for the revert and "
            f"the record")
    say(summary(rec))
    if len(written) == 2:
        say(f"netbench tune: record {folder / record.FILE}, page {folder / 'index.html'}")
    elif written:
        say(f"netbench tune: only {folder / written[0]} written")
    if (rec.get("revert") or {}).get("exact") is False or len(written) < 2:
        return 2, folder
    if (rec.get("failure") or {}).get("stage") == "interrupted":
        return exitcodes.INTERRUPTED, folder
    if rec.get("failure"):
        return 2, folder
    return (0 if rec["decision"]["kept"] else 1), folder


def raise_interrupt(signum, _frame):
    """Ctrl-C and SIGTERM while measuring: the loop stops there (and reverts)."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


#: what the loop's own steps raise: their text is the one line
EXPECTED = (TuneError, DataError, subprocess.TimeoutExpired)


def failure_entry(err):
    """The record's failure of an exception that ended the loop: its text on
    one line, with its type where the loop did not raise it itself."""
    if isinstance(err, KeyboardInterrupt):     # raise_interrupt names the signal
        return {"stage": "interrupted", "message": f"{err.args[0] if err.args else 'SIGINT'} "
                                                   f"received"}
    text = " ".join(str(err).split())
    if not isinstance(err, EXPECTED):
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return {"stage": "failed", "message": printable(text or type(err).__name__)}


def write_outputs(rec, folder, say):
    """The record and the page, each as far as it can be written: a page
    that cannot be drawn does not cost the record, nor the record the page.
    Returns the names written."""
    from . import page
    written = []
    for name, write in ((record.FILE, record.write), ("index.html", page.write)):
        try:
            write(rec, folder)
            written.append(name)
        except Exception as err:        # a full disk, a record that fails its schema
            say(f"netbench tune: {name} not written: {failure_entry(err)['message']}")
    return written


def measure_and_decide(rec, turns, profile, flavour, system, checks, keep, repeats, profiles,
                       folder, say):
    """Steps 1-3 of the loop (the module's docstring), into `rec`."""
    say(f"netbench tune: reading the hosts' settings ({rec['inventory']})")
    rec["baseline_state"] = read_back(turns.inventory, profiles)
    refuse_if_tuned(rec["baseline_state"])
    measure_in_turns(rec, turns, system, checks, repeats, folder, say)
    data = profile_data(profile, flavour, profiles)
    before = session_diagnoses(rec["before"], folder)
    rec["diagnoses"] = with_proposals(named_by_every(before).values(), data, flavour)
    for found in rec["diagnoses"]:
        say(f"netbench tune: diagnosis: {found['case']}: {found['cause']}: "
            f"{found['evidence']}; setting: {found['setting']}"
            + (f"; {profile} proposes {', '.join(found['proposal'])}"
               if found["proposal"] else ""))
    # what the tuning itself brought: a cause every tuned session names and
    # no untuned one did (sockbuf_capped: its buffers, from the node state)
    named_before = set().union(*before)
    rec["diagnoses_after"] = with_proposals(
        [d for key, d in named_by_every(session_diagnoses(rec["after"], folder)).items()
         if key not in named_before], data, flavour)
    for found in rec["diagnoses_after"]:
        say(f"netbench tune: diagnosis with {profile} on: {found['case']}: {found['cause']}: "
            f"{found['evidence']}")
    decided = decide_sides(rec, folder, keep)
    if decision.retest_wanted(decided, keep):
        rounds = decided.numbers["rounds"]
        say(f"netbench tune: {profile} made some sizes better and some worse over {rounds} "
            f"rounds: measuring as many again ({2 * rounds} in all) before deciding")
        measure_in_turns(rec, turns, system, checks, 2 * rounds, folder, say)
        decided = decide_sides(rec, folder, keep, first=decided)
    rec["decision"] = record.decision_entry(decided)
    if rec["decision"]["kept"] and not turns.tuned:
        say(f"netbench tune: applying {profile} again, to keep it")
        turns.apply()


def decide_sides(rec, folder, keep, first=None):
    """decision.decide on the record's sessions so far."""
    return decision.decide(record.launch_values_of(rec["before"], folder),
                           record.launch_values_of(rec["after"], folder), keep=keep,
                           first=first)


#: the host's record of a tuning tune.yml applied and nothing reverted
#: (tune_record's fact file)
TUNED_FACT = "/etc/ansible/facts.d/netbench_state.fact"


def refuse_if_tuned(state):
    """TuneError when a host already carries a tuning: revert.yml restores
    every value as it was before netbench's first change, so the untuned
    turns would undo that tuning too and no revert could restore the hosts
    as found (measured: ethernet_1g kept, then a second tune's revert read
    back its facts files gone)."""
    tuned = sorted(host for host, settings in state.items()
                   if ((settings or {}).get("files") or {}).get(TUNED_FACT))
    if tuned:
        raise TuneError(f"{', '.join(tuned)} already carry a tuning ({TUNED_FACT}): "
                        f"revert it first (ansible-playbook revert.yml -i INVENTORY), then "
                        f"tune again")


class Turns:
    """The hosts' tuning switched on and off between the sides' turns:
    tune.yml to tune, revert.yml to untune, read back against the baseline
    each time (a before session on hosts not back at their baseline would
    measure the wrong side)."""

    def __init__(self, rec, inventory, state_file, variables, profiles, say):
        self.rec, self.inventory, self.state_file = rec, inventory, state_file
        self.variables, self.profiles, self.say = variables, profiles, say
        self.tuned = self.applied = False

    def apply(self):
        self.say(f"netbench tune: applying {self.rec['profile']}"
                 + (f" ({self.rec['flavour']})" if self.rec["flavour"] else ""))
        self.tuned = self.applied = True
        try:
            playbook(self.inventory, "tune.yml", *self.variables,
                     "-e", f"tune_record_file={self.state_file}")
        finally:
            if not self.rec.get("changes"):
                self.rec["changes"] = read_json(self.state_file)

    def untune(self):
        self.say(f"netbench tune: reverting {self.rec['profile']} for the untuned turn")
        with interrupts_deferred() as interrupted:
            playbook(self.inventory, "revert.yml", "-e", f"tune_record_file={self.state_file}",
                     detached=True)
            now = read_back(self.inventory, self.profiles, detached=True)
        self.tuned = False
        if interrupted:         # the revert ran to its end first; the loop stops now
            raise KeyboardInterrupt(interrupted[0])
        differences = differences_from(self.rec.get("baseline_state") or {}, now)
        if differences:
            raise TuneError("the revert between turns did not restore the baseline: "
                            + "; ".join(differences[:5]))

    def switch_to(self, label):
        if label == "after" and not self.tuned:
            self.apply()
        elif label == "before" and self.tuned:
            self.untune()


def side_in_turn(turn):
    """The side of the session in this turn (0, 1, ...): B AA BB AA B ..."""
    return "before" if ((turn + 1) // 2) % 2 == 0 else "after"


#: sessions that measured nothing (the launcher could not start: Open MPI's
#: "PMIx server's listener thread failed to start", once in 9 sessions),
#: measured again in their turn, at most this many in a tune
MAX_RETRIES = 2


def measure_in_turns(rec, turns, system, checks, repeats, folder, say):
    """Sessions of the checks, the sides in turn (side_in_turn), until each
    side has `repeats` sessions (decision.MIN_ROUNDS at least); each run
    report copied beside the record (it stands alone) as <label>-<n>.json,
    and their order kept.  A session that measured nothing is no evidence:
    kept in the record as such, and its turn measured again."""
    wanted = max(repeats, decision.MIN_ROUNDS)
    turn = 0
    while min(len(rec[label].get("sessions", [])) for label in ("before", "after")) < wanted:
        label = side_in_turn(turn)
        side = rec[label].setdefault("sessions", [])
        if len(side) >= wanted:
            turn += 1
            continue
        turns.switch_to(label)
        say(f"netbench tune: measuring {label} the tuning ({len(side) + 1} of {wanted})")
        run_report, code = measure(system, checks, label)
        entry = {"session": run_report.parent.name, "exit_code": code}
        if not decision.launch_values(sessions.load_session(run_report)):
            failed = rec.setdefault("measured_nothing", [])
            failed.append({**entry, "side": label})
            say(f"netbench tune: the {label} session {entry['session']} measured nothing "
                f"(exit {code})" + (": measuring it again" if len(failed) <= MAX_RETRIES else ""))
            if len(failed) > MAX_RETRIES:
                raise TuneError(f"{len(failed)} sessions measured nothing: "
                                + ", ".join(f["session"] for f in failed))
            continue
        turn += 1
        copy = folder / f"{label}-{len(side) + 1}.json"
        copy_run_report(run_report, copy)
        side.append({**entry, "run_report": copy.name})
        rec.setdefault("order", []).append(copy.name)


def copy_run_report(run_report, copy):
    """A session's run report beside the record: the record stands alone."""
    shutil.copyfile(run_report, copy)


def session_diagnoses(side, folder):
    """[{(rule, case): Diagnosis}] of each session of a side, read once."""
    return [{(d.rule, d.case): d for d in
             diagnosis.diagnose(sessions.load_session(Path(folder) / s["run_report"]))}
            for s in side["sessions"]]


def named_by_every(per_session):
    """The diagnoses every session names: one session's noise names nothing."""
    if not per_session:
        return {}
    return {k: d for k, d in per_session[0].items() if all(k in s for s in per_session[1:])}


def with_proposals(diagnoses, data, flavour):
    """The diagnoses as the record keeps them, each with what the profile
    sets against it."""
    return [{**d.as_dict(), "proposal": diagnosis.proposals([d], data, flavour)}
            for d in diagnoses]


def read_json(path):
    try:
        return json.loads(read_bytes(path, "record"))
    except (DataError, ValueError):
        return None


def differences_from(baseline, now):
    """"host: setting: before -> after" for every setting read back that is
    not at its baseline."""
    return [f"{host}: {line}" for host in sorted(set(baseline) | set(now))
            for line in decision.state_differences(baseline.get(host) or {},
                                                   now.get(host) or {})]


def revert(inventory, state_file, rec, profiles, say):
    """revert.yml, then the settings read back against the baseline.  Run
    where Ctrl-C and SIGTERM are deferred (run's finally), so that those
    that come meanwhile are said."""
    say("netbench tune: reverting (a Ctrl-C or SIGTERM now waits until the hosts are "
        "reverted and the record written)")
    entry = rec["revert"] = {"ran": True, "exact": None, "differences": []}
    try:
        playbook(inventory, "revert.yml", "-e", f"tune_record_file={state_file}",
                 detached=True)
        now = read_back(inventory, profiles, detached=True)
    except Exception as err:            # recorded: the record must still be written
        entry["error"] = failure_entry(err)["message"]
        entry["exact"] = False
        return
    baseline = rec.get("baseline_state") or {}
    entry["differences"] = differences_from(baseline, now)
    entry["exact"] = bool(baseline) and not entry["differences"]
    entry["state"] = now


def summary(rec):
    """The outcome in a line or a few: kept or reverted, and why."""
    lines = []
    if rec.get("failure"):
        lines.append(f"netbench tune: {rec['failure']['stage']}: {rec['failure']['message']}")
    if rec.get("decision"):
        d = rec["decision"]
        verb = "kept" if d["kept"] else "reverted"
        # the words name cases from the records: through printable
        lines.append(f"netbench tune: {rec['profile']} {verb}: {printable(reasons.of_verdict(d))}")
    revert = rec.get("revert")
    if revert:
        if revert.get("exact"):
            lines.append("netbench tune: reverted exactly: every setting read back equals "
                         "its baseline")
        else:
            lines.append("netbench tune: the revert did not restore the baseline: "
                         + "; ".join(revert.get("differences", [])[:10] or
                                     [revert.get("error", "no baseline was read")]))
    return "\n".join(lines)
