#!/usr/bin/env python3
"""Produces Avro records whose schema is built from schema references, with Confluent's Python
serializer (confluent-kafka's AvroSerializer resolving the references through the registry, as
its deserializer would), to a real Kafka broker; prints one JSON line per record holding what
the record's row in `sluice read`'s JSON Lines must hold.

The chain, each schema registered under its own subject before the next names it:
  <topic>-color  shop.Color  an enum
  <topic>-line   shop.Line   {sku: string, color: shop.Color}, referencing <topic>-color
  <topic>-value  shop.Order  {id, line: shop.Line, lines: [shop.Line], favourite: [null, shop.Color]},
                             referencing <topic>-line only (shop.Color comes through it)

    produce_avro_references.py BOOTSTRAP REGISTRY_URL TOPIC [COUNT]

Test-only (pip install confluent-kafka fastavro). Not Sluice's code: the bytes are theirs.
"""
import json
import sys

from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import StringSerializer

COLOR = {"type": "enum", "name": "Color", "namespace": "shop", "symbols": ["RED", "GREEN", "BLUE"]}
LINE = {
    "type": "record", "name": "Line", "namespace": "shop",
    "fields": [{"name": "sku", "type": "string"}, {"name": "color", "type": "shop.Color"}],
}
ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "line", "type": "shop.Line"},
        {"name": "lines", "type": {"type": "array", "items": "shop.Line"}},
        {"name": "favourite", "type": ["null", "shop.Color"], "default": None},
    ],
}


def main():
    bootstrap, url, topic = sys.argv[1:4]
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    registry = SchemaRegistryClient({"url": url})
    registry.register_schema(f"{topic}-color", Schema(json.dumps(COLOR), "AVRO"))
    color_version = registry.get_latest_version(f"{topic}-color").version
    line_refs = [SchemaReference("shop.Color", f"{topic}-color", color_version)]
    registry.register_schema(f"{topic}-line", Schema(json.dumps(LINE), "AVRO", line_refs))
    line_version = registry.get_latest_version(f"{topic}-line").version
    order_refs = [SchemaReference("shop.Line", f"{topic}-line", line_version)]
    serializer = AvroSerializer(registry, Schema(json.dumps(ORDER), "AVRO", order_refs), conf={"auto.register.schemas": True})
    producer = SerializingProducer({
        "bootstrap.servers": bootstrap,
        "key.serializer": StringSerializer("utf_8"),
        "value.serializer": serializer,
        "enable.idempotence": True,
    })
    colors = COLOR["symbols"]
    for n in range(count):
        line = lambda m: {"sku": f"sku-{n}-{m}", "color": colors[(n + m) % 3]}
        order = {
            "id": f"order-{n}",
            "line": line(0),
            "lines": [line(m) for m in range(n % 3)],
            "favourite": None if n % 2 else colors[n % 3],
        }
        producer.produce(topic, key=f"k{n}", value=order)
        print(json.dumps(order))
    left = producer.flush(30)
    if left:
        sys.exit(f"{left} records were not delivered within 30 s")


if __name__ == "__main__":
    main()
