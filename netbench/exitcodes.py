"""netbench's exit codes: one meaning each, whichever `netbench` command
ran, and for a ReFrame session of netbench's checks (whose codes
netbench.report.verdict.exit_code refines from ReFrame's 0 and 1).

The codes answer one question the same way everywhere: did the command
get an answer, and was it yes?  0 yes, 1 no, 2 no answer (the input, or
the run, did not allow one), 3 no clear answer.  `netbench --help`, the
command-line reference (python -m netbench.tools.clidoc) and the report's
docs read the table below; nothing else writes the numbers.
"""

import collections
import textwrap

Code = collections.namedtuple("Code", "value name meaning")

OK = 0
LOSS = 1
INVALID_INPUT = 2
#: a session whose failed cases did not run to the end gives no answer
#: either, as invalid input does: the same code
NOT_RUN = INVALID_INPUT
INCONCLUSIVE = 3
#: Ctrl-C: the shell's code for a process ended by SIGINT (128 + 2); SIGTERM
#: (`kill`, a batch system's time limit) stops a command the same way and
#: gives the same code: one meaning, interrupted, whichever signal (not
#: 143, which would tell the two apart where nothing differs)
INTERRUPTED = 130

CODES = (
    Code(OK, "ok", "done, and the answer is yes: every case of a session passed, a "
                   "validator found nothing wrong, `tune` kept its tuning"),
    Code(LOSS, "loss", "done, and the answer is no: a session showed a loss (a case "
                       "failed on its judged figures: a threshold, a baseline, a sweep's "
                       "suspects, container parity), `compare` found a figure worse beyond "
                       "the noise, `tune` reverted a tuning that did not help, `discover` "
                       "found no MPI, `resume` left a node drained that failed its "
                       "re-test"),
    Code(INVALID_INPUT, "no answer", "invalid input: a bad argument, or a data file, path or "
                                     "record that does not validate, named in one line "
                                     "with its field (nothing already written is lost); "
                                     "a session whose failed cases did not run to the end "
                                     "(setup, launch, a rank died); a `tune` step that "
                                     "failed (then reverted); a `vcluster` action refused; "
                                     "a session that ran no case (a selection matching "
                                     "nothing, an unknown --system); `drain` of a report "
                                     "naming hosts the cluster does not have, or a Slurm "
                                     "command that failed; the results database "
                                     "locked for longer than netbench waits"),
    Code(INCONCLUSIVE, "inconclusive", "no failure, but a case of the session is "
                                       "inconclusive: the host was too noisy to tell; "
                                       "`compare`: A and B have no figure in common; "
                                       "`resume` left a node drained whose re-test was "
                                       "inconclusive"),
    Code(INTERRUPTED, "interrupted", "Ctrl-C or SIGTERM: what had started is rolled back "
                                     "or finished first (`vcluster up` rolls back, `tune` "
                                     "reverts), and one line says so; a session's summary, "
                                     "page and JUnit open on \"Interrupted: N of M cases "
                                     "ran\""),
)


def table_lines():
    """The codes as `netbench --help` lists them, one a line."""
    return [textwrap.fill(f"{c.value:<4} {c.name}: {c.meaning}", width=79,
                          initial_indent="  ", subsequent_indent=" " * 7) for c in CODES]
