"""Four cases of one check: the first (index 0) ends at once, the others
sleep `-S sleep=N` seconds first, so that a test can stop the session
while the second runs, with two never started (tests/data/interrupted/
README.md)."""

import reframe as rfm
import reframe.utility.sanity as sn


@rfm.simple_test
class OneQuickCase(rfm.RunOnlyRegressionTest):
    valid_systems = ["*"]
    valid_prog_environs = ["*"]
    index = parameter(range(4))
    sleep = variable(int, value=120)
    executable = "sh"

    @run_before("run")
    def set_script(self):
        pause = 0 if self.index == 0 else self.sleep
        self.executable_opts = ["-c", f"'sleep {pause}; echo done'"]

    @sanity_function
    def printed(self):
        return sn.assert_found(r"done", self.stdout)
