# perftest (linux-rdma/perftest: ib_write_bw, ib_send_lat, ...) has no
# package in Spack's builtin repository at the commit spack.yaml pins.  The
# source is the Debian archive's copy of the 4.5-0.17 release (bookworm's
# perftest 4.5+0.17-1), checked against the SHA-256 the archive's signed
# Sources index gives for perftest_4.5+0.17.orig.tar.gz.

from spack_repo.builtin.build_systems.autotools import AutotoolsPackage

from spack.package import *


class Perftest(AutotoolsPackage):
    """perftest: RDMA verbs bandwidth and latency tests (ib_write_bw,
    ib_send_lat, ...), the layer beneath the MPI that netbench's MpiVsTcp
    check runs beside it where an RDMA device is found."""

    homepage = "https://github.com/linux-rdma/perftest"

    license("GPL-2.0-only OR BSD-2-Clause")

    version("4.5-0.17",
            sha256="86fc75af293a75ac7e15fed7cc5adf628e660d8992835c0ac8b91d500b63aa5f",
            url="https://deb.debian.org/debian/pool/main/p/perftest/perftest_4.5+0.17.orig.tar.gz")

    depends_on("c", type="build")
    # the archive's tarball is regenerated the way Debian builds it (dh's autoreconf)
    depends_on("autoconf", type="build")
    depends_on("automake", type="build")
    depends_on("libtool", type="build")
    depends_on("rdma-core")
    depends_on("pciutils")

    force_autoreconf = True

    # The server must listen only on the address its client dials, not on
    # every interface.  In 4.5-0.17 `--source_ip` cannot say so: two long
    # options share that name and getopt_long takes the first, raw
    # Ethernet's client address.  Upstream renamed the connection one to
    # --bind_source_ip (linux-rdma/perftest 8ff29c1, released in
    # 23.07.0-0.27); this is that rename, checked to apply to the v4.5-0.17
    # tag's src/perftest_parameters.c.
    patch("bind_source_ip.patch", when="@4.5-0.17")
