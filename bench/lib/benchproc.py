"""What the bench scripts read from /proc: a process's CPU and memory, the machine's load and CPU use
outside the processes measured, and the space a directory takes. Linux only, standard library only."""

import os
import resource
import sys
import time


def log(msg):
    """A progress line on stderr (stdout carries the results)."""
    print(msg, file=sys.stderr, flush=True)


def proc_cpu_seconds(pid):
    """utime+stime of a process (10 ms ticks; threads that exited included)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_sample(pid):
    """(utime+stime from /proc/PID/stat, sum of the threads' run time from schedstat in ns precision,
    the thread ids). The first counts exited threads too but moves in 10 ms ticks."""
    ticks = proc_cpu_seconds(pid)
    exact, tids = 0, set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    exact += int(f.read().split()[0])
                tids.add(tid)
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        pass
    return ticks, exact / 1e9, tids


def cpu_delta(a, b):
    """CPU seconds between two samples: the threads' exact run time when no thread went away and it
    agrees with the ticks (a thread born and gone in between is seen only by the ticks)."""
    ticks = b[0] - a[0]
    exact = b[1] - a[1]
    if a[2] and a[2] <= b[2] and exact >= 0 and abs(ticks - exact) <= 0.025:
        return exact
    return ticks


def proc_status_kib(pid, key):
    """A KiB field of /proc/PID/status (VmRSS, VmHWM); 0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def child_pids(ppid):
    """Processes whose parent is ppid (nginx's workers)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[1]) == ppid:
            pids.append(int(d))
    return pids


def busy_cpu_seconds():
    """Machine-wide user+nice+system CPU seconds, plus steal: time the hypervisor gave our vCPUs to
    someone else disturbs a case as much as a local process does (softirq left out: loopback traffic
    lands there)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[7]) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    """CPU used by this script's children that have been waited for (load generators, curl)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def machine_load(window=0.5):
    """Cores busy over the next `window` seconds (busy_cpu_seconds)."""
    b0 = busy_cpu_seconds()
    time.sleep(window)
    return (busy_cpu_seconds() - b0) / window


def loadavg1():
    """The 1-minute load average."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def loadavg():
    """The 1, 5 and 15-minute load averages, as /proc/loadavg shows them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def disk_bytes(path):
    """(allocated bytes, apparent bytes of files) under path; the first is what du reports."""
    allocated = apparent = 0
    for root, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            allocated += st.st_blocks * 512
            if name in files:
                apparent += st.st_size
    return allocated, apparent
