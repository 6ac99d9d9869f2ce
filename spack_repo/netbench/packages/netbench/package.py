# netbench's benchmark (reframe_checks/src/netbench.c): MPI ping-pong,
# Sendrecv/Exchange/Bcast chains and a raw TCP mode in one program.  It is
# built from the checkout that holds spack.yaml (its `develop:` entry), so
# the package names no download.

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class Netbench(Package):
    """netbench: MPI and TCP latency/bandwidth sweeps with adaptive
    repetitions, the benchmark of netbench's ReFrame checks."""

    version("main")

    depends_on("c", type="build")
    depends_on("mpi")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        mpicc = Executable(spec["mpi"].mpicc)
        # the recipe of netbench/data/benchmark.yaml (flags, source, name), which
        # tests/test_benchmark_recipe.py holds this command to
        mpicc("-O2", "-o", join_path(prefix.bin, "netbench"),
              join_path("reframe_checks", "src", "netbench.c"), "-lm", "-lpthread")
