#!/usr/bin/env python3
"""Many idle partitions (issue #21): what a caught-up consumer of N partitions costs the broker
and itself while nothing is written, at N = 100, 1,000 and 10,000, for Sluice (the library's
consumer and the connector) next to librdkafka and franz-go.

    tests/kafka/broker.sh start                      # if not running
    cargo build --release -p sluice                  # the connector
    (cd bench/sluice && cargo build --release --bin sluice-consume --bin make-dataset)
    (cd bench/peers/rdkafka && cargo build --release)
    (cd bench/peers/franz-go && go build -o bench-peer-franz-go .)
    python3 bench/idle_partitions.py --runs 3 --out bench/results/idle-partitions.md

Topics `idle-N` (N partitions, one 100-byte record in each, written once by make-dataset, kept).
Each run of a client: start it from the earliest offsets (the peers with `BENCH_IDLE=1`: after
their summary line they go on polling until killed; the connector is `sluice read --mode
continuous` into a fresh directory, caught up when it has a segment for every partition), wait
until it has read all N records, let it settle for --settle seconds, then measure a window of
--idle seconds: the broker's CPU (utime+stime of its JVM, /proc/PID/stat) and the client's, and
at the end the client's resident memory (VmRSS; VmHWM is its peak, which for the connector
includes the catch-up). The broker's own idle CPU over the same window length with no client is
measured per N (--runs times, median) and subtracted: "broker CPU per idle partition" is
(broker CPU in the window - baseline) / N / window, in microseconds of CPU per partition per
second. "Client memory per partition" is the slope of VmRSS between 100 and 10,000 partitions
((RSS(10,000) - RSS(100)) / 9,900), so that the fixed cost of the process does not count.

Every client with its defaults (fetch waits: Sluice 500 ms, librdkafka `fetch.wait.max.ms` 500,
franz-go `FetchMaxWait` 5 s; so franz-go asks a tenth as often), and Sluice once more with a 5 s
wait (`sluice-wire-5s`: `FetchConfig::with_max_wait_ms(5000)`; `sluice-connector-5s`:
`fetch_max_wait_ms: 5000`). The rdkafka peer assigns the
partitions directly, as the others do (no group). Clients run one at a time, in rotating order.
Python 3 standard library only.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
BROKER_PID = os.path.join(ROOT, ".kafka", "single", "broker.pid")
TICK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


def log(*args):
    print("idle_partitions:", *args, file=sys.stderr, flush=True)


def cpu_s(pid):
    """utime + stime of a process (its threads included), seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def broker_pid():
    with open(BROKER_PID) as f:
        return int(f.read().strip())


def clients(args):
    sluice_consume = os.path.join(BENCH, "sluice", "target", "release", "sluice-consume")
    rdkafka = os.path.join(BENCH, "peers", "rdkafka", "target", "release", "bench-peer-rdkafka")
    franz = os.path.join(BENCH, "peers", "franz-go", "bench-peer-franz-go")
    table = {
        "sluice-wire": sluice_consume,
        "sluice-connector": args.sluice,
        # The same with the fetch wait franz-go uses (a tenth as many fetches while idle).
        "sluice-wire-5s": sluice_consume,
        "sluice-connector-5s": args.sluice,
        "librdkafka": rdkafka,
        "franz-go": franz,
    }
    chosen = args.clients.split(",")
    for name in chosen:
        if name not in table:
            sys.exit(f"unknown client {name!r}; choose from {', '.join(table)}")
        if not os.path.exists(table[name]):
            sys.exit(f"{name}: {table[name]} is missing; build it (see this script's docstring)")
    return [(name, table[name]) for name in chosen]


def ensure_topic(args, n):
    topic = f"idle-{n}"
    tool = os.path.join(BENCH, "sluice", "target", "release", "make-dataset")
    subprocess.run([tool, args.bootstrap, topic, str(n), str(n), "text100", "none", "1"], check=True,
                   stdout=sys.stderr)
    return topic


class Client:
    """One client process, caught up when `caught_up` is set."""

    def __init__(self, name, binary, args, topic, n, workdir):
        self.name, self.n, self.caught_up = name, n, threading.Event()
        self.err = open(os.path.join(workdir, f"{name}.err"), "w")
        env = dict(os.environ, BENCH_IDLE="1")
        if name == "sluice-wire-5s":
            env["BENCH_MAX_WAIT_MS"] = "5000"
        self.dest = None
        if name.startswith("sluice-connector"):
            self.dest = os.path.join(workdir, "dest")
            os.makedirs(self.dest)
            config = os.path.join(workdir, "config.json")
            with open(config, "w") as f:
                settings = {"brokers": [args.bootstrap], "topics": [topic], "start_position": "earliest"}
                if name == "sluice-connector-5s":
                    settings["fetch_max_wait_ms"] = 5000
                json.dump(settings, f)
            argv = [binary, "read", "--config", config, "--dest", self.dest, "--mode", "continuous"]
        else:
            argv = [binary, args.bootstrap, topic, str(n), str(n)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, env=env, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        if self.dest:
            self.segments = os.path.join(self.dest, topic, "segments")
            threading.Thread(target=self._watch, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("RESULT"):
                self.caught_up.set()

    def _watch(self):
        while self.proc.poll() is None and not self.caught_up.is_set():
            try:
                if len(os.listdir(self.segments)) >= self.n:
                    self.caught_up.set()
            except OSError:
                pass
            time.sleep(0.2)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if self.dest else signal.SIGKILL)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def window(broker, pid, seconds):
    b0, c0 = cpu_s(broker), cpu_s(pid) if pid else 0.0
    time.sleep(seconds)
    b1, c1 = cpu_s(broker), cpu_s(pid) if pid else 0.0
    return b1 - b0, c1 - c0


def run_client(args, name, binary, topic, n, broker):
    workdir = tempfile.mkdtemp(prefix=f"idle-{name}-{n}-")
    started = time.monotonic()
    client = Client(name, binary, args, topic, n, workdir)
    try:
        if not client.caught_up.wait(args.catch_up_timeout):
            log(f"{name} {n}: not caught up in {args.catch_up_timeout} s (exit {client.proc.poll()}; log {workdir})")
            return None
        catch_up = time.monotonic() - started
        time.sleep(args.settle)
        if client.proc.poll() is not None:
            log(f"{name} {n}: exited ({client.proc.returncode}) while idle; log {workdir}")
            return None
        broker_cpu, client_cpu = window(broker, client.proc.pid, args.idle)
        rss, hwm = status_kib(client.proc.pid, "VmRSS"), status_kib(client.proc.pid, "VmHWM")
        return {"client": name, "partitions": n, "catch_up_s": round(catch_up, 2), "broker_cpu_s": round(broker_cpu, 3),
                "client_cpu_s": round(client_cpu, 3), "rss_kib": rss, "hwm_kib": hwm}
    finally:
        client.stop()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def med(values):
    return statistics.median(values) if values else None


def report(results, baselines, names, sizes, args):
    lines = [f"Idle window {args.idle:g} s after {args.settle:g} s of settling; medians of {args.runs} runs; "
             "broker CPU net of its idle baseline.", "",
             "| client | partitions | runs | catch-up s | broker CPU s in the window (baseline) | broker CPU per idle partition, µs/s |"
             " client CPU s in the window | client RSS MiB | client peak RSS MiB |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    slopes = {}
    for name in names:
        for n in sizes:
            rs = [r for r in results if r["client"] == name and r["partitions"] == n]
            if not rs:
                lines.append(f"| {name} | {n:,} | 0 | | | | | | |")
                continue
            broker = med([r["broker_cpu_s"] for r in rs])
            net = broker - baselines[n]
            per = net / n / args.idle * 1e6
            lines.append(f"| {name} | {n:,} | {len(rs)} | {med([r['catch_up_s'] for r in rs]):.2f} | "
                         f"{broker:.2f} ({baselines[n]:.2f}) | {per:,.1f} | {med([r['client_cpu_s'] for r in rs]):.2f} | "
                         f"{med([r['rss_kib'] for r in rs]) / 1024:.1f} | {med([r['hwm_kib'] for r in rs]) / 1024:.1f} |")
        lo, hi = min(sizes), max(sizes)
        a = med([r["rss_kib"] for r in results if r["client"] == name and r["partitions"] == lo])
        b = med([r["rss_kib"] for r in results if r["client"] == name and r["partitions"] == hi])
        if a is not None and b is not None and hi > lo:
            slopes[name] = (b - a) * 1024 / (hi - lo)
    lines += ["", f"| client | client memory per partition (RSS slope {min(sizes):,} to {max(sizes):,}), bytes |",
              "| --- | ---: |"]
    for name, slope in slopes.items():
        lines.append(f"| {name} | {slope:,.0f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", default="127.0.0.1:19092")
    ap.add_argument("--sluice", default=os.path.join(ROOT, "target", "release", "sluice"))
    ap.add_argument("--partitions", default="100,1000,10000")
    ap.add_argument("--clients", default="sluice-wire,sluice-connector,librdkafka,franz-go")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds of the measured idle window")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds between caught up and the window")
    ap.add_argument("--catch-up-timeout", dest="catch_up_timeout", type=float, default=180.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep each run's directory (logs, destination)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sizes = [int(x) for x in args.partitions.split(",")]
    chosen = clients(args)
    names = [name for name, _ in chosen]
    broker = broker_pid()
    started = time.time()
    topics = {n: ensure_topic(args, n) for n in sizes}
    baselines, results = {}, []
    for n in sizes:
        base = []
        for run in range(args.runs):
            # The broker's own idle CPU drifts (log cleaner, KRaft, GC): one baseline window per
            # run, between the clients' runs, rather than all of them before.
            time.sleep(args.settle)
            base.append(window(broker, None, args.idle)[0])
            log(f"baseline {n} (run {run}): broker {base[-1]:.3f} s of CPU per {args.idle:g} s")
            shift = run % len(chosen)
            for name, binary in chosen[shift:] + chosen[:shift]:
                r = run_client(args, name, binary, topics[n], n, broker)
                if r:
                    r["run"] = run
                    results.append(r)
                    log(json.dumps(r))
        baselines[n] = med(base)
    text = report(results, baselines, names, sizes, args)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# idle_partitions.py {' '.join(sys.argv[1:])}\n\n")
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(started))}, {os.cpu_count()} CPUs, "
                    f"{time.time() - started:.0f} s\n\n{text}\n\n## Every run\n\nbaselines (broker CPU s per window): "
                    f"{json.dumps(baselines)}\n\n```\n")
            for r in results:
                f.write(json.dumps(r) + "\n")
            f.write("```\n")


if __name__ == "__main__":
    main()
