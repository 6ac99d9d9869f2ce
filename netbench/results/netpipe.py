"""NetPIPE's output file (`-o`): one line per message size, `bytes Mbps
seconds`, where NetPIPE's Mbps is bits / (s x 2^20) and seconds is the
one-way time of its fastest trial; and what a reader of it needs to know
of NetPIPE: its binaries per MPI family and where its latency figure is
read (the OSU/IMB check's NetPIPE cases and tools/netpipe.py alike)."""

#: Debian's NetPIPE binary built against each MPI family
NETPIPE_MPI = {"mpich": "NPmpich2", "openmpi": "NPopenmpi"}
#: latency: messages under 64 bytes (seed 000)
SMALL = 64

#: NetPIPE Mbps -> 10^6 bit/s
MIBIT = 1.048576


def parse_netpipe(text):
    """[(bytes, Mbit/s in 10^6, one-way seconds)] from NetPIPE's -o file."""
    points = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            points.append((int(parts[0]), float(parts[1]) * MIBIT, float(parts[2])))
    return points
