#!/usr/bin/env python3
"""Reads COUNT records of TOPIC from the start with Confluent's Python deserializer
(confluent-kafka's AvroDeserializer: it reads the framing, fetches the writer's schema by id
from the registry and decodes with fastavro; with `json`, its JSONDeserializer, which also
validates each value against the writer's JSON Schema), and prints one JSON line per record: its value
in the forms `sluice read` writes (dates and timestamps as ISO 8601 / RFC 3339 text, decimals
as {"decimal_text": ...}, bytes as {"utf8"} or {"base64"}, uuids as text), computed with
Python's own formatting.

    consume_avro.py BOOTSTRAP REGISTRY_URL TOPIC COUNT [json]

Test-only (pip install 'confluent-kafka[avro,schemaregistry]' fastavro). Not Sluice's code.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer


def plain(value):
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        try:
            return {"utf8": value.decode("utf-8")}
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, decimal.Decimal):
        return {"decimal_text": str(value)}
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def main():
    bootstrap, url, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    registry = SchemaRegistryClient({"url": url})
    if len(sys.argv) > 5 and sys.argv[5] == "json":
        deserializer = JSONDeserializer(None, schema_registry_client=registry)
    else:
        deserializer = AvroDeserializer(registry)
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"consume-avro-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "value.deserializer": deserializer,
    })
    consumer.subscribe([topic])
    seen = 0
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=60)
    while seen < count and datetime.datetime.now() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            raise SystemExit(f"consume error: {message.error()}")
        print(json.dumps(plain(message.value())))
        seen += 1
    consumer.close()
    if seen < count:
        raise SystemExit(f"only {seen} of {count} records within 60 s")


if __name__ == "__main__":
    main()
