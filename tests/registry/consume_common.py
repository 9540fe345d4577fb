"""Shared by the test scripts that read a topic back with one of Confluent's Python
deserializers (consume_avro.py, produce_protobuf.py --consume) and by bench/avro.py's floor:
`consume` reads `count` records of `topic` from the start, calling `on_value` with each
deserialized value, and fails when they do not all arrive within `seconds`."""
import time
import uuid

from confluent_kafka import DeserializingConsumer


def consume(bootstrap, topic, count, deserializer, on_value, seconds=60):
    consumer = DeserializingConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"sluice-test-consume-{uuid.uuid4()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "value.deserializer": deserializer,
    })
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + seconds
    while seen < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            raise SystemExit(f"consume error: {message.error()}")
        on_value(message.value())
        seen += 1
    consumer.close()
    if seen < count:
        raise SystemExit(f"only {seen} of {count} records within {seconds} s")
