"""netbench's glue to ReFrame: everything a ReFrame session of netbench
needs that is not a check.

- config:     the site configuration dictionary (pure: reads files, probes
              the MPIs, changes nothing)
- sites:      real clusters as ReFrame systems, from reframe_checks/sites/
- container:  the netbench image as the checks run it (runtime, run flags)
- logs:       ReFrame's logging and working folders below the repository
- launchers:  the `netbench-*` job launchers the partitions name
- launch:     the program those launchers run (`python -m netbench.rfm.launch`)
- patches:    the four wraps of ReFrame internals, each with its reason,
              for the pinned ReFrame release (patches.REFRAME_VERSION)
- slurm:      SLURM_CONF for ReFrame's own Slurm commands
- session:    a ReFrame session of netbench run from Python (tests, tools)

reframe_checks/settings.py calls each step by name.  The modules are
imported one by one; nothing is re-exported here, so importing one does
not import ReFrame or the others.
"""
