# NetPIPE has no package in Spack's builtin repository.  The source is the
# Debian archive's copy of the 3.7.2 release (the version seed 000's study
# and Debian's netpipe-* packages use), checked against the SHA-256 in
# Debian's signed netpipe_3.7.2-8.dsc.

from spack_repo.builtin.build_systems.makefile import MakefilePackage

from spack.package import *


class Netpipe(MakefilePackage):
    """NetPIPE: ping-pong latency and bandwidth over a doubling message-size
    sweep with perturbations, for MPI (NPmpi) and raw TCP (NPtcp)."""

    homepage = "https://netpipe.cs.ksu.edu/"
    url = "https://deb.debian.org/debian/pool/main/n/netpipe/netpipe_3.7.2.orig.tar.gz"

    license("GPL-2.0-or-later")

    version("3.7.2", sha256="13dac884ff52951636f651c421f5ff4a853218a95aa28a4a852402ee385a2ab8")

    variant("mpi", default=True, description="Build NPmpi against the MPI of the spec")

    depends_on("c", type="build")
    depends_on("mpi", when="+mpi")

    def build(self, spec, prefix):
        # the makefile's targets each build one tool; CC and MPICC are
        # plain make variables
        make("tcp", f"CC={spack_cc}")
        if spec.satisfies("+mpi"):
            make("mpi", f"MPICC={spec['mpi'].mpicc}")

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install("NPtcp", prefix.bin)
        if spec.satisfies("+mpi"):
            install("NPmpi", prefix.bin)
        mkdirp(prefix.share.man.man1)
        install("dox/netpipe.1", prefix.share.man.man1)
