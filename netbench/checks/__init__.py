"""Building blocks of netbench's ReFrame checks (in the spirit of
hpctestlib's OSU library: a build fixture per environment, run-only tests
parameterized on top of it).

  config.py        what the loaded configuration offers (environments,
                   transports, placements); require_netbench_config
  base.py          MpiJob: the MPI, the transport, the ranks' placement
  category.py      Categorized: one declared category per check, from
                   data/check_categories.yaml: thresholds' kind, report
                   section and benchmark mode
  slurm.py         JobOutcome: the Slurm guard, every rank finished
  links.py         LinkCounters: traffic seen crossing the links
  judging.py       Judging: references of the interconnect class
  recording.py     Recording: the case's record for the report
  mpirun.py        MpiRun, all of the above, and their hooks' order
  launches.py      Launches: a run's launches parsed once, the first that
                   started, and its figures as sanity expressions
  datapath.py      LibraryPath: the path each launch's MPI library said it
                   took, recorded and judged (every MPI-launching check)
  netbench_run.py  netbench's own benchmark: NetbenchBuild, NetbenchRun,
                   PingPongBase, ThroughputBase
"""

from .base import ANY_NETWORK, KiB, MiB, PLACEMENTS, RAW_TCP, MpiJob
from .category import Categorized
from .datapath import LibraryPath
from .config import (LOAD_HINT, configured_environments, configured_placements,
                     configured_transports, max_nodes, max_ranks, require_netbench_config,
                     throughput_transports)
from .judging import INTRANODE_CLASS, Judging
from .links import LinkCounters
from .mpirun import MpiRun
from .launches import Launches, launch_summary, launch_value
from .netbench_run import NetbenchBuild, NetbenchRun, PingPongBase, ThroughputBase
from .recording import Recording
from .slurm import SLURM_CANCELLED, SRUN_ERRORS, JobOutcome, job_failure, slurm_failure

__all__ = [
    "ANY_NETWORK", "Categorized", "INTRANODE_CLASS", "KiB", "LOAD_HINT", "MiB", "PLACEMENTS", "RAW_TCP",
    "SLURM_CANCELLED", "SRUN_ERRORS", "JobOutcome", "Judging", "LinkCounters", "MpiJob",
    "Launches", "LibraryPath", "MpiRun", "NetbenchBuild", "NetbenchRun", "PingPongBase", "Recording", "ThroughputBase",
    "configured_environments", "configured_placements", "configured_transports",
    "job_failure", "max_nodes", "max_ranks", "require_netbench_config", "slurm_failure",
    "launch_summary", "launch_value", "throughput_transports",
]
