"""The layers below the MPI, measured beside it in the same job (issue #34,
"the layers side by side"; reframe_checks/mpi_vs_tcp.py): the verbs layer's
launch (netbench.probe.verbspair, on the job's nodes), its outcome, and the record's
`layers`: each layer's figures, parsed once, why a layer did not run, where
the loss is (netbench.judgement.layers) and the MPI's transport settings."""

from ..judgement import layers as judged_layers
from ..probe import verbspair
from ..results import perftest

#: the size the layers' figures are given at beside their peaks
AT_BYTES = 1 << 20


def verbs_launch(launch_prefix, python, output):
    """The verbs layer's launch: netbench.probe.verbspair on the job's
    ranks 0 and 1, through the job's own launcher, so it reads the devices
    of the nodes the MPI ran on; its meeting folder beside `output`."""
    return (f"{launch_prefix} {python} -m netbench.probe.verbspair --output {output} "
            f"--meeting {output}.meeting > {output}.launch 2>&1")


def layer_figures(rates):
    """A layer's figures for the record from {bytes: Mbit/s}."""
    if not rates:
        return {}
    peak_bytes = max(rates, key=rates.get)
    below = [b for b in rates if b <= AT_BYTES]
    at = max(below) if below else min(rates)
    return {"peak_mbps": rates[peak_bytes], "peak_bytes": peak_bytes,
            "at_bytes": at, "at_mbps": rates[at]}


def verbs_outcome(text, where):
    """(the verbs layer's rows, None) from verbspair's output, or (None,
    why it did not run): the reason it gave, or perftest's missing table
    naming `where`."""
    reason = verbspair.not_run_reason(text)
    if reason:
        return None, reason
    try:
        return perftest.parse(text).rows, None
    except perftest.ParseError as err:
        return None, f"perftest gave no table: {where}: {err}"


def layers_record(curves, not_run, line_rate_mbps, mpi_env, added_env):
    """The record's `layers`: `curves` {layer: the rows of its first
    launch} with the MPI's under "mpi"; `not_run` {layer: why}."""
    measured = {name: judged_layers.layer_of_rows(name, rows) for name, rows in curves.items()}
    found = judged_layers.attribute({n: layer for n, layer in measured.items() if layer.rates},
                                    line_rate_mbps)
    return {"figures": {name: layer_figures(layer.rates) for name, layer in measured.items()},
            "not_run": dict(not_run),
            "attributions": [a.as_dict() for a in found],
            "mpi_env": {k: str(v) for k, v in mpi_env.items()},
            "added_env": {k: str(v) for k, v in added_env.items()}}
