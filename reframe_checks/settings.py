"""ReFrame configuration for netbench: a local system recognised on any
host, one programming environment per discovered MPI.

Loaded through RFM_CONFIG_FILES, which `.venv/bin/activate` exports.
"""

import os
import sys

# the checks and this file import netbench; make it importable even from a
# plain checkout (the venv installs it in editable mode)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from netbench.datafiles import DataError  # noqa: E402
from netbench.rfmconfig import site_configuration as _generate  # noqa: E402

try:
    site_configuration = _generate()
except DataError as _err:
    # one line naming the file and key, not a traceback of the loader
    sys.exit(f"netbench: {_err}")
