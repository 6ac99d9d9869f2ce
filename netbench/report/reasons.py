"""A decision's reason in words, from its code and numbers
(netbench.judgement.model.Decision): the only place that turns a verdict's
reason into English.  The record keeps the code and numbers; the words are
for the page and the terminal."""

import math


def _g(x):
    return "n/a" if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:.4g}"


def _bound(n):
    side = "at most" if n.get("side") == "upper" else "at least"
    change = n.get("min_change") or 0
    extra = f" (+{100 * change:.0f} % that counts)" if change else ""
    return f"{side} {_g(n.get('bound'))}{extra}"


def _figure(n):
    return f"{_g(n.get('value'))} ({_g(n.get('lo'))}-{_g(n.get('hi'))})"


def node_name(d):
    return f"on {d['node']}" if d.get("node") else "between ranks 0 and 1"


def _waited(d):
    """Whose wait for a CPU a node's reading is (judgement.conditions)."""
    if d.get("reading") == "rank_wait":
        return "a rank itself waited for a CPU"
    return "work waited for a CPU"


def condition_words(d):
    """One difference of the host's conditions (judgement.conditions)."""
    code = d.get("code")
    if code == "cores_short":
        return (f"a rank could not have a core of its own {node_name(d)} ({_waited(d)} "
                f"{_g(d['now'])} % of the launch; {_g(d['then'])} % for the reference)")
    if code == "cpu_pressure":
        return (f"{_waited(d)} {_g(d['now'])} % of the launch {node_name(d)}, "
                f"{_g(d['now'] - d['then'])} points more than for the reference")
    if code == "time_sliced":
        return (f"ranks 0 and 1 took {_g(d['now'] / 1e6)} ms to pass a cache line: they "
                f"took turns on a CPU")
    if code == "core_mode":
        return (f"the cores passed a cache line in {_g(d['now'])} ns, "
                f"{_g(d['now'] / d['then'])}x slower than for the reference")
    return str(code)


def conditions_words(found):
    return "; ".join(condition_words(d) for d in found or [])


def _within(n):
    return f"{_figure(n)} is {_bound(n)}"


def _beyond(n):
    return (f"all {n['launches']} launches beyond the bound ({_bound(n)}): best "
            f"{_figure(n)}")


def _beyond_conditions(n):
    return (f"{_beyond(n)}; the host differed from the reference "
            f"({conditions_words(n.get('conditions'))}), but a miss of {_g(n['ratio'])}x is "
            f"more than it explains ({_g(n['explains'])}x)")


def _conditions_differ(n):
    return (f"{_beyond(n)}, but the host differed from the reference: "
            f"{conditions_words(n.get('conditions'))}; a CPU-bound miss of {_g(n['ratio'])}x "
            f"cannot be told from that")


def _straddles(n):
    return f"after {n['launches']} launch(es) the interval {_figure(n)} straddles {_bound(n)}"


def _too_noisy(n):
    text = (f"too noisy to tell after {n['launches']} launches: best {_figure(n)} against "
            f"{_bound(n)}; launches ranged {_g(n.get('spread'))}x")
    if n.get("conditions"):
        text += f"; {conditions_words(n['conditions'])}"
    return text


def _job_stopped(n):
    return (f"{render(n.get('was'), n)}; the job launched no more (its time limit was near, "
            f"or the re-measurement could not read its launches: see the job's stderr)")


def _sizes(named):
    return ", ".join(f"{size_words(s['bytes'])} ({_g(s['value'] / s['upper'])}x: "
                     f"{_g(s['value'])} us, band up to {_g(s['upper'])})" for s in named)


def _curve_notes(n):
    notes = []
    if n.get("aside"):
        notes.append(f"beyond alone, fewer than {n['min_span']} neighbouring sizes, not "
                     f"counted: {', '.join(size_words(b) for b in n['aside'])}")
    if n.get("missing"):
        notes.append("not judged, missing from the run (the baseline holds sizes it never "
                     "sent): " + ", ".join(size_words(b) for b in n["missing"]))
    if n.get("conditions"):
        notes.append(f"the host differed from the baseline's runs: "
                     f"{conditions_words(n['conditions'])}")
    return "".join(f"; {note}" for note in notes)


def _curve(code):
    def words(n):
        source = n.get("source", "the baseline")
        if code == "curve_beyond":
            text = f"slower than the baseline ({source}) in every launch at {_sizes(n['named'])}"
        elif code == "curve_within":
            text = f"within the baseline's band ({source}) at the sizes that decide"
        elif code == "curve_unmeasured":
            text = f"no size of the baseline ({source}) was measured"
        else:
            what = "undecided" if code == "curve_undecided" else "too noisy to tell"
            text = (f"{what} against the baseline ({source}) at "
                    f"{', '.join(size_words(s['bytes']) for s in n['named'])}")
        return text + _curve_notes(n)
    return words


CURVE_CODES = ("curve_beyond", "curve_within", "curve_inconclusive", "curve_undecided",
               "curve_unmeasured")


#: the layers below the MPI as the report names them (judgement.layers)
LAYER_NAMES = {"verbs": "verbs", "tcp": "raw TCP"}


def _percent(share):
    """A share in percent, never rounded up to a whole 100."""
    shown = f"{100 * share:.0f}"
    return shown if shown != "100" or share >= 1 else f"{100 * share:.1f}"


def layer_words(a):
    """Where the loss is, from a judgement.layers.Attribution (its dict):
    "verbs at 0.98 of line rate; MPI 38 % below verbs at 256 KiB to 4 MiB
    (closest at 1 MiB: ... against ... Mbit/s)"; a record written before
    the closest size was kept gives each layer's best."""
    label = LAYER_NAMES.get(a["layer"], a["layer"])
    if a.get("layer_of_line_rate") is None:
        peak = a.get("layer_peak_mbps") or a["layer_mbps"]
        state = f"{label} at {peak:.0f} Mbit/s (no line rate known)"
    else:
        state = f"{label} at {a['layer_of_line_rate']:.2f} of line rate"
    if a["code"] == "layer_short_of_line_rate":
        return f"{state}: the loss is beneath the MPI"
    sizes = [b for b in (a.get("from_bytes"), a.get("to_bytes")) if b is not None]
    where = ("at their peaks" if not sizes else f"at {size_words(sizes[0])}"
             if sizes[0] == sizes[-1] else
             f"at {size_words(sizes[0])} to {size_words(sizes[-1])}")
    closest = (f"closest at {size_words(a['closest_bytes'])}:" if a.get("closest_bytes")
               else "best")
    return (f"{state}; MPI {_percent(a['loss'])} % below {label} {where} "
            f"({closest} {a['mpi_mbps']:.0f} against {a['layer_mbps']:.0f} Mbit/s)")


def _paired(n):
    return (f"median {_g(n['median'])} ({_g(n['lo'])}-{_g(n['hi'])}) over {n['rounds']} "
            f"rounds")


def readable(value, unit):
    """A figure as a person reads it: 3 significant digits, bandwidth in
    Gbit/s from 1000 Mbit/s up, sizes in KiB and MiB."""
    if value is None:
        return ""
    if unit == "Mbit/s" and abs(value) >= 1000:
        value, unit = value / 1000, "Gbit/s"
    elif unit == "B":
        for factor, name in ((1 << 20, "MiB"), (1 << 10, "KiB")):
            if abs(value) >= factor:
                value, unit = value / factor, name
                break
    return f"{value:.3g} {unit}"


def size_words(nbytes):
    """8 B, 64 KiB, 1 MiB: a message size as the report names it."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{int(nbytes // scale)} {unit}"
    return f"{nbytes:g} B"


def _change(e):
    return "" if e.get("pct") is None else f" ({e['pct']:+.1f} %)"


def named_changes(found):
    """Every change of a tuning's evidence (tuning.decision.Evidence's
    JSON) named, grouped by case and figure: "peak_bw (-17.8 %), usec at
    512 B (+620.0 %), 16 KiB (+452.2 %)"; the case first when there are
    several."""
    groups = {}
    for e in found or []:
        groups.setdefault((e["case"], e["figure"]), []).append(e)
    cases = {case for case, _ in groups}
    texts = []
    for (case, figure), changes in groups.items():
        where = f"{case}: " if len(cases) > 1 else ""
        sized = [e for e in changes if e.get("bytes") is not None]
        texts.extend(where + figure + _change(e) for e in changes if e.get("bytes") is None)
        if sized:
            texts.append(where + f"{figure} at " + ", ".join(
                size_words(e["bytes"]) + _change(e) for e in sized))
    return "; ".join(texts)


def _tune_core(code, n):
    if code == "tune_not_measured":
        return "no case was measured both before and after the tuning"
    if code == "tune_worse":
        text = f"worse beyond the noise: {named_changes(n['worse'])}"
        if n.get("improved"):
            text += f"; better beyond it: {named_changes(n['improved'])}"
        return text
    if code == "tune_better":
        return f"better beyond the noise: {named_changes(n['improved'])}; nothing worse"
    if code == "tune_few_rounds":
        return (f"{n['rounds']} round(s) of a session before beside one after, fewer than the "
                f"{n['min_rounds']} a change is called on")
    if code == "tune_too_noisy":
        return (f"too noisy to tell: at {n['straddling']} of {n['judged']} sizes the rounds' "
                f"median ratio straddles {_g(n['limit'])} either way, and no curve changed "
                f"beyond it over {n['min_span']} neighbouring sizes")
    return (f"no figure changed beyond the noise: every size's rounds within "
            f"{_g(n['limit'])}x either way")


def _tune(code):
    def words(n):
        text = _tune_core(code, n)
        if n.get("isolated"):
            text += (f"; beyond the noise at fewer than {n['min_span']} neighbouring sizes, "
                     f"not counted: {named_changes(n['isolated'])}")
        if n.get("retested"):
            text += _retested(code, n)
        if n.get("overridden"):
            text = f"kept by --keep, although the measurement says revert: {text}"
        return text
    return words


def _retested(code, n):
    """What measuring again (tuning.decision.retest_wanted) made of the
    first rounds' loss."""
    first = n["retested"]
    called = (f"the first {first['rounds']} rounds called "
              f"{named_changes(first['worse'])} worse")
    if code == "tune_worse":
        return f"; measured again, as {called}: the loss held over all {n['rounds']} rounds"
    return f"; measured again, as {called}: all {n['rounds']} rounds together did not confirm it"


TUNE_CODES = ("tune_worse", "tune_better", "tune_no_change", "tune_too_noisy",
              "tune_few_rounds", "tune_not_measured")


RENDER = {
    "within": _within,
    "beyond": _beyond,
    "beyond_conditions": _beyond_conditions,
    "conditions_differ": _conditions_differ,
    "straddles": _straddles,
    "too_noisy": _too_noisy,
    "job_stopped": _job_stopped,
    "no_launch": lambda n: "no launch gave the figure",
    "no_round": lambda n: "no round finished on both sides",
    "paired_within": lambda n: f"{_paired(n)} is at most {_g(n['limit'])}",
    "paired_beyond": lambda n: f"{_paired(n)}: beyond {_g(n['limit'])}",
    "paired_straddles": lambda n: f"{_paired(n)} straddles {_g(n['limit'])}",
    "paired_too_noisy": lambda n: f"too noisy to tell: {_paired(n)} straddles "
                                  f"{_g(n['limit'])}",
    **{code: _tune(code) for code in TUNE_CODES},
    **{code: _curve(code) for code in CURVE_CODES},
}


def render(code, numbers):
    """The words of a reason code with its numbers; the code itself when
    unknown (a newer netbench's record)."""
    how = RENDER.get(code)
    if how is None:
        return f"{code}"
    try:
        return how(numbers or {})
    except (KeyError, TypeError, ZeroDivisionError):
        return f"{code} {numbers}"


def of_verdict(entry):
    """A record's verdict entry in words: its reason as written by an older
    netbench, else its code rendered."""
    if entry.get("code") in RENDER:
        return render(entry["code"], entry.get("numbers"))
    return entry.get("reason") or entry.get("code") or ""
