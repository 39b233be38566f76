"""What /proc says of a server process and its children (varnishd's
worker is its manager's child), for the benchmark scripts beside this
file: resident anonymous memory, open descriptors and CPU time."""

import os


def family(pid):
    """pid and its children."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [pid] + [int(c) for c in f.read().split()]
    except OSError:
        return [pid]


def rss_anon(pid):
    """Resident anonymous KiB of pid and its children."""
    total = 0
    for p in family(pid):
        with open(f"/proc/{p}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1])
    return total


def descriptors(pid):
    """Open descriptors of pid and its children."""
    return sum(len(os.listdir(f"/proc/{p}/fd")) for p in family(pid))


def cpu_seconds(pids):
    """User + system CPU seconds spent by the given processes."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in pids:
        fields = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick
