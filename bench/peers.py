"""Interleaved runs for bench/peers.sh: prints the Markdown table.

Arguments are NAME=COMMAND pairs (split on spaces; paths have none);
the environment carries the run counts and the facts the table states
(PEERS_*). Wall times come from perf_counter around each process, max RSS
from GNU time's %M in separate rounds (the time process would otherwise
sit inside the wall clock).
"""

import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RUNS = int(os.environ.get("PEERS_RUNS", "15"))
RSS_RUNS = int(os.environ.get("PEERS_RSS_RUNS", "5"))
WARMUP = 3


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


class LoadSampler(threading.Thread):
    """Samples the 1-minute load average every half second."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = [load1()]
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(0.5):
            self.samples.append(load1())


def wall_ms(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def rss_kib(cmd, out):
    subprocess.run(["/usr/bin/time", "-o", out, "-f", "%M"] + cmd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return int(f.read().split()[-1])


def main():
    cmds = {}
    for arg in sys.argv[1:]:
        name, _, cmd = arg.partition("=")
        cmds[name] = cmd.split()
    names = list(cmds)
    rng = random.Random(17)
    sampler = LoadSampler()
    sampler.start()
    for _ in range(WARMUP):
        for n in names:
            wall_ms(cmds[n])
    walls = {n: [] for n in names}
    for _ in range(RUNS):
        order = names[:]
        rng.shuffle(order)
        for n in order:
            walls[n].append(wall_ms(cmds[n]))
    rss = {n: [] for n in names}
    with tempfile.NamedTemporaryFile() as tf:
        for _ in range(RSS_RUNS):
            order = names[:]
            rng.shuffle(order)
            for n in order:
                rss[n].append(rss_kib(cmds[n], tf.name))
    sampler.stop.set()
    sampler.join()
    med = {n: statistics.median(walls[n]) for n in names}
    mrss = {n: statistics.median(rss[n]) / 1024 for n in names}
    print_table(cmds, med, mrss, sampler.samples)


def fmt_ms(v):
    return "%.1f ms" % v


def fmt_mib(v):
    return "%.1f MiB" % v


def print_table(cmds, med, mrss, loads):
    env = os.environ
    nfd = env.get("PEERS_NFD_VERSION", "nfd").replace("nfd-", "NFD ")
    vhv = "libvirt-clients " + env.get("PEERS_VHV_VERSION", "?")
    all_json = int(env.get("PEERS_ALL_JSON", "0") or 0)
    n_large = int(env.get("PEERS_NPCI_LARGE", "0"))
    n_base = int(env.get("PEERS_NPCI_BASE", "0"))
    rows = []

    def pair(pid, what, b, p, peer, goal_wall, goal_rss=None):
        rw = med[b] / med[p]
        rr = mrss[b] / mrss[p]
        met = rw <= goal_wall and (goal_rss is None or rr <= goal_rss)
        goal = "<= %.2gx wall" % goal_wall
        if goal_rss is not None:
            goal += ", <= %.2gx RSS" % goal_rss
        rows.append((pid, what, "%s, %s" % (fmt_ms(med[b]), fmt_mib(mrss[b])),
                     "%s: %s, %s" % (peer, fmt_ms(med[p]), fmt_mib(mrss[p])),
                     "%.2fx wall, %.2fx RSS" % (rw, rr), goal, "yes" if met else "NO"))

    pair("P0", "`berth version`", "version", "hello", "Go hello world", 1.3)
    pair("P1", "`berth facts -o json`", "facts", "nfd", "`nfd export features` (%s)" % nfd, 0.25, 0.6)
    pair("P2", "`berth check --no-probe`", "check", "vhv", "`virt-host-validate qemu` (%s)" % vhv, 0.6, 1.3)
    ra = med["all"] / med["checkjson"]
    ok = ra <= 1.5 and all_json <= 1 << 20 and mrss["all"] <= 25
    rows.append(("P2a", "`berth check --all --no-probe -o json`",
                 "%s, %s, %d KiB of JSON" % (fmt_ms(med["all"]), fmt_mib(mrss["all"]), all_json // 1024),
                 "`berth check --no-probe -o json`: %s, %s" % (fmt_ms(med["checkjson"]), fmt_mib(mrss["checkjson"])),
                 "%.2fx wall" % ra, "<= 1.5x, <= 1 MiB, <= 25 MiB", "yes" if ok else "NO"))
    per = (med["large"] - med["base"]) * 1000 / max(1, n_large - n_base)
    ok = per <= 15 and med["large"] < 100
    rows.append(("P2b", "`berth facts --root` large host, %d PCI functions" % n_large,
                 "%s, %s" % (fmt_ms(med["large"]), fmt_mib(mrss["large"])),
                 "base host, %d functions: %s, %s" % (n_base, fmt_ms(med["base"]), fmt_mib(mrss["base"])),
                 "%.1f us per function" % per, "<= 15 us, < 100 ms", "yes" if ok else "NO"))
    kvm = env.get("PEERS_KVM", "no") == "yes"
    pargs = env.get("PEERS_PROBE_ARGS", "")
    rows.append(("P3", "`berth check%s` (QEMU probe%s)" % ((" " + pargs) if pargs else "", "" if kvm else "; no usable /dev/kvm"),
                 "%s, %s" % (fmt_ms(med["probe"]), fmt_mib(mrss["probe"])), "", "",
                 "<= 150 ms", ("yes" if med["probe"] <= 150 else "NO") if kvm else "n/a"))
    rows.append(("", "`berth runtimeclasses --help` (runs berth-cluster)",
                 "%s, %s" % (fmt_ms(med["delegated"]), fmt_mib(mrss["delegated"])),
                 "`berth-cluster runtimeclasses --help`: %s, %s" % (fmt_ms(med["direct"]), fmt_mib(mrss["direct"])),
                 "+%.1f ms" % (med["delegated"] - med["direct"]), "measured", ""))
    print("| id | berth | median, max RSS | peer: median, max RSS | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print()
    print("%d interleaved rounds (RSS: %d more), %s; 1-minute load average %.2f-%.2f during the run, %d cores."
          % (RUNS, RSS_RUNS, time.strftime("%Y-%m-%d"), min(loads), max(loads), os.cpu_count()))


if __name__ == "__main__":
    main()
