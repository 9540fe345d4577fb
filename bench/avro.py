#!/usr/bin/env python3
"""The Avro read benchmark (issue #18): rows/s of `sluice read` (the static musl binary users
ship) over a topic of nested order records written as Avro (Confluent framing, the schema in the
registry), against the same records as JSON and as Protobuf, and Python confluent-kafka's
AvroDeserializer over the Avro topic as a floor.

    tests/kafka/broker.sh start && tests/registry/registry.sh start && scripts/build-static.sh
    python3 bench/avro.py --records 400000 --runs 5 --warmup 1 --label avro-2026-12-07

Dataset (deterministic, generated here): orders with 1 to 20 lines each (mixed sizes: 0.3 to
about 3 KiB as JSON), each line a nested record with an enum; a nested address record or null,
a map of attributes, a nullable note, a decimal price, a timestamp-micros, a date and a uuid.
Both topics (4 partitions) are written once per record count by `sluice write` from the same
JSON Lines file: as they are into `bench-json-orders-N`, with `format: avro` and
`--value-schema` into `bench-avro-orders-N`, and with `format: protobuf` and a descriptor set
(`protobuf_descriptor_set`, the same fields) into `bench-protobuf-orders-N` (the encoders that
Confluent's Python deserializers read back in connector/tests/avro_registry.rs). A topic
already holding N records is reused.

Each measured run reads a whole topic with `sluice read --mode bounded` into a fresh directory
(rows are checked: N), or runs `tests/registry/consume_avro.py --count-only` (a
DeserializingConsumer with the AvroDeserializer; values counted as they are deserialized,
nothing written). Rounds alternate
the order of the clients; per client the median of the measured runs: wall time, rows/s, CPU
(user + system, wait4) per million rows, peak RSS (/usr/bin/time). Results in
bench/results/LABEL/ (runs.csv, report.md).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
import run  # noqa: E402  (measure, machine_info, log)

SLUICE = os.path.join(ROOT, "target", "x86_64-unknown-linux-musl", "release", "sluice")

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "customer", "type": "long"},
        {"name": "ok", "type": "boolean"},
        {"name": "score", "type": "double"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ship", "type": ["null", {"type": "record", "name": "Address", "fields": [
            {"name": "street", "type": "string"}, {"name": "city", "type": "string"},
            {"name": "zip", "type": "string"}]}], "default": None},
        {"name": "attrs", "type": {"type": "map", "values": "string"}},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"},
            {"name": "unit", "type": "double"},
            {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}}]}}},
    ],
}


def protobuf_descriptor_set():
    """The same order as a Protobuf message `bench.Order` (a serialized FileDescriptorSet of
    bench/order.proto, what `protoc --descriptor_set_out` gives; its well-known imports are built
    into Sluice and not registered): decimal as confluent.type.Decimal, the timestamp as
    google.protobuf.Timestamp, the date as google.type.Date, the note proto3 `optional`, the
    address a message, attrs a map, lines a repeated message with an enum."""
    from google.protobuf import descriptor_pb2
    F = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="bench/order.proto", package="bench", syntax="proto3")
    proto.dependency.extend(["google/protobuf/timestamp.proto", "confluent/type/decimal.proto",
                             "google/type/date.proto"])
    color = proto.enum_type.add(name="Color")
    for number, name in enumerate(["RED", "GREEN", "BLUE"]):
        color.value.add(name=name, number=number)

    def field(message, name, number, kind, type_name=None, repeated=False, oneof=None):
        f = message.field.add(name=name, number=number, type=kind,
                              label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
        if type_name:
            f.type_name = type_name
        if oneof is not None:
            f.oneof_index = oneof
            f.proto3_optional = True

    address = proto.message_type.add(name="Address")
    for number, name in enumerate(["street", "city", "zip"], 1):
        field(address, name, number, F.TYPE_STRING)
    line = proto.message_type.add(name="Line")
    field(line, "sku", 1, F.TYPE_STRING)
    field(line, "qty", 2, F.TYPE_INT32)
    field(line, "unit", 3, F.TYPE_DOUBLE)
    field(line, "color", 4, F.TYPE_ENUM, ".bench.Color")
    order_ = proto.message_type.add(name="Order")
    entry = order_.nested_type.add(name="AttrsEntry")
    entry.options.map_entry = True
    field(entry, "key", 1, F.TYPE_STRING)
    field(entry, "value", 2, F.TYPE_STRING)
    order_.oneof_decl.add(name="_note")
    field(order_, "id", 1, F.TYPE_STRING)
    field(order_, "customer", 2, F.TYPE_INT64)
    field(order_, "ok", 3, F.TYPE_BOOL)
    field(order_, "score", 4, F.TYPE_DOUBLE)
    field(order_, "price", 5, F.TYPE_MESSAGE, ".confluent.type.Decimal")
    field(order_, "at", 6, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    field(order_, "day", 7, F.TYPE_MESSAGE, ".google.type.Date")
    field(order_, "ref", 8, F.TYPE_STRING)
    field(order_, "note", 9, F.TYPE_STRING, oneof=0)
    field(order_, "ship", 10, F.TYPE_MESSAGE, ".bench.Address")
    field(order_, "attrs", 11, F.TYPE_MESSAGE, ".bench.Order.AttrsEntry", repeated=True)
    field(order_, "lines", 12, F.TYPE_MESSAGE, ".bench.Line", repeated=True)
    return descriptor_pb2.FileDescriptorSet(file=[proto]).SerializeToString()


def order(i):
    lines = 1 + (i * 7919) % 20
    return {
        "id": f"order-{i:09d}",
        "customer": (i * 2654435761) % 10_000_000,
        "ok": i % 3 != 0,
        "score": (i % 1000) / 8,
        "price": json.loads(f"{(i * 37) % 100000}.{i % 100:02d}"),
        "at": f"2026-12-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}.{i % 1_000_000:06d}Z",
        "day": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}",
        "ref": f"123e4567-e89b-12d3-a456-{i:012d}",
        "note": None if i % 4 else f"note for order {i}: leave at the door \u00e9",
        "ship": None if i % 5 == 0 else {"street": f"{i % 300} rue de la Paix", "city": "Paris", "zip": f"75{i % 100:03d}"},
        "attrs": {f"k{j}": f"v{(i + j) % 97}" for j in range(i % 4)},
        "lines": [{"sku": f"SKU-{(i + j) % 5000:05d}", "qty": 1 + j % 9, "unit": ((i + j) % 400) / 4,
                   "color": ["RED", "GREEN", "BLUE"][(i + j) % 3]} for j in range(lines)],
    }


def topic_records(bootstrap, topic):
    """Records in `topic` (sum of end offsets), or None when it does not exist."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-avro-probe"})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = metadata.topics.get(topic)
        if partitions is None or partitions.error is not None:
            return None
        total = 0
        for p in partitions.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def prepare(bootstrap, registry, records, scratch):
    from confluent_kafka.admin import AdminClient, NewTopic
    topics = {"json": f"bench-json-orders-{records}", "avro": f"bench-avro-orders-{records}",
              "protobuf": f"bench-protobuf-orders-{records}"}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    lines_path = os.path.join(scratch, "orders.jsonl")
    with open(lines_path, "w") as f:
        for i in range(records):
            f.write(json.dumps(order(i), separators=(",", ":")) + "\n")
    json_bytes = os.path.getsize(lines_path)
    schema_path = os.path.join(scratch, "order.avsc")
    with open(schema_path, "w") as f:
        json.dump(SCHEMA, f)
    descriptor_path = os.path.join(scratch, "order.pb")
    with open(descriptor_path, "wb") as f:
        f.write(protobuf_descriptor_set())
    for kind, topic in topics.items():
        if topic_records(bootstrap, topic) == records:
            run.log(f"{topic}: already holds {records} records")
            continue
        if topic_records(bootstrap, topic) is not None:
            admin.delete_topics([topic])[topic].result()
        admin.create_topics([NewTopic(topic, 4, 1)])[topic].result()
        entry = {"name": topic, "format": kind}
        if kind == "protobuf":
            entry["value_message"] = "bench.Order"
        config = os.path.join(scratch, f"write-{kind}.json")
        with open(config, "w") as f:
            json.dump({"brokers": [bootstrap], "topics": [entry], "schema_registry": {"url": registry}}, f)
        command = [SLUICE, "write", "--config", config, "--topic", topic, "--input", lines_path,
                   "--offsets-topic", "bench-avro-offsets", "--job-id", f"bench-{topic}",
                   "--chunk-records", "20000"]
        if kind == "avro":
            command += ["--value-schema", schema_path]
        if kind == "protobuf":
            command += ["--value-schema", descriptor_path]
        run.log(f"writing {topic}")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        if topic_records(bootstrap, topic) != records:
            raise RuntimeError(f"{topic} does not hold {records} records after the write")
    return topics, json_bytes


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--label", default="avro")
    parser.add_argument("--bootstrap", default="127.0.0.1:19092")
    parser.add_argument("--registry", default="http://127.0.0.1:18081")
    parser.add_argument("--no-python", action="store_true", help="leave out the Python floor")
    args = parser.parse_args()
    if not os.path.exists(SLUICE):
        raise SystemExit(f"{SLUICE} is missing: run scripts/build-static.sh")
    out_dir = os.path.join(BENCH, "results", args.label)
    os.makedirs(out_dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="bench-avro-")
    try:
        topics, json_bytes = prepare(args.bootstrap, args.registry, args.records, scratch)
        clients = ["sluice read avro", "sluice read protobuf", "sluice read json"] + (
            [] if args.no_python else ["python AvroDeserializer"])
        rows = []
        for round_index in range(-args.warmup, args.runs):
            order_ = clients if round_index % 2 == 0 else list(reversed(clients))
            for client in order_:
                dest = os.path.join(scratch, "out")
                shutil.rmtree(dest, ignore_errors=True)
                if client.startswith("sluice read"):
                    kind = client.split()[-1]
                    config = os.path.join(scratch, f"read-{kind}.json")
                    with open(config, "w") as f:
                        json.dump({"brokers": [args.bootstrap], "topics": [{"name": topics[kind], "format": kind}],
                                   "schema_registry": {"url": args.registry}}, f)
                    m = run.measure([SLUICE, "read", "--config", config, "--dest", dest, "--mode", "bounded"])
                    written = 0
                    for base, _, files in os.walk(os.path.join(dest, topics[kind], "segments")):
                        for name in files:
                            with open(os.path.join(base, name), "rb") as f:
                                written += sum(1 for _ in f)
                else:
                    floor = os.path.join(ROOT, "tests", "registry", "consume_avro.py")
                    m = run.measure([sys.executable, floor, args.bootstrap, args.registry, topics["avro"],
                                     str(args.records), "--count-only"])
                    written = int(m["stdout"].split()[-1])
                shutil.rmtree(dest, ignore_errors=True)
                if written != args.records:
                    raise RuntimeError(f"{client} gave {written} rows of {args.records}")
                row = {"client": client, "round": round_index, "warmup": round_index < 0, "records": written,
                       "wall_s": m["wall_s"], "user_s": m["user_s"], "sys_s": m["sys_s"],
                       "max_rss_kib": m["max_rss_kib"]}
                rows.append(row)
                run.log(f"{client}{' (warm-up)' if row['warmup'] else ''}: {written / m['wall_s']:,.0f} rows/s, "
                        f"cpu {m['user_s'] + m['sys_s']:.2f} s, rss {m['max_rss_kib'] / 1024:.0f} MiB")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    with open(os.path.join(out_dir, "runs.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    measured = [r for r in rows if not r["warmup"]]
    summary = {}
    for client in clients:
        mine = [r for r in measured if r["client"] == client]
        wall = statistics.median(r["wall_s"] for r in mine)
        cpu = statistics.median(r["user_s"] + r["sys_s"] for r in mine)
        summary[client] = {"wall_s": wall, "rows_per_s": args.records / wall,
                           "cpu_s_per_million": cpu / args.records * 1e6,
                           "rss_mib": statistics.median(r["max_rss_kib"] for r in mine) / 1024}
    avro, plain = summary["sluice read avro"], summary["sluice read json"]
    info = run.machine_info()
    lines = [
        f"# Avro read benchmark ({args.label})",
        "",
        f"Run: `python3 bench/avro.py --records {args.records} --runs {args.runs} --warmup {args.warmup} "
        f"--label {args.label}`; {args.records:,} orders (JSON Lines {json_bytes / args.records:.0f} B per record "
        f"on average), 4 partitions, medians of {args.runs} runs; machine: {info.get('cpu', '?')}; "
        f"load average at the end: {info.get('load_average', '?')}.",
        "",
        "| client | wall s | rows/s | CPU s per million rows | peak RSS MiB |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for client, s in summary.items():
        lines.append(f"| {client} | {s['wall_s']:.2f} | {s['rows_per_s']:,.0f} | {s['cpu_s_per_million']:.2f} | "
                     f"{s['rss_mib']:.0f} |")
    lines += ["", f"Avro per row against JSON: {avro['rows_per_s'] / plain['rows_per_s']:.2f}x the rows/s, "
                  f"{avro['cpu_s_per_million'] / plain['cpu_s_per_million']:.2f}x the CPU (goal: rows/s at least 1.0x)."]
    protobuf = summary["sluice read protobuf"]
    lines.append(f"Protobuf per row against JSON: {protobuf['rows_per_s'] / plain['rows_per_s']:.2f}x the rows/s, "
                 f"{protobuf['cpu_s_per_million'] / plain['cpu_s_per_million']:.2f}x the CPU.")
    if "python AvroDeserializer" in summary:
        python = summary["python AvroDeserializer"]
        lines.append(f"Against Python's AvroDeserializer (the floor): {avro['rows_per_s'] / python['rows_per_s']:.1f}x "
                     f"the rows/s.")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(report)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump({"summary": summary, "machine": info, "records": args.records, "json_bytes": json_bytes}, f, indent=2)
    print(report)


if __name__ == "__main__":
    main()
