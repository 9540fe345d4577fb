#!/usr/bin/env python3
"""The floor of bench/avro.py: reads COUNT records of TOPIC from the start with Python
confluent-kafka's DeserializingConsumer and AvroDeserializer (fastavro), counting the records as
they are deserialized (nothing is written), and prints the count last.

    avro_python_floor.py BOOTSTRAP REGISTRY_URL TOPIC COUNT
"""
import sys
import time
import uuid

from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer


def main():
    bootstrap, url, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-avro-floor-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "value.deserializer": AvroDeserializer(SchemaRegistryClient({"url": url})),
    })
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 600
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            raise SystemExit(f"consume error: {message.error()}")
        if message.value() is not None:
            seen += 1
    consumer.close()
    print(seen)


if __name__ == "__main__":
    main()
