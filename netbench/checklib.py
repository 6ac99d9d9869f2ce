"""The checks' building blocks under their former name: netbench.checks
holds them (one module per concern); this re-export keeps
`from netbench import checklib` working for check files written against it."""

from .checks import *  # noqa: F401,F403
from .checks import __all__  # noqa: F401
