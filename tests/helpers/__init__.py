"""Helpers shared by several test modules that are not pytest fixtures
(those are in conftest.py): one module per subject.  A test module imports
from here, never from another test module (test_suite_layout.py).

- vcluster: a test's own virtual cluster, the netbench CLI, ssh into a node
- suite:    ReFrame sessions as a user starts them; cases and figures of a run report
- reports:  small run reports and sessions as the page reads them
- browser:  headless Chromium
- launches: real launches: a rank's PID, each MPI's transport between nodes
- tune:     the tuning playbooks on a virtual cluster, a node's and the host's settings
"""
