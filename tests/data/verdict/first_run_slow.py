"""A check whose first run is 100x slower than its reference and whose
retry is not: the marker file says which run it is (tests/data/verdict/
README.md).  `-S sleep=N` makes each run take N seconds first, for a test
that interrupts a running session."""

import shlex

import reframe as rfm
import reframe.utility.sanity as sn


@rfm.simple_test
class FirstRunSlow(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    marker = variable(str, value="/tmp/netbench-retried-marker")
    sleep = variable(int, value=0)
    executable = "sh"
    reference = {"*": {"elapsed": (1.0, None, 9.0, "s")}}

    @run_before("run")
    def set_script(self):
        self.executable_opts = ["-c", shlex.quote(
            f"sleep {self.sleep}; if [ -e {self.marker} ]; then echo 'elapsed 1'; "
            f"else : > {self.marker}; echo 'elapsed 100'; fi")]

    @sanity_function
    def printed(self):
        return sn.assert_found(r"elapsed", self.stdout)

    @performance_function("s")
    def elapsed(self):
        return sn.extractsingle(r"elapsed (\S+)", self.stdout, 1, float)
