#!/usr/bin/env python3
"""Scale-out of `sluice read --mode continuous` in a consumer group (issue #22): a catch-up read
of a whole 12-partition topic by 1 worker vs 3 workers sharing one destination directory.

    tests/kafka/broker.sh start      # if not running
    (cd bench/sluice && cargo build --release --bin make-dataset)
    bench/sluice/target/release/make-dataset 127.0.0.1:19092 gb-scale-12 12 1200000 json200 none 500
    cargo build --release -p sluice
    python3 bench/group_scale.py --sluice target/release/sluice --topic gb-scale-12 --runs 3

Each run: a fresh destination directory under --dest-root (/tmp; /dev/shm takes the disk out; deleted afterwards) and a fresh group id;
the N workers (`sluice read --config C --dest D --mode continuous`, C = brokers, topics,
group_id, group_protocol, group_session_timeout_ms 6000, group_heartbeat_interval_ms 500,
start_position earliest, the epoch settings at their defaults unless --epoch-* are given) are
started together, each under `/usr/bin/time -v`. The clock starts before the first is spawned
and stops at the first poll (every 50 ms) at which every partition's certified next_offset
(D/_sluice/partitions/T/p<N>.json) has reached the log end (the end offsets are read once,
before the runs, with Kafka's GetOffsetShell); then the workers get SIGTERM. rows/s = the
topic's records / that time. Also: the time from the start to the first certified position past
the log start ("startup": process start, group join, first epoch) and the records / the time
from there to the end ("after startup"; the first epoch's rows are counted in it); the time
until every partition has a certified position past its log start ("all partitions started":
with 3 workers, the group's assignment has converged by then) and the rows/s from there to the
end (the rows certified by then left out), per worker user+system CPU
seconds and peak RSS (from time -v, so the shutdown is included), the machine's CPU over the run
from /proc/stat (busy and iowait, in cores out of nproc), and the broker's CPU (utime+stime of
its JVM from /proc/PID/stat) and the disk's written bytes (/proc/diskstats of the device holding
the destination).

Runs alternate 1, 3, 1, 3, ... ; medians per worker count. Python 3 standard library only.

`--cpu-quota C` puts each worker in its own cgroup (`/sys/fs/cgroup/cpu/sluice-group-scale-wN`,
cgroup v1, root) limited to C CPUs, as each would be in a container with a CPU limit: on this
2-core machine, 3 unlimited workers only share the same 2 cores (1.1x), which says nothing
about 3 workers on 3 hosts. With C = 0.4, one worker has 0.4 CPU and three have 1.2 together,
and the broker keeps the rest.
"""

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BROKER_SH = os.path.join(ROOT, "tests", "kafka", "broker.sh")
TICK = os.sysconf("SC_CLK_TCK")


def log(*args):
    print("group_scale:", *args, file=sys.stderr, flush=True)


def end_offsets(bootstrap, topic):
    out = subprocess.run([BROKER_SH, "java", "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
                          "--topic", topic, "--time", "-1"], check=True, capture_output=True, text=True).stdout
    ends = {}
    for line in out.split():
        t, p, o = line.rsplit(":", 2)
        if t == topic:
            ends[int(p)] = int(o)
    return ends


def start_offsets(bootstrap, topic):
    out = subprocess.run([BROKER_SH, "java", "org.apache.kafka.tools.GetOffsetShell", "--bootstrap-server", bootstrap,
                          "--topic", topic, "--time", "-2"], check=True, capture_output=True, text=True).stdout
    return {int(line.rsplit(":", 2)[1]): int(line.rsplit(":", 2)[2]) for line in out.split()
            if line.rsplit(":", 2)[0] == topic}


def cpu_times():
    """(busy, iowait, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
    return user + nice + system + irq + softirq, iowait, sum(fields[:8]), steal


def broker_pid():
    path = os.path.join(ROOT, ".kafka", "single", "broker.pid")
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def proc_cpu(pid):
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return 0


def disk_written_sectors(path):
    """Sectors written to the block device holding `path` (whole-disk line of /proc/diskstats)."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as f:
        for line in f:
            parts = line.split()
            if int(parts[0]) == major and int(parts[1]) == minor:
                return int(parts[9])
    return 0


def parse_time_v(path):
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("User time (seconds):"):
                out["user"] = float(line.split(":")[-1])
            elif line.startswith("System time (seconds):"):
                out["sys"] = float(line.split(":")[-1])
            elif line.startswith("Maximum resident set size (kbytes):"):
                out["rss_mib"] = int(line.split(":")[-1]) / 1024
            elif line.startswith("Percent of CPU this job got:"):
                out["pcpu"] = line.split(":")[-1].strip()
    return out


CGROUP_CPU = "/sys/fs/cgroup/cpu"


def cpu_cgroup(index, cores):
    """A cgroup (v1 cpu controller) for worker `index` limited to `cores` CPUs, as a container
    with a CPU limit would be: quota = cores x the 10 ms period. Made once, reused by runs."""
    path = os.path.join(CGROUP_CPU, f"sluice-group-scale-w{index}")
    os.makedirs(path, exist_ok=True)
    # A 10 ms period: with the default 100 ms a worker's threads spend the quota in a burst and
    # then stall for the rest of the period, which stalls its fetches (it used 0.33 of 0.4).
    with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
        f.write("-1")
    with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
        f.write("10000")
    with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(int(cores * 10000)))
    return path


def child_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
        return kids[0] if kids else None
    except OSError:
        return None


def certified(pdir, partitions):
    out = {}
    for p in partitions:
        try:
            with open(os.path.join(pdir, f"p{p}.json")) as f:
                doc = json.load(f)
        except (FileNotFoundError, ValueError):
            continue
        nxt = doc.get("next_offset")
        if isinstance(nxt, dict):
            nxt = nxt.get("next_offset")
        if nxt is not None:
            out[p] = nxt
    return out


def run_once(args, workers, run, ends, starts):
    dest = tempfile.mkdtemp(prefix=f"gb-scale-{workers}w-", dir=args.dest_root)
    tdir = tempfile.mkdtemp(prefix="gb-scale-logs-", dir="/tmp")
    config = {"brokers": [args.bootstrap], "topics": [args.topic], "group_id": f"gb-scale-{workers}-{run}-{os.getpid()}",
              "group_protocol": args.protocol, "group_session_timeout_ms": 6000, "group_heartbeat_interval_ms": 500,
              "start_position": "earliest"}
    for key in ("epoch_max_records", "epoch_max_ms", "epoch_max_bytes"):
        if getattr(args, key) is not None:
            config[key] = getattr(args, key)
    cpath = os.path.join(tdir, "config.json")
    with open(cpath, "w") as f:
        json.dump(config, f)
    # --separate-dests: worker i writes dest/w<i> (its own directory and topic lock), and a
    # partition's position is the furthest certified in any of them.
    dests = [os.path.join(dest, f"w{i}") for i in range(workers)] if args.separate_dests else [dest] * workers
    pdirs = sorted({os.path.join(d, "_sluice", "partitions", args.topic) for d in dests})
    total = sum(ends[p] - starts.get(p, 0) for p in ends)
    bpid = broker_pid()
    b0 = proc_cpu(bpid)
    c0 = cpu_times()
    d0 = disk_written_sectors(dest)
    t0 = time.monotonic()
    procs = []
    for i in range(workers):
        tv = os.path.join(tdir, f"w{i}.time")
        err = open(os.path.join(tdir, f"w{i}.log"), "w")
        os.makedirs(dests[i], exist_ok=True)
        command = ["/usr/bin/time", "-v", "-o", tv, args.sluice, "read", "--config", cpath, "--dest", dests[i],
                   "--mode", "continuous"]
        if args.cpu_quota:
            # The shell joins worker i's cgroup before it execs, so time and sluice start inside it.
            command = ["sh", "-c", f'echo $$ > {cpu_cgroup(i, args.cpu_quota)}/cgroup.procs && exec "$@"', "sh"] + command
        procs.append((subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=err, stderr=err), tv, err))
    first_progress = None
    all_started, rows_before_all_started = None, 0
    done = None
    deadline = t0 + args.timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        cert = {}
        for pdir in pdirs:
            for p, n in certified(pdir, ends).items():
                cert[p] = max(n, cert.get(p, n))
        t = time.monotonic()
        if first_progress is None and any(cert.get(p, 0) > starts.get(p, 0) for p in ends):
            first_progress = t
        if all_started is None and all(cert.get(p, 0) > starts.get(p, 0) for p in ends):
            all_started = t
            rows_before_all_started = sum(cert[p] - starts.get(p, 0) for p in ends)
        if all(cert.get(p, -1) >= ends[p] for p in ends):
            done = t
            break
        if any(p.poll() is not None for p, _, _ in procs):
            log(f"a worker exited early (logs in {tdir})")
            break
    c1 = cpu_times()
    b1 = proc_cpu(bpid)
    d1 = disk_written_sectors(dest)
    for p, _, _ in procs:
        kid = child_of(p.pid)
        if kid:
            try:
                os.kill(kid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p, _, err in procs:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            kid = child_of(p.pid)
            if kid:
                os.kill(kid, signal.SIGKILL)
            p.wait()
        err.close()
    per = [parse_time_v(tv) for _, tv, _ in procs]
    elapsed = (done or time.monotonic()) - t0
    ncpu = os.cpu_count()
    span = max(1, c1[2] - c0[2])
    result = {
        "workers": workers, "run": run, "complete": done is not None, "elapsed_s": elapsed,
        "rows": total, "rows_per_s": total / elapsed if done else None,
        "startup_s": (first_progress - t0) if first_progress else None,
        "rows_per_s_after_startup": total / (done - first_progress) if done and first_progress and done > first_progress
        else None,
        "all_partitions_started_s": (all_started - t0) if all_started else None,
        "rows_per_s_all_partitions": (total - rows_before_all_started) / (done - all_started)
        if done and all_started and done > all_started else None,
        "worker_cpu_s": [round(w.get("user", 0) + w.get("sys", 0), 2) for w in per],
        "worker_user_s": [w.get("user") for w in per], "worker_sys_s": [w.get("sys") for w in per],
        "worker_rss_mib": [round(w.get("rss_mib", 0), 1) for w in per],
        "machine_busy_cores": round(ncpu * (c1[0] - c0[0]) / span, 2),
        "machine_iowait_cores": round(ncpu * (c1[1] - c0[1]) / span, 2),
        "machine_steal_cores": round(ncpu * (c1[3] - c0[3]) / span, 2),
        "broker_cpu_s": round((b1 - b0) / TICK, 2),
        "disk_written_mib": round((d1 - d0) * 512 / 2**20),
        "loadavg_1m_end": os.getloadavg()[0],
        "dest_mib": round(sum(os.path.getsize(f) for d in sorted(set(dests))
                              for f in glob.glob(os.path.join(d, args.topic, "segments", "*"))) / 2**20),
        "separate_dests": bool(args.separate_dests),
    }
    if args.keep:
        log(f"kept {dest} and {tdir}")
    else:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.rmtree(tdir, ignore_errors=True)
    log(json.dumps(result))
    return result


def summary(results, counts):
    lines = [
        "| workers | runs | rows/s (median) | min - max | elapsed s | startup s | rows/s after startup "
        "| all partitions started s | rows/s once all partitions started | worker CPU s (sum, median) "
        "| worker CPU / elapsed (cores) | machine busy cores (of %d) | iowait cores | broker CPU s | peak RSS per worker MiB (max) "
        "| disk written MiB |" % os.cpu_count(),
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    med = {}
    for n in counts:
        rs = [r for r in results if r["workers"] == n and r["complete"]]
        if not rs:
            continue
        rate = statistics.median(r["rows_per_s"] for r in rs)
        med[n] = rate
        el = statistics.median(r["elapsed_s"] for r in rs)
        cpu = statistics.median(sum(r["worker_cpu_s"]) for r in rs)
        lines.append(
            f"| {n} | {len(rs)} | {rate:,.0f} | {min(r['rows_per_s'] for r in rs):,.0f} - "
            f"{max(r['rows_per_s'] for r in rs):,.0f} | {el:.2f} "
            f"| {statistics.median(r['startup_s'] or 0 for r in rs):.2f} "
            f"| {statistics.median(r['rows_per_s_after_startup'] or 0 for r in rs):,.0f} "
            f"| {statistics.median(r['all_partitions_started_s'] or 0 for r in rs):.2f} "
            f"| {statistics.median(r['rows_per_s_all_partitions'] or 0 for r in rs):,.0f} | {cpu:.2f} "
            f"| {statistics.median(sum(r['worker_cpu_s']) / r['elapsed_s'] for r in rs):.2f} "
            f"| {statistics.median(r['machine_busy_cores'] for r in rs):.2f} "
            f"| {statistics.median(r['machine_iowait_cores'] for r in rs):.2f} "
            f"| {statistics.median(r['broker_cpu_s'] for r in rs):.2f} "
            f"| {max(max(r['worker_rss_mib']) for r in rs):.0f} "
            f"| {statistics.median(r['disk_written_mib'] for r in rs):.0f} |")
    if 1 in med and len(med) > 1:
        for n in counts:
            if n != 1 and n in med:
                lines.append(f"\n{n} workers / 1 worker: {med[n] / med[1]:.2f}x")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--topic", default="gb-scale-12")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--protocol", default="consumer", choices=["classic", "consumer"])
    ap.add_argument("--workers", default="1,3")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured 1-worker runs first (page cache)")
    ap.add_argument("--epoch-max-records", dest="epoch_max_records", type=int)
    ap.add_argument("--epoch-max-ms", dest="epoch_max_ms", type=int)
    ap.add_argument("--epoch-max-bytes", dest="epoch_max_bytes", type=int)
    ap.add_argument("--dest-root", dest="dest_root", default="/tmp",
                    help="where the per-run destination directories go (/dev/shm: RAM, so the disk is out of it)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=None, help="markdown file for the table and every run")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--separate-dests", dest="separate_dests", action="store_true",
                    help="each worker its own destination directory (an experiment: no shared topic lock; a "
                         "partition moved while the group settles is read again from the start by its new owner)")
    ap.add_argument("--cpu-quota", dest="cpu_quota", type=float, default=None,
                    help="limit each worker to this many CPUs (its own cgroup, v1 cpu controller, needs root): "
                         "workers as containers with a CPU limit, so that N of them are not N processes "
                         "sharing this machine's 2 cores")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    ends = end_offsets(args.bootstrap, args.topic)
    starts = start_offsets(args.bootstrap, args.topic)
    log(f"{args.topic}: {len(ends)} partitions, {sum(ends.values()) - sum(starts.values())} records")
    started = time.time()
    for w in range(args.warmup):
        run_once(args, 1, -1 - w, ends, starts)
    results = []
    for run in range(args.runs):
        for n in (counts if run % 2 == 0 else counts[::-1]):
            results.append(run_once(args, n, run, ends, starts))
    text = summary(results, counts)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# group_scale.py: {' '.join(sys.argv[1:])}\n\n")
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(started))}, {os.cpu_count()} CPUs, "
                    f"protocol {args.protocol}, binary {args.sluice}, destinations under {args.dest_root}, "
                    f"topic {args.topic}, CPU limit per worker: "
                    f"{f'{args.cpu_quota} cores (cgroup cpu quota)' if args.cpu_quota else 'none'}\n\n")
            f.write(text + "\n\n## Every run\n\n```\n")
            for r in results:
                f.write(json.dumps(r) + "\n")
            f.write("```\n")


if __name__ == "__main__":
    main()
