#!/usr/bin/env python3
"""Produces JSON Schema records with Confluent's Python serializer (confluent-kafka's
JSONSerializer, which registers the schema under `<topic>-value` and frames each value: magic 0,
schema id, the JSON text) to a real Kafka broker, and prints one JSON line per record: the value
it serialized, which `sluice read --format json_schema`'s row must hold column for column.

    produce_json_schema.py BOOTSTRAP REGISTRY_URL TOPIC [COUNT]
    produce_json_schema.py --register-avro REGISTRY_URL SUBJECT    # prints the new schema id

The second form registers a small Avro schema (for the test that a JSON Schema topic refuses an
Avro id). Test-only (pip install 'confluent-kafka[json,schemaregistry]'). Not Sluice's code: the
bytes are theirs.
"""
import json
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import StringSerializer

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Reading",
    "type": "object",
    "properties": {
        "sensor": {"type": "string"},
        "value": {"type": "number"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}},
    },
    "required": ["sensor", "value", "count", "ok"],
}


def reading(i):
    return {
        "sensor": f"s-{i}",
        "value": i * 1.25 - 3,
        "count": 10_000_000_000 + i,
        "ok": i % 2 == 0,
        "note": None if i % 3 == 1 else f"note \u00e9 {i}",
        "tags": [f"t{j}" for j in range(i % 4)],
        "where": {"lat": 48.85 + i / 1000, "lon": 2.35},
    }


def main():
    if sys.argv[1] == "--register-avro":
        url, subject = sys.argv[2], sys.argv[3]
        client = SchemaRegistryClient({"url": url})
        avro = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]})
        print(client.register_schema(subject, Schema(avro, "AVRO")))
        return
    # --key: keys by a JSONSerializer too (subject TOPIC-key); each printed line then also has
    # the `_sluice_key_decoded` a `key_format: json_schema` read must write.
    args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    with_key = "--key" in sys.argv[1:]
    bootstrap, url, topic = args[0], args[1], args[2]
    count = int(args[3]) if len(args) > 3 else 10
    registry = SchemaRegistryClient({"url": url})
    key_schema = {"type": "object", "properties": {"site": {"type": "string"}, "rack": {"type": "integer"}}}
    producer = SerializingProducer({
        "bootstrap.servers": bootstrap,
        "key.serializer": JSONSerializer(json.dumps(key_schema), registry) if with_key else StringSerializer("utf_8"),
        "value.serializer": JSONSerializer(json.dumps(SCHEMA), registry),
    })
    for i in range(count):
        value = reading(i)
        key = {"site": f"site-{i % 3}", "rack": i} if with_key else f"k{i}"
        producer.produce(topic, key=key, value=value, partition=0)
        print(json.dumps(dict(value, _sluice_key_decoded=key) if with_key else value))
    producer.flush(30)


if __name__ == "__main__":
    main()
