#!/usr/bin/env python3
"""`sluice mirror` against MirrorMaker 2 (issue #17): throughput, CPU, peak RSS, latency.

    python3 bench/mirror.py --label mirror-DATE [--runs 2] [--datasets none-100b,zstd-1k]
        [--modes at_least_once,exactly_once] [--tools sluice,mm2] [--records-100b 2000000]
        [--records-1k 300000] [--latency-rate 2000 --latency-seconds 30 --latency-warmup 10]

Needs: the source node and the 3-node cluster (tests/kafka/broker.sh start, start-cluster;
SOURCE / TARGET env, default 127.0.0.1), the MM2 jars in bench/mm2/lib/ (resolved from
bench/mm2/pom.xml when missing), Python's confluent-kafka (`pip install confluent-kafka`: the
sampler, the record counter and the latency consumer, the same for both tools), the sluice
binary (SLUICE, default the static musl build of scripts/build-static.sh).

Per dataset, a 3-partition source topic is filled once by Kafka's ProducerPerformance from a
payload file of distinct text lines (seeded pseudo-words: a random line per record, so zstd has
realistic text to compress instead of ProducerPerformance's one repeated random payload). Then
`--runs` rounds of every (tool, mode), the order rotating each round, each into a fresh target
topic on the cluster (deleted after the run):

- sluice: `sluice mirror --mode bounded` (exits when the source's end offsets are copied);
- MM2: `org.apache.kafka.connect.mirror.MirrorMaker` in dedicated mode, a fresh source alias per
  run (so fresh Connect offsets/config/status topics and target topic `ALIAS.TOPIC`), heartbeats,
  checkpoints and offset syncs off (only the topic copy runs), stopped (SIGTERM) once the
  target's read_committed end offsets reach the record count and stay for 3 s.

Both run under /usr/bin/time -v (user+sys and peak RSS of the whole process: MM2's JVM). A
sampler polls the target topic's read_committed end offsets (AdminClient.list_offsets) and the
tool's /proc/PID/stat every 0.2 s: whole-run records/s = records / (last target change - exec),
steady records/s = records / (last change - first sample with a record), steady CPU = the
tool's CPU between those two samples. End offsets count transaction markers in exactly_once, so
the records are counted afterwards by reading the target topic read_committed.

Latency (none-100b only): a fresh source topic, the mirror in continuous mode, 1000 warm-up
records; once they reached the target, a read_committed consumer on the target (from its end)
and ProducerPerformance pacing --latency-rate records/s (linger.ms=0, acks=all) for
warm-up + measured seconds; latency = receive time - record timestamp (CreateTime, kept by both
mirrors) of the records produced after the warm-up seconds.
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, IsolationLevel, TopicPartition, OFFSET_BEGINNING, OFFSET_END
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CLK = os.sysconf("SC_CLK_TCK")
SOURCE = os.environ.get("SOURCE", "127.0.0.1:19092")
TARGET = os.environ.get("TARGET", "127.0.0.1:19192,127.0.0.1:29192,127.0.0.1:39192")
PARTITIONS = 3


def log(*args):
    print(time.strftime("%H:%M:%S"), *args, file=sys.stderr, flush=True)


def java(*args, **kw):
    return subprocess.run(["bash", str(ROOT / "tests/kafka/broker.sh"), "java", *args], check=True, **kw)


def loadavg():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_cpu():
    """(busy, total) jiffies of the whole machine."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def proc_cpu(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def child_of(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            if children:
                return int(children[0])
        except OSError:
            return None
        time.sleep(0.01)
    return None


def time_v(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        key, _, value = line.strip().rpartition(": ")
        if key == "User time (seconds)":
            out["user_s"] = float(value)
        elif key == "System time (seconds)":
            out["sys_s"] = float(value)
        elif key == "Maximum resident set size (kbytes)":
            out["peak_rss_mib"] = int(value) / 1024
    return out


def payload_file(path, size, lines, seed):
    """Distinct text lines of exactly `size` bytes: pseudo-words and numbers, seeded."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(2000)]
    with open(path, "w") as f:
        for i in range(lines):
            parts = [f"id={i}"]
            n = len(parts[0])
            while n < size:
                w = rng.choice(words) if rng.random() < 0.8 else str(rng.randint(0, 10**6))
                parts.append(w)
                n += len(w) + 1
            f.write(" ".join(parts)[:size] + "\n")


class Admin:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(self, topic, partitions, replicas):
        fs = self.admin.create_topics([NewTopic(topic, partitions, replicas)])
        for f in fs.values():
            f.result()

    def delete(self, topics):
        if topics:
            for f in self.admin.delete_topics(list(topics), operation_timeout=30).values():
                try:
                    f.result()
                except Exception as error:  # noqa: BLE001 - best effort cleanup
                    log("delete", error)

    def topics(self):
        return set(self.admin.list_topics(timeout=10).topics)

    def end_sum(self, topic, committed=True):
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
        try:
            fs = self.admin.list_offsets(request, isolation_level=level, request_timeout=5)
            return sum(f.result().offset for f in fs.values())
        except Exception:  # noqa: BLE001 - the topic does not exist yet, or its leaders are not known yet
            return None

    def end_sum_when_known(self, topic, timeout=30):
        deadline = time.monotonic() + timeout
        while (end := self.end_sum(topic)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return end or 0


def count_records(bootstrap, topic):
    """Records of `topic` visible read_committed (markers and aborted records are not counted)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "mirror-bench-count", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    count, eof, idle = 0, set(), time.monotonic()
    while len(eof) < PARTITIONS and time.monotonic() - idle < 30:
        msgs = c.consume(10000, 1.0)
        for m in msgs:
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            count += 1
        if msgs:
            idle = time.monotonic()
    c.close()
    return count


class Sampler(threading.Thread):
    def __init__(self, admin, topic, pid, t0, path, interval=0.2):
        super().__init__(daemon=True)
        self.admin, self.topic, self.pid, self.interval = admin, topic, pid, interval
        self.t0, self.file = t0, open(path, "w")
        self.file.write("t_s,target_end,tool_cpu_s\n")
        self.samples = []  # (monotonic, end_sum, tool cpu s)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)

    def sample(self):
        end = self.admin.end_sum(self.topic)
        if end is None:
            end = self.samples[-1][1] if self.samples else 0
        cpu = proc_cpu(self.pid)
        t = time.monotonic()
        if cpu is not None:
            self.samples.append((t, end, cpu))
            self.file.write(f"{t - self.t0:.3f},{end},{cpu:.2f}\n")
            self.file.flush()
        return end


def mm2_properties(alias, topic, mode, compression, extra=""):
    eos = "dst.exactly.once.source.support = enabled" if mode == "exactly_once" else ""
    comp = f"dst.producer.compression.type = {compression}" if compression != "none" else ""
    return f"""clusters = {alias}, dst
{alias}.bootstrap.servers = {SOURCE}
dst.bootstrap.servers = {TARGET}
{alias}->dst.enabled = true
{alias}->dst.topics = {topic}
dst->{alias}.enabled = false
replication.factor = 3
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
emit.offset-syncs.enabled = false
sync.topic.acls.enabled = false
offset.storage.replication.factor = 3
status.storage.replication.factor = 3
config.storage.replication.factor = 3
{eos}
{comp}
{extra}
"""


def log4j(path, logfile):
    Path(path).write_text(f"""rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {logfile}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c: %m%n
""")


def tool_command(tool, run_dir, run_id, topic, mode, compression, bounded):
    """(command, target topic, signal to stop)."""
    if tool == "sluice":
        target_topic = f"sl{run_id}.{topic}"
        config = {"source": {"brokers": [SOURCE]}, "target": {"brokers": TARGET.split(",")},
                  "topics": [topic], "target_topic": f"sl{run_id}.{{topic}}", "commit_mode": mode,
                  "create_topics": True, "replication_factor": 3, "compression": compression}
        (run_dir / "sluice.json").write_text(json.dumps(config, indent=1) + "\n")
        cmd = [ARGS.sluice, "mirror", "--config", str(run_dir / "sluice.json"), "--mode",
               "bounded" if bounded else "continuous"]
        return cmd, target_topic
    alias = f"s{run_id}"
    (run_dir / "mm2.properties").write_text(mm2_properties(alias, topic, mode, compression))
    log4j(run_dir / "log4j2.properties", run_dir / "mm2.log")
    cmd = ["java", "-Xms256M", "-Xmx2G", f"-Dlog4j2.configurationFile={run_dir / 'log4j2.properties'}",
           "-cp", str(HERE / "mm2/lib/*"), "org.apache.kafka.connect.mirror.MirrorMaker",
           str(run_dir / "mm2.properties")]
    return cmd, f"{alias}.{topic}"


def start(cmd, run_dir):
    out = open(run_dir / "tool.out", "w")
    err = open(run_dir / "tool.err", "w")
    t0 = time.monotonic()
    proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(run_dir / "time.txt"), *cmd], stdout=out, stderr=err)
    pid = child_of(proc.pid)
    return proc, pid, t0


def stop(proc, pid, timeout=60):
    if proc.poll() is None and pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        proc.wait()


def throughput_run(admin_t, dataset, topic, records, tool, mode, run_id, out_dir):
    # A fresh admin client per run: a long-lived one (librdkafka 2.16.0) kept failing
    # list_offsets on a topic created after an earlier one was deleted.
    admin_t = Admin(TARGET)
    compression = "zstd" if dataset == "zstd-1k" else "none"
    run_dir = out_dir / f"{dataset}-{tool}-{mode}-{run_id}"
    run_dir.mkdir(parents=True)
    cmd, target_topic = tool_command(tool, run_dir, run_id, topic, mode, compression, bounded=True)
    # The target topic exists before the tool starts (both would create it the same way): the
    # sampler sees its end offsets from the first record on.
    admin_t.create(target_topic, PARTITIONS, 3)
    admin_t.end_sum_when_known(target_topic)
    load0, m0 = loadavg(), machine_cpu()
    proc, pid, t0 = start(cmd, run_dir)
    sampler = Sampler(admin_t, target_topic, pid, t0, run_dir / "samples.csv")
    sampler.start()
    deadline = t0 + ARGS.timeout
    last_change, last_end = None, -1
    timed_out = False
    t_exit = None
    while True:
        time.sleep(0.2)
        if tool == "sluice":
            if proc.poll() is not None:
                t_exit = time.monotonic()
                break
        else:
            s = sampler.samples[-1] if sampler.samples else None
            if s:
                if s[1] != last_end:
                    last_end, last_change = s[1], s[0]
                if last_end >= records and (mode == "at_least_once" or s[0] - last_change >= 3):
                    break
            if proc.poll() is not None:
                break
        if time.monotonic() > deadline:
            timed_out = True
            break
    sampler.stop.set()
    sampler.join()
    final = sampler.admin.end_sum_when_known(target_topic)  # after the tool exited or before it is stopped
    sampler.sample()
    stop(proc, pid)
    wall = time.monotonic() - t0
    load1, m1 = loadavg(), machine_cpu()
    samples = sampler.samples
    first = next((s for s in samples if s[1] > 0), None)
    last = next((s for s in samples if s[1] >= final), None)
    counted = count_records(TARGET, target_topic)
    usage = time_v(run_dir / "time.txt")
    if last is None and tool == "sluice":
        # It exited between two samples: its exit is the last change, its total CPU the last figure.
        last = (t_exit, final, usage.get("user_s", 0) + usage.get("sys_s", 0))
    row = {"dataset": dataset, "tool": tool, "mode": mode, "run": run_id, "records_source": records,
           "records_target": counted, "target_end": final, "timed_out": timed_out, "exit": proc.returncode,
           "wall_s": round(wall, 3), **usage}
    if first and last and last[0] > first[0]:
        row.update({
            "first_record_s": round(first[0] - t0, 3), "last_record_s": round(last[0] - t0, 3),
            "whole_rps": round(counted / (last[0] - t0)),
            "steady_rps": round(counted / (last[0] - first[0])),
            "steady_cpu_s": round(last[2] - first[2], 2),
        })
    cpu = usage.get("user_s", 0) + usage.get("sys_s", 0)
    row["cpu_s"] = round(cpu, 2)
    row["cpu_s_per_m"] = round(cpu / counted * 1e6, 2) if counted else None
    if "steady_cpu_s" in row and counted:
        row["steady_cpu_s_per_m"] = round(row["steady_cpu_s"] / counted * 1e6, 2)
    row["machine_busy"] = round((m1[0] - m0[0]) / max(1, m1[1] - m0[1]), 3)
    row["load_before"], row["load_after"] = load0, load1
    cleanup(admin_t, tool, run_id, target_topic)
    return row


def cleanup(admin_t, tool, run_id, target_topic):
    """Deletes the target topic and MM2's Connect topics of the run (25+5+1 partitions x 3 replicas
    per MM2 run: left in place they pile up on the 3-node cluster)."""
    internal = [t for t in admin_t.topics() if t.endswith(f".s{run_id}.internal")] if tool == "mm2" else []
    admin_t.delete([target_topic, *internal])


def latency_run(admin_s, admin_t, tool, mode, run_id, out_dir, payload):
    admin_t = Admin(TARGET)  # fresh, as in throughput_run: it must see the topic the mirror creates
    run_dir = out_dir / f"latency-{tool}-{mode}-{run_id}"
    run_dir.mkdir(parents=True)
    topic = f"mirror-lat-{run_id}-{int(time.time())}"
    admin_s.create(topic, PARTITIONS, 1)
    fill(topic, 1000, payload, "none", run_dir / "warmup.log", rate=-1)
    cmd, target_topic = tool_command(tool, run_dir, run_id, topic, mode, "none", bounded=False)
    load0 = loadavg()
    proc, pid, t0 = start(cmd, run_dir)
    while (admin_t.end_sum(target_topic) or 0) < 1000:
        if time.monotonic() - t0 > 180 or proc.poll() is not None:
            stop(proc, pid)
            raise RuntimeError(f"{tool} {mode}: the warm-up records did not reach {target_topic}")
        time.sleep(0.2)
    ready = time.monotonic() - t0
    c = Consumer({"bootstrap.servers": TARGET, "group.id": "mirror-bench-latency", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(target_topic, p, OFFSET_END) for p in range(PARTITIONS)])
    c.consume(1, 1.0)  # joins: positions resolved before the paced records
    total = ARGS.latency_rate * (ARGS.latency_warmup + ARGS.latency_seconds)
    paced_start_ms = int(time.time() * 1000)
    measured_from = paced_start_ms + ARGS.latency_warmup * 1000
    producer = subprocess.Popen(
        ["bash", str(ROOT / "tests/kafka/broker.sh"), "java", "org.apache.kafka.tools.ProducerPerformance",
         "--topic", topic, "--num-records", str(total), "--payload-file", str(payload),
         "--throughput", str(ARGS.latency_rate), "--producer-props", f"bootstrap.servers={SOURCE}", "acks=all",
         "linger.ms=0"], stdout=open(run_dir / "paced.log", "w"), stderr=subprocess.STDOUT)
    latencies, seen, deadline = [], 0, time.monotonic() + ARGS.latency_warmup + ARGS.latency_seconds + 60
    while seen < total and time.monotonic() < deadline:
        msgs = c.consume(1000, 0.05)
        now = time.time() * 1000
        for m in msgs:
            if m.error():
                continue
            seen += 1
            ts = m.timestamp()[1]
            if ts >= measured_from:
                latencies.append(now - ts)
    c.close()
    producer.wait()
    stop(proc, pid)
    usage = time_v(run_dir / "time.txt")
    latencies.sort()
    (run_dir / "latencies.txt").write_text("".join(f"{x:.1f}\n" for x in latencies))
    q = lambda p: round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 1) if latencies else None
    row = {"dataset": "latency-none-100b", "tool": tool, "mode": mode, "run": run_id, "rate": ARGS.latency_rate,
           "expected": total, "received": seen, "measured": len(latencies), "ready_s": round(ready, 1),
           "p50_ms": q(0.50), "p99_ms": q(0.99), "max_ms": round(latencies[-1], 1) if latencies else None,
           "mean_ms": round(statistics.fmean(latencies), 1) if latencies else None,
           "load_before": load0, "load_after": loadavg(), **usage}
    cleanup(admin_t, tool, run_id, target_topic)
    admin_s.delete([topic])
    return row


def fill(topic, records, payload, compression, logpath, rate=-1):
    props = [f"bootstrap.servers={SOURCE}", "acks=all", "linger.ms=10", "batch.size=65536"]
    if compression != "none":
        props.append(f"compression.type={compression}")
    with open(logpath, "w") as f:
        java("org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", str(records),
             "--payload-file", str(payload), "--throughput", str(rate), "--producer-props", *props,
             stdout=f, stderr=subprocess.STDOUT)


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", required=True)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--datasets", default="none-100b,zstd-1k")
    p.add_argument("--modes", default="at_least_once,exactly_once")
    p.add_argument("--tools", default="sluice,mm2")
    p.add_argument("--records-100b", type=int, default=2_000_000)
    p.add_argument("--records-1k", type=int, default=300_000)
    p.add_argument("--latency-rate", type=int, default=2000)
    p.add_argument("--latency-seconds", type=int, default=30)
    p.add_argument("--latency-warmup", type=int, default=10)
    p.add_argument("--latency-runs", type=int, default=1)
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--sluice", default=os.environ.get(
        "SLUICE", str(ROOT / "target/x86_64-unknown-linux-musl/release/sluice")))
    ARGS = p.parse_args()
    out_dir = HERE / "results" / ARGS.label
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_path = out_dir / "runs.jsonl"
    if not list((HERE / "mm2/lib").glob("connect-mirror-*.jar")):
        subprocess.run(["mvn", "-B", "-q", "dependency:copy-dependencies", "-DoutputDirectory=lib"],
                       cwd=HERE / "mm2", check=True)
    admin_s, admin_t = Admin(SOURCE), Admin(TARGET)
    tools = ARGS.tools.split(",")
    modes = ARGS.modes.split(",")
    combos = [(t, m) for m in modes for t in tools]
    stamp = int(time.time()) % 100000

    def emit(row):
        log("RESULT", json.dumps(row))
        with open(rows_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    for dataset in [] if ARGS.no_throughput else ARGS.datasets.split(","):
        size, records, compression = (100, ARGS.records_100b, "none") if dataset == "none-100b" else \
            (1024, ARGS.records_1k, "zstd")
        payload = out_dir / f"payload-{size}.txt"
        payload_file(payload, size, 20000 if size == 100 else 5000, seed=size)
        topic = f"mirror-src-{dataset}-{records}-{stamp}"
        log(f"filling {topic}: {records} x {size} B {compression}")
        admin_s.create(topic, PARTITIONS, 1)
        fill(topic, records, payload, compression, out_dir / f"fill-{dataset}.log")
        for rnd in range(ARGS.runs):
            k = rnd % len(combos)
            for tool, mode in combos[k:] + combos[:k]:
                run_id = f"{stamp}r{rnd}{tool[0]}{mode[0]}"
                log(f"{dataset} round {rnd}: {tool} {mode} (load {loadavg()})")
                emit(throughput_run(admin_t, dataset, topic, records, tool, mode, run_id, out_dir))
        admin_s.delete([topic])
    if ARGS.latency_rate > 0 and ARGS.latency_runs > 0:
        payload = out_dir / "payload-100.txt"
        if not payload.exists():
            payload_file(payload, 100, 20000, seed=100)
        for rnd in range(ARGS.latency_runs):
            for tool, mode in combos:
                run_id = f"{stamp}l{rnd}{tool[0]}{mode[0]}"
                log(f"latency round {rnd}: {tool} {mode} (load {loadavg()})")
                emit(latency_run(admin_s, admin_t, tool, mode, run_id, out_dir, payload))


if __name__ == "__main__":
    main()
