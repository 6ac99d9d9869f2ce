"""NetPIPE's output file (`-o`): one line per message size, `bytes Mbps
seconds`, where NetPIPE's Mbps is bits / (s x 2^20) and seconds is the
one-way time of its fastest trial."""

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
