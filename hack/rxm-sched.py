#!/usr/bin/env python3
"""rxm-sched.py: one pair's scheduling, from `perf sched timehist` output.

Usage: rxm-sched.py TIMEHIST RECV-COMM SEND-COMM MESSAGES

TIMEHIST is the text of `perf sched timehist` over a system-wide
`perf sched record`; RECV-COMM and SEND-COMM are the receiving and the
sending process's command names (hack/rxm-sched.sh gives each a name of its
own). The window is the sending process's life in the trace. For each of the
two processes it prints one line: CPU (run time) per message, switches and
migrations per message, time runnable but not running (scheduling delay) per
message with what ran on its CPU meanwhile (its own other threads, the peer
process, anything else), the share of its run time on CPU 0 and its thread
count; then its four busiest threads (tid, run ms, share on CPU 0, runs,
migrations, delay ms, and the three tasks that ran on the thread's CPU
while it waited). A last line gives what else ran in the window, the core
sharing of the two processes (0: each on a core of its own, 1: both in the
same shares on both cores) and the share of the window in which each
process, two of its threads, and both processes at once were running.
"""
import bisect
import collections
import re
import sys

LINE = re.compile(
    r"^\s*([\d.]+)\s+\[(\d+)\]\s+(.+?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def parse(path):
    """Yields (end s, cpu, comm, tid, pid, sch delay s, run s) per switch-out."""
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            t, cpu, comm, tid, pid, _, sch, run = m.groups()
            yield (float(t), int(cpu), comm.strip(), int(tid), int(pid or tid),
                   float(sch) / 1e3, float(run) / 1e3)


def overlap(a0, a1, b0, b1):
    return max(0.0, min(a1, b1) - max(a0, b0))


def union(iv, w0, w1):
    """Time covered by the intervals iv within [w0, w1], time covered twice,
    and the covered pieces."""
    pts = []
    for a, b in iv:
        a, b = max(a, w0), min(b, w1)
        if b > a:
            pts += [(a, 1), (b, -1)]
    pts.sort()
    once = twice = 0.0
    depth, last, pieces = 0, w0, []
    for t, d in pts:
        if depth >= 1:
            once += t - last
            if pieces and pieces[-1][1] >= last:
                pieces[-1][1] = t
            else:
                pieces.append([last, t])
        if depth >= 2:
            twice += t - last
        depth, last = depth + d, t
    return once, twice, pieces


def both(p, q):
    """Time covered by both lists of sorted, disjoint pieces."""
    i = j = 0
    got = 0.0
    while i < len(p) and j < len(q):
        got += overlap(p[i][0], p[i][1], q[j][0], q[j][1])
        if p[i][1] < q[j][1]:
            i += 1
        else:
            j += 1
    return got


def main():
    path, rcomm, scomm, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ev = list(parse(path))
    send = [e for e in ev if e[2] == scomm]
    if not send:
        print("no events of %s" % scomm)
        return
    w0 = min(e[0] - e[6] for e in send)
    w1 = max(e[0] for e in send)
    ev = [e for e in ev if e[0] > w0 and e[0] - e[6] < w1]
    runs_by_cpu = collections.defaultdict(list)  # cpu -> [(start, end, comm, tid)]
    for t, cpu, comm, tid, pid, sch, run in ev:
        runs_by_cpu[cpu].append((t - run, t, comm, tid))
    ends = {}
    for c in runs_by_cpu:
        runs_by_cpu[c].sort()
        ends[c] = [r[1] for r in runs_by_cpu[c]]

    def blame(cpu, a, b, tid):
        """What ran on cpu between a and b, other than thread tid."""
        got = collections.Counter()
        runs = runs_by_cpu[cpu]
        for i in range(bisect.bisect_right(ends[cpu], a), len(runs)):
            s, e, comm, t2 = runs[i]
            if s >= b:
                break
            if t2 != tid:
                got["idle" if comm == "<idle>" else comm] += overlap(s, e, a, b)
        return got

    for comm in (rcomm, scomm):
        mine = [e for e in ev if e[2] == comm]
        threads = collections.defaultdict(list)
        for e in mine:
            threads[e[3]].append(e)
        run = sum(e[6] for e in mine)
        if run == 0:
            print("%s: no run time in the window" % comm)
            continue
        cpu0 = sum(e[6] for e in mine if e[1] == 0)
        sch = sum(e[5] for e in mine)
        mig = 0
        rows = []
        for tid, es in threads.items():
            es.sort()
            m = sum(1 for a, b in zip(es, es[1:]) if a[1] != b[1])
            mig += m
            trun = sum(e[6] for e in es)
            if trun < 0.02 * run:
                continue
            tsch = sum(e[5] for e in es)
            who = collections.Counter()
            for t, cpu, _, _, _, s, r in es:
                if s > 0:
                    who.update(blame(cpu, t - r - s, t - r, tid))
            rows.append((trun, tid, es, m, tsch, who))
        rows.sort(reverse=True)
        peer = scomm if comm == rcomm else rcomm
        split = collections.Counter()
        for r in rows:
            for k, v in r[5].items():
                split["own" if k == comm else "peer" if k == peer else "idle" if k == "idle" else "others"] += v
        print("%-6s CPU %.2f µs/msg, switches %.2f/msg, migrations %.3f/msg, delay %.2f µs/msg "
              "(its CPU meanwhile ran, µs/msg: own threads %.2f, peer %.2f, others %.2f), "
              "on CPU 0 %.0f %%, threads %d" % (
                  comm, run / n * 1e6, len(mine) / n, mig / n, sch / n * 1e6,
                  split["own"] / n * 1e6, split["peer"] / n * 1e6, split["others"] / n * 1e6,
                  100 * cpu0 / run, len(threads)))
        for trun, tid, es, m, tsch, who in rows[:4]:
            c0 = sum(e[6] for e in es if e[1] == 0)
            tw = ", ".join("%s %.1f" % (k, v * 1e3) for k, v in who.most_common(3))
            print("       tid %-7d run %7.1f ms, CPU 0 %3.0f %%, runs %6d, migr %5d, "
                  "delay %6.1f ms (meanwhile on its CPU, ms: %s)" % (
                      tid, trun * 1e3, 100 * c0 / trun, len(es), m, tsch * 1e3, tw or "-"))
    other = collections.Counter()
    for t, cpu, comm, tid, pid, sch, run in ev:
        if comm not in (rcomm, scomm):
            other["idle" if comm == "<idle>" else comm] += overlap(t - run, t, w0, w1)
    idle = other.pop("idle", 0.0)
    busiest = ", ".join("%s %.0f" % (k, v * 1e3) for k, v in other.most_common(3))
    line = "window %.0f ms: others ran %.0f ms (%s), idle %.0f ms" % (
        (w1 - w0) * 1e3, sum(other.values()) * 1e3, busiest or "-", idle * 1e3)
    share = {}
    for comm in (rcomm, scomm):
        mine = [e for e in ev if e[2] == comm]
        tot = sum(e[6] for e in mine) or 1.0
        share[comm] = sum(e[6] for e in mine if e[1] == 0) / tot
    # 0: the two processes ran on different cores; 1: in the same shares.
    shared = min(share[rcomm], share[scomm]) + min(1 - share[rcomm], 1 - share[scomm])
    line += "; core sharing %.2f" % shared
    rr = union([(t - r, t) for t, _, comm, _, _, _, r in ev if comm == rcomm], w0, w1)
    sr = union([(t - r, t) for t, _, comm, _, _, _, r in ev if comm == scomm], w0, w1)
    line += "; receiver running %.0f %% of it (2 threads at once %.0f %%), sender %.0f %% (%.0f %%), both %.0f %%" % (
        100 * rr[0] / (w1 - w0), 100 * rr[1] / (w1 - w0), 100 * sr[0] / (w1 - w0),
        100 * sr[1] / (w1 - w0), 100 * both(rr[2], sr[2]) / (w1 - w0))
    print(line)


if __name__ == "__main__":
    main()
