#!/usr/bin/env python3
"""Reads COUNT records of TOPIC from the start with Confluent's Python deserializer
(confluent-kafka's AvroDeserializer: it reads the framing, fetches the writer's schema by id
from the registry and decodes with fastavro; with `json`, its JSONDeserializer, which also
validates each value against the writer's JSON Schema), and prints one JSON line per record: its value
in the forms `sluice read` writes (dates and timestamps as ISO 8601 / RFC 3339 text, decimals
as {"decimal_text": ...}, bytes as {"utf8"} or {"base64"}, uuids as text), computed with
Python's own formatting.

    consume_avro.py BOOTSTRAP REGISTRY_URL TOPIC COUNT [json] [--count-only]

`--count-only` prints only the number of values deserialized (bench/avro.py's Python floor).

Test-only (pip install 'confluent-kafka[avro,schemaregistry]' fastavro). Not Sluice's code.
"""
import base64
import datetime
import decimal
import json
import sys
import uuid

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from consume_common import consume


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
    if "json" in sys.argv[5:]:
        deserializer = JSONDeserializer(None, schema_registry_client=registry)
    else:
        deserializer = AvroDeserializer(registry)
    if "--count-only" in sys.argv:
        # bench/avro.py's floor: the values deserialized, nothing printed but their number.
        seen = []
        consume(bootstrap, topic, count, deserializer, seen.append, seconds=600)
        print(len(seen))
        return
    consume(bootstrap, topic, count, deserializer, lambda value: print(json.dumps(plain(value))))


if __name__ == "__main__":
    main()
