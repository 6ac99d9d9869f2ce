"""netbench: a reproducible benchmark environment for HPC interconnects."""

__version__ = "0.1.0"
