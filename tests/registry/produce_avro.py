#!/usr/bin/env python3
"""Produces Avro records with Confluent's Python serializer (confluent-kafka's AvroSerializer,
which registers the schema and frames each value: magic 0, schema id, fastavro's binary datum)
to a real Kafka broker, and prints one JSON line per record saying what was serialized, in
plain terms Sluice's test compares against field by field: decimals as exact text, uuids as
text, dates as days, times and timestamps as integers in the schema's unit, bytes as hex,
unions as {"branch": <type name>, "value": ...}.

    produce_avro.py BOOTSTRAP REGISTRY_URL TOPIC [COUNT] [--rows] [--doc] [--avro-key]

--rows prints instead what each record's row in `sluice read`'s JSON Lines must hold, computed
here with Python's own formatting (isoformat, base64), not Sluice's: dates and times as ISO
8601 / RFC 3339 text in the schema's unit, bytes as {"utf8"} or {"base64"}, decimals as
{"decimal_text": ...} (the row holds them as JSON numbers of exactly that text), unions as the
branch's value, the nested record in full. --doc registers the schema with a `doc` attribute: a
second schema version (a new id) with the same fields. --avro-key serializes the keys with an
AvroSerializer too (subject TOPIC-key, a record with a string, an enum, a date and a long), and
--rows then also says the `_sluice_key_decoded` column a `key_format: avro` read must write.

Test-only (pip install confluent-kafka fastavro). Not Sluice's code: the bytes are theirs.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import StringSerializer

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "flag", "type": "boolean"},
        {"name": "qty", "type": "int"},
        {"name": "big", "type": "long"},
        {"name": "ratio", "type": "float"},
        {"name": "score", "type": "double"},
        {"name": "blob", "type": "bytes"},
        {"name": "nothing", "type": "null"},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tag", "type": {"type": "fixed", "name": "Tag", "size": 4}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {"name": "amount", "type": {"type": "fixed", "name": "Amount", "size": 8, "logicalType": "decimal", "precision": 18, "scale": 2}},
        {"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "t_ms", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "t_us", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts_ms", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "ts_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "lts_ms", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "lts_us", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {"name": "note", "type": ["null", "string"]},
        {"name": "either", "type": ["null", "long", "string", "Color"]},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"}, {"name": "n", "type": "int"}]}}},
        {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}},
        {"name": "next", "type": ["null", "Order"]},
    ],
}

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def micros(dt):
    delta = dt - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def local_micros(dt):
    return micros(dt.replace(tzinfo=UTC))


def order(i):
    ts = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000 + i, tzinfo=UTC)
    local = datetime.datetime(2023, 12, 31, 23, 59, 59, 123456)
    value = {
        "id": f"order-{i}-ünïcode", "flag": i % 2 == 0, "qty": -i * 1000, "big": 2**62 + i,
        "ratio": 1.5 + i, "score": -0.1 * (i + 1), "blob": bytes([i, 0, 255]), "nothing": None,
        "color": ["RED", "GREEN", "BLUE"][i % 3], "tag": b"tg" + bytes([i, 0x80]),
        "price": decimal.Decimal("-12345.678") + i, "amount": decimal.Decimal("9999999999999999.99") - i,
        "ref": uuid.UUID(int=0x6f1c2e0a_0000_4000_8000_000000000000 + i),
        "day": datetime.date(2024, 2, 29) + datetime.timedelta(days=i),
        "t_ms": datetime.time(13, 14, 15, 16000), "t_us": datetime.time(23, 59, 59, 999999 - i),
        "ts_ms": ts, "ts_us": ts, "lts_ms": local, "lts_us": local,
        "note": None if i % 2 else f"note {i}",
        # fastavro's tuple notation picks the enum branch (a bare "BLUE" would be the string).
        "either": [None, 42 + i, "text", ("shop.Color", "BLUE")][i % 4],
        "lines": [{"sku": f"s{j}", "n": j} for j in range(i % 3)],
        "attrs": {"a": 1.25, "b": None} if i % 2 == 0 else {},
        "next": None if i % 3 else inner_order(i),
    }
    expected = {
        "id": value["id"], "flag": value["flag"], "qty": value["qty"], "big": value["big"],
        "ratio": value["ratio"], "score": value["score"], "blob": value["blob"].hex(), "nothing": None,
        "color": value["color"], "tag": value["tag"].hex(), "price": str(value["price"]),
        "amount": str(value["amount"]), "ref": str(value["ref"]),
        "day": (value["day"] - datetime.date(1970, 1, 1)).days,
        "t_ms": ((13 * 60 + 14) * 60 + 15) * 1000 + 16,
        "t_us": ((23 * 60 + 59) * 60 + 59) * 1_000_000 + 999999 - i,
        "ts_ms": micros(ts) // 1000, "ts_us": micros(ts),
        "lts_ms": local_micros(local) // 1000, "lts_us": local_micros(local),
        "note": value["note"],
        "either": [None, {"branch": "long", "value": 42 + i}, {"branch": "string", "value": "text"},
                   {"branch": "Color", "value": "BLUE"}][i % 4],
        "lines": value["lines"], "attrs": value["attrs"],
        "next": None if i % 3 else {"id": value["next"]["id"]},
    }
    return value, expected


def bytes_form(data):
    try:
        return {"utf8": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def zulu(dt, timespec):
    return dt.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")


def row_form(value):
    """The row columns `sluice read` must write for an Order value (see the module docs)."""
    either = value["either"]
    if isinstance(either, tuple):
        either = either[1]
    return {
        "id": value["id"], "flag": value["flag"], "qty": value["qty"], "big": value["big"],
        "ratio": value["ratio"], "score": value["score"], "blob": bytes_form(value["blob"]), "nothing": None,
        "color": value["color"], "tag": bytes_form(value["tag"]),
        "price": {"decimal_text": str(value["price"])}, "amount": {"decimal_text": str(value["amount"])},
        "ref": str(value["ref"]), "day": value["day"].isoformat(),
        "t_ms": value["t_ms"].isoformat(timespec="milliseconds"),
        "t_us": value["t_us"].isoformat(timespec="microseconds"),
        "ts_ms": zulu(value["ts_ms"], "milliseconds"), "ts_us": zulu(value["ts_us"], "microseconds"),
        "lts_ms": value["lts_ms"].isoformat(timespec="milliseconds"),
        "lts_us": value["lts_us"].isoformat(timespec="microseconds"),
        "note": value["note"], "either": either, "lines": value["lines"], "attrs": value["attrs"],
        "next": None if value["next"] is None else row_form(value["next"]),
    }


KEY_SCHEMA = {
    "type": "record", "name": "OrderKey", "namespace": "shop",
    "fields": [
        {"name": "customer", "type": "string"},
        {"name": "region", "type": {"type": "enum", "name": "Region", "symbols": ["EU", "US", "APAC"]}},
        {"name": "since", "type": {"type": "int", "logicalType": "date"}},
        {"name": "n", "type": "long"},
    ],
}


def order_key(i):
    """The Avro key of record i, and the JSON `_sluice_key_decoded` must hold for it."""
    since = datetime.date(2024, 2, 28) + datetime.timedelta(days=i)
    key = {"customer": f"customer-{i}", "region": ["EU", "US", "APAC"][i % 3], "since": since, "n": -(2**40) * i}
    return key, dict(key, since=since.isoformat())


def inner_order(i):
    # A nested Order (the record refers to itself), with the same fields at fixed values.
    value, _ = order(i + 1)
    value["next"] = None
    value["id"] = f"inner-{i}"
    return value


def main():
    flags = [arg for arg in sys.argv[1:] if arg.startswith("--")]
    args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    bootstrap, registry_url, topic = args[:3]
    schema = dict(SCHEMA, doc="version with a doc") if "--doc" in flags else SCHEMA
    registry = SchemaRegistryClient({"url": registry_url})
    serializer = AvroSerializer(registry, json.dumps(schema))
    avro_key = "--avro-key" in flags
    key_serializer = AvroSerializer(registry, json.dumps(KEY_SCHEMA)) if avro_key else StringSerializer("utf_8")
    producer = SerializingProducer({"bootstrap.servers": bootstrap, "key.serializer": key_serializer,
                                    "value.serializer": serializer, "enable.idempotence": True})
    count = int(args[3]) if len(args) > 3 else 12
    expected = []
    for i in range(count):
        value, want = order(i)
        key, key_row = order_key(i) if avro_key else (f"k{i}", None)
        producer.produce(topic, key=key, value=value)
        row = row_form(value) if "--rows" in flags else want
        if avro_key and "--rows" in flags:
            row["_sluice_key_decoded"] = key_row
        expected.append(row)
    producer.flush(30)
    for want in expected:
        print(json.dumps(want))


if __name__ == "__main__":
    main()
