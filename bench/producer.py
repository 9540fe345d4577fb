#!/usr/bin/env python3
"""The producer benchmark of issue #16: Sluice's library Producer against librdkafka (through the
rdkafka crate, and its own rdkafka_performance -P), the Java client's ProducerPerformance,
franz-go and Confluent's pure-Rust confluent-kafka crate, on the same broker, in alternating
rounds. Every run is one JSON line in bench/results/producer-LABEL/runs.jsonl; at the end
bench/producer_summary.py turns them into medians, ratios, report.md and chart.svg.

    python3 bench/producer.py --label quiet --records 2000000 --runs 5     # the real run
    python3 bench/producer.py --label smoke --records 20000 --runs 1 --warmup 0

bench/producer.sh LABEL RECORDS (RUNS=N) is the short form. See bench/README.md for what is
measured and BENCHMARKS.md for the method. Standard library only.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import run as consumer_bench  # noqa: E402  (measure(), broker_pid(), log(): the same as the consumer's)

log = consumer_bench.log

# name, codec, value size, records as a fraction of --records (1 KiB records: a tenth as many)
DATASETS = [("none-100b", "none", 100, 1.0), ("lz4-100b", "lz4", 100, 1.0), ("zstd-1k", "zstd", 1024, 0.1)]
ACKS = ["all", "leader"]  # all: idempotent; leader: acks=1 without idempotence
ALL_CLIENTS = ["sluice", "rdkafka", "rdkafka-perf", "java", "franz-go", "confluent-kafka"]
LIBRDKAFKA = ["rdkafka", "rdkafka-perf"]
PARTITIONS = 6

SLUICE = os.path.join(BENCH, "sluice", "target", "release", "sluice-produce")
MAKE_DATASET = os.path.join(BENCH, "sluice", "target", "release", "make-dataset")
RDKAFKA = os.path.join(BENCH, "peers", "rdkafka", "target", "release", "bench-peer-rdkafka-produce")
RDKAFKA_PERF = os.path.join(BENCH, "peers", "rdkafka-perf", "build", "librdkafka", "examples", "rdkafka_performance")
FRANZ = os.path.join(BENCH, "peers", "franz-go", "bench-peer-franz-go")
CONFLUENT = os.path.join(BENCH, "peers", "confluent-kafka", "target", "release", "bench-peer-confluent-kafka")
BROKER_SH = os.path.join(ROOT, "tests", "kafka", "broker.sh")
BINARY = {"sluice": SLUICE, "rdkafka": RDKAFKA, "rdkafka-perf": RDKAFKA_PERF, "java": BROKER_SH,
          "franz-go": FRANZ, "confluent-kafka": CONFLUENT}


def build(clients):
    cargo = ["cargo", "build", "--release", "--quiet"]
    consumer_bench.run(cargo + ["--bin", "sluice-produce", "--bin", "make-dataset"], cwd=os.path.join(BENCH, "sluice"))
    if "rdkafka" in clients or "rdkafka-perf" in clients:
        # rdkafka-perf's build takes its zstd from the rdkafka peer's zstd-sys build.
        consumer_bench.run(cargo, cwd=os.path.join(BENCH, "peers", "rdkafka"))
    if "rdkafka-perf" in clients:
        consumer_bench.run([os.path.join(BENCH, "peers", "rdkafka-perf", "build.sh")])
    if "franz-go" in clients:
        consumer_bench.run(["go", "build", "-o", "bench-peer-franz-go", "."], cwd=os.path.join(BENCH, "peers", "franz-go"))
    if "confluent-kafka" in clients:
        # rust-toolchain.toml in that directory selects Rust 1.95.
        consumer_bench.run(cargo, cwd=os.path.join(BENCH, "peers", "confluent-kafka"))
    if "java" in clients:
        consumer_bench.run([BROKER_SH, "fetch"])


def values(size):
    """The 1024 values every Rust and Go producer peer generates (sluice-produce's xorshift and
    words), for Java's --payload-file and rdkafka_performance's -m pattern."""
    state, mask = 0x2545F4914F6CDD1D, (1 << 64) - 1
    words = [b"order", b"amount", b"customer", b"status", b"shipped", b"12.50", b"true", b"null", b"EUR", b"2026"]
    out = []
    for _ in range(1024):
        value = b""
        while len(value) < size:
            state ^= (state << 13) & mask
            state ^= state >> 7
            state ^= (state << 17) & mask
            value += words[state % len(words)] + b" "
        out.append(value[:size])
    return out


def fresh_topic(bootstrap, client):
    """An empty topic of PARTITIONS partitions for the next run: make-dataset with 0 records
    deletes the previous run's (so the broker's disk holds one run per client) and creates it."""
    topic = f"bench-produce-{client}"
    subprocess.run([MAKE_DATASET, bootstrap, topic, str(PARTITIONS), "0", "text100", "none", "1"],
                   check=True, capture_output=True)
    return topic


def command(client, bootstrap, topic, codec, size, count, acks, linger, rate, scratch):
    if client in ("sluice", "rdkafka", "franz-go", "confluent-kafka"):
        mode = ["produce"] if client in ("franz-go", "confluent-kafka") else []
        return [BINARY[client]] + mode + [bootstrap, topic, str(count), str(size), codec, acks, str(linger), str(rate)]
    if client == "java":
        payload = os.path.join(scratch, f"payload-{size}.txt")
        if not os.path.exists(payload):
            with open(payload, "wb") as f:
                f.write(b"\n".join(values(size)))
        return [BROKER_SH, "java", "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
                "--num-records", str(count), "--payload-file", payload,
                "--throughput", str(rate) if rate else "-1",
                "--producer-props", f"bootstrap.servers={bootstrap}", "acks=" + ("all" if acks == "all" else "1"),
                "enable.idempotence=" + ("true" if acks == "all" else "false"),
                f"compression.type={codec}", f"linger.ms={linger}"]
    if client == "rdkafka-perf":
        # One payload for every record (the tool's -m pattern; the values' first): the one
        # difference from the others, which cycle through 1024 values. See BENCHMARKS.md.
        # Not in the latency runs (uncompressed, where the bytes do not matter; -l writes its
        # own timestamp into the payload).
        pattern = [] if rate else ["-m", values(size)[0].decode()]
        full = [RDKAFKA_PERF, "-P", "-t", topic, "-b", bootstrap, "-s", str(size), "-c", str(count), *pattern,
                "-z", codec, "-X", "acks=" + ("all" if acks == "all" else "1"),
                "-X", "enable.idempotence=" + ("true" if acks == "all" else "false"),
                "-X", f"linger.ms={linger}", "-i", "600000"]
        if rate:
            # -r waits 1/rate after every send (so it runs a little below the rate); -l stamps
            # each payload with its send time and -A writes every delivery's latency (µs).
            full += ["-r", str(rate), "-l", "-A", os.path.join(scratch, "rdkafka-perf-latency.txt")]
        return full
    raise SystemExit(f"unknown client {client}")


JAVA_LINE = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                       r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th", re.M)
PERF_LINE = re.compile(r"^% (\d+) messages produced \((\d+) bytes\), (\d+) delivered \(offset -?\d+, (\d+) failed\) "
                       r"in (\d+)ms: (\d+) msgs/s", re.M)


def percentile(sorted_values, p):
    return sorted_values[int((len(sorted_values) - 1) * p)] if sorted_values else None


def parse(client, stdout, count, rate, scratch):
    """-> records (acknowledged), seconds (the client's own clock), p50_ms, p99_ms."""
    if client == "java":
        lines = JAVA_LINE.findall(stdout)
        if not lines:
            raise RuntimeError(f"no ProducerPerformance summary in: {stdout[-800:]}")
        sent, per_s, _, _, _, p50, _, p99, _ = lines[-1]
        return {"records": int(sent), "seconds": int(sent) / float(per_s), "p50_ms": float(p50), "p99_ms": float(p99)}
    if client == "rdkafka-perf":
        lines = PERF_LINE.findall(stdout)
        if not lines:
            raise RuntimeError(f"no rdkafka_performance summary in: {stdout[-800:]}")
        _, _, delivered, failed, ms, _ = lines[-1]
        if int(failed):
            raise RuntimeError(f"rdkafka_performance: {failed} deliveries failed")
        out = {"records": int(delivered), "seconds": int(ms) / 1000.0, "p50_ms": None, "p99_ms": None}
        if rate:
            path = os.path.join(scratch, "rdkafka-perf-latency.txt")
            with open(path) as f:
                latencies = sorted(int(x) / 1000.0 for x in f if x.strip())
            os.unlink(path)
            out["p50_ms"], out["p99_ms"] = percentile(latencies, 0.5), percentile(latencies, 0.99)
        return out
    line = next((x for x in stdout.splitlines() if x.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"no JSON line from {client}: {stdout[-800:]}")
    r = json.loads(line)
    return {"records": r["acked"], "seconds": r["seconds"], "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"]}


def one_run(args, out, scratch, mode, dataset, codec, size, count, acks, linger, rate, client, round_index):
    topic = fresh_topic(args.bootstrap, client)
    m = consumer_bench.measure(command(client, args.bootstrap, topic, codec, size, count, acks, linger, rate, scratch),
                               timeout=args.timeout)
    r = parse(client, m["stdout"], count, rate, scratch)
    if r["records"] != count:
        raise RuntimeError(f"{client} had {r['records']} of {count} records acknowledged")
    row = {"mode": mode, "dataset": dataset, "codec": codec, "size": size, "acks": acks, "linger_ms": linger,
           "rate": rate, "client": client, "round": round_index, "warmup": round_index < 0, "bytes": count * size,
           **r, "records_per_s": count / r["seconds"],
           **{k: v for k, v in m.items() if k != "stdout"}}
    out.write(json.dumps(row) + "\n")
    out.flush()
    log(f"{mode} {dataset} acks={acks} {client}{' (warm-up)' if row['warmup'] else ''}: "
        f"{row['records_per_s']:,.0f} rec/s, cpu {m['user_s'] + m['sys_s']:.2f} s, rss {m['max_rss_kib'] / 1024:.0f} MiB"
        + (f", p99 {r['p99_ms']:.2f} ms" if r["p99_ms"] is not None else ""))


def rounds(clients, warmup, runs):
    """(round, order): every client once per round; the order rotates by one each round."""
    for round_index in range(-warmup, runs):
        shift = round_index % len(clients)
        yield round_index, clients[shift:] + clients[:shift]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default=os.environ.get("SLUICE_BROKER", "127.0.0.1:19092"))
    parser.add_argument("--label", default="local", help="results go to bench/results/producer-LABEL/")
    parser.add_argument("--records", type=int, default=2_000_000, help="100 B records per run (1 KiB: a tenth)")
    parser.add_argument("--runs", type=int, default=5, help="measured rounds per dataset and acks")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured rounds before them")
    parser.add_argument("--clients", default=",".join(ALL_CLIENTS))
    parser.add_argument("--datasets", default=",".join(d[0] for d in DATASETS))
    parser.add_argument("--acks", default=",".join(ACKS))
    parser.add_argument("--linger-ms", type=int, default=5, help="linger of the throughput runs (Java 4.x's default)")
    parser.add_argument("--latency-rate", type=int, default=10_000, help="records/s of the latency runs (0: none)")
    parser.add_argument("--latency-seconds", type=int, default=10)
    parser.add_argument("--latency-clients", default=",".join(c for c in ALL_CLIENTS if c != "rdkafka-perf"),
                        help="clients of the latency runs (default: all but rdkafka-perf, whose paced -r -l mode "
                             "stalled after 13,000-40,000 of 100,000 records in the smoke runs; the rdkafka crate "
                             "row is librdkafka's there)")
    parser.add_argument("--timeout", type=int, default=900, help="seconds before a run is killed and fails")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--update-benchmarks-md", action="store_true",
                        help="write the tables into BENCHMARKS.md's generated producer section")
    args = parser.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in ALL_CLIENTS:
            raise SystemExit(f"unknown client {c}; known: {', '.join(ALL_CLIENTS)}")
    datasets = [d for d in DATASETS if d[0] in args.datasets.split(",")]
    acks_list = [a for a in args.acks.split(",") if a]
    for a in acks_list:
        if a not in ACKS:
            raise SystemExit(f"acks must be all or leader, not {a}")
    consumer_bench.broker_pid()
    if not args.no_build:
        build(clients)
    for c in clients:
        if not os.path.exists(BINARY[c]):
            raise SystemExit(f"{BINARY[c]} is missing: run without --no-build")
    out_dir = os.path.join(BENCH, "results", f"producer-{args.label}")
    os.makedirs(out_dir, exist_ok=True)
    started = time.time()
    with open(os.path.join(out_dir, "runs.jsonl"), "w") as out, tempfile.TemporaryDirectory(prefix="producer-") as scratch:
        for name, codec, size, fraction in datasets:
            count = max(1, int(args.records * fraction))
            for acks in acks_list:
                for round_index, order in rounds(clients, args.warmup, args.runs):
                    for client in order:
                        one_run(args, out, scratch, "throughput", name, codec, size, count, acks, args.linger_ms, 0,
                                client, round_index)
        if args.latency_rate:
            # linger_ms=0, a fixed modest rate, 100 B uncompressed, acks=all (idempotent).
            count = args.latency_rate * args.latency_seconds
            paced = [c for c in clients if c in args.latency_clients.split(",")]
            for round_index, order in rounds(paced, args.warmup, args.runs):
                for client in order:
                    one_run(args, out, scratch, "latency", "none-100b", "none", 100, count, "all", 0, args.latency_rate,
                            client, round_index)
    minutes = (time.time() - started) / 60
    log(f"runs in {os.path.relpath(out_dir, ROOT)}/runs.jsonl ({minutes:.1f} min)")
    summary = [sys.executable, os.path.join(BENCH, "producer_summary.py"), out_dir,
               "--command", "python3 bench/producer.py " + " ".join(sys.argv[1:]), "--minutes", f"{minutes:.1f}"]
    if args.update_benchmarks_md:
        summary.append("--update-benchmarks-md")
    subprocess.run(summary, check=True)


if __name__ == "__main__":
    main()
