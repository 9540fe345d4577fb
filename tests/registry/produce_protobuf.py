#!/usr/bin/env python3
"""Produces Protobuf records with Confluent's Python serializer (confluent-kafka's
ProtobufSerializer: it registers the schema under `<topic>-value` as a serialized
FileDescriptorProto, registers the imported `shop/common.proto` as a schema reference, skips the
well-known imports, and frames each value: magic 0, schema id, the message-index array, the
message) to a real Kafka broker, and prints one JSON line per record: what `sluice read
--format protobuf`'s row must hold, computed here with Python's own formatting (isoformat,
base64), not Sluice's.

    produce_protobuf.py BOOTSTRAP REGISTRY_URL TOPIC [COUNT] [--key]
    produce_protobuf.py --consume BOOTSTRAP REGISTRY_URL TOPIC COUNT
    produce_protobuf.py --descriptor-set PATH

The second form reads COUNT records of TOPIC with Confluent's ProtobufDeserializer instead and
prints the same rows computed from the messages it decoded. The third writes the schema as a
FileDescriptorSet with its imports (the well-known ones too), as protoc's --include_imports
does, for `sluice write --value-schema`. --key serializes each key with a
ProtobufSerializer too (subject TOPIC-key; a `shop.Order` of its own) and adds the
`_sluice_key_decoded` a `key_format: protobuf` read must write: the key's row as one object.

The records are `shop.Order`, the file's second message (index array [1]), so the index array
is not the `[0]` shortcut. Its fields: every scalar type, proto3 `optional`, an enum from the
reference, a nested message (repeated), a map, a oneof, a packed repeated int32, and the
well-known Timestamp, StringValue, Struct, confluent.type.Decimal and google.type.Date.
Expected forms: bytes as {"utf8"} or {"base64"}, 64-bit unsigned and decimals as
{"decimal_text": ...} (the row holds a JSON number of exactly that text), timestamps as RFC 3339
with 9 digits, absent fields with presence as null, absent proto3 scalars as their defaults.

The message classes are built at run time from descriptors (descriptor_pb2), so no protoc is
needed. Test-only (pip install 'confluent-kafka[protobuf,schemaregistry]'). Not Sluice's code:
the bytes are theirs.
"""
import base64
import datetime
import decimal
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf import struct_pb2, timestamp_pb2, wrappers_pb2  # noqa: F401 (in the pool)
from google.type import date_pb2  # noqa: F401
from confluent_kafka import SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.confluent.type import decimal_pb2  # noqa: F401
from confluent_kafka.schema_registry.confluent.type.decimal_utils import from_proto_decimal, to_proto_decimal
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import StringSerializer
from consume_common import consume

F = descriptor_pb2.FieldDescriptorProto


def add_field(message, name, number, kind, type_name=None, repeated=False, oneof=None, optional=False):
    field = message.field.add(name=name, number=number, type=kind)
    field.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof
    if optional:
        field.proto3_optional = True
    return field


def build_classes():
    pool = descriptor_pool.Default()
    common = descriptor_pb2.FileDescriptorProto(name="shop/common.proto", package="shop", syntax="proto3")
    address = common.message_type.add(name="Address")
    add_field(address, "city", 1, F.TYPE_STRING)
    add_field(address, "zip", 2, F.TYPE_INT32)
    color = common.enum_type.add(name="Color")
    for number, name in enumerate(["RED", "GREEN", "BLUE"]):
        color.value.add(name=name, number=number)
    pool.Add(common)

    order_file = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    order_file.dependency.extend([
        "shop/common.proto", "google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto",
        "google/protobuf/struct.proto", "confluent/type/decimal.proto", "google/type/date.proto",
    ])
    header = order_file.message_type.add(name="Header")
    add_field(header, "trace", 1, F.TYPE_STRING)
    order = order_file.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    add_field(line, "sku", 1, F.TYPE_STRING)
    add_field(line, "qty", 2, F.TYPE_INT32)
    add_field(line, "color", 3, F.TYPE_ENUM, ".shop.Color")
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    add_field(entry, "key", 1, F.TYPE_STRING)
    add_field(entry, "value", 2, F.TYPE_INT64)
    order.oneof_decl.add(name="pay")
    order.oneof_decl.add(name="_note")
    add_field(order, "id", 1, F.TYPE_INT64)
    add_field(order, "name", 2, F.TYPE_STRING)
    add_field(order, "note", 3, F.TYPE_STRING, oneof=1, optional=True)
    add_field(order, "score", 4, F.TYPE_DOUBLE)
    add_field(order, "ratio", 5, F.TYPE_FLOAT)
    add_field(order, "ok", 6, F.TYPE_BOOL)
    add_field(order, "raw", 7, F.TYPE_BYTES)
    add_field(order, "big", 8, F.TYPE_UINT64)
    add_field(order, "delta", 9, F.TYPE_SINT32)
    add_field(order, "color", 10, F.TYPE_ENUM, ".shop.Color")
    add_field(order, "lines", 11, F.TYPE_MESSAGE, ".shop.Order.Line", repeated=True)
    add_field(order, "counts", 12, F.TYPE_MESSAGE, ".shop.Order.CountsEntry", repeated=True)
    add_field(order, "at", 13, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    add_field(order, "nick", 14, F.TYPE_MESSAGE, ".google.protobuf.StringValue")
    add_field(order, "attrs", 15, F.TYPE_MESSAGE, ".google.protobuf.Struct")
    add_field(order, "ship", 16, F.TYPE_MESSAGE, ".shop.Address")
    add_field(order, "card", 17, F.TYPE_STRING, oneof=0)
    add_field(order, "account", 18, F.TYPE_INT64, oneof=0)
    add_field(order, "nums", 19, F.TYPE_INT32, repeated=True)
    add_field(order, "f32", 20, F.TYPE_FIXED32)
    add_field(order, "sf64", 21, F.TYPE_SFIXED64)
    add_field(order, "price", 22, F.TYPE_MESSAGE, ".confluent.type.Decimal")
    add_field(order, "day", 23, F.TYPE_MESSAGE, ".google.type.Date")
    pool.Add(order_file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def bytes_form(data):
    try:
        return {"utf8": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


COLORS = ["RED", "GREEN", "BLUE"]


def record(Order, i):
    """The message for record i and the row it must become."""
    msg = Order()
    msg.id = -7 + i * 1_000_000_007
    if i % 3 != 1:
        msg.name = f"order \u00e9 {i}"
    if i % 2 == 0:
        msg.note = f"note {i}" if i % 4 else ""
    msg.score = i * 1.5 - 2
    msg.ratio = 0.25 * i
    msg.ok = i % 2 == 1
    raw = bytes([0xFF, i, 0]) if i % 2 else f"txt{i}".encode()
    msg.raw = raw
    msg.big = 2**63 + i
    msg.delta = -i * 1000
    msg.color = i % 3
    for j in range(i % 3):
        line = msg.lines.add(sku=f"sku-{i}-{j}", qty=j)
        line.color = (i + j) % 3
    for j in range(i % 2 + 1):
        msg.counts[f"k{j}"] = 2**40 + j
    seconds, nanos = 1_709_214_330 + i * 86_400, 123_456_789 - i
    msg.at.seconds, msg.at.nanos = seconds, nanos
    if i % 2:
        msg.nick.value = f"nick{i}"
    if i % 3 == 0:
        msg.attrs.update({"k": "v", "n": 1.5 + i, "list": [1, "two", None], "inner": {"ok": True}})
    if i % 2 == 0:
        msg.ship.city = "Paris"
        msg.ship.zip = 75000 + i
    if i % 2:
        msg.card = f"card-{i}"
    else:
        msg.account = 10**12 + i
    msg.nums.extend([i, -i, 2**31 - 1])
    msg.f32 = 4_000_000_000 + i
    msg.sf64 = -(2**62) - i
    price = decimal.Decimal(f"{-1 if i % 2 else 1}{i}.{i:02d}")
    msg.price.CopyFrom(to_proto_decimal(price))
    msg.day.year, msg.day.month, msg.day.day = 2024, 2, 1 + i % 28

    return msg, row_of(msg)


def row_of(msg):
    """The row `sluice read` must write for message `msg`, from the message's own fields."""
    at = datetime.datetime.fromtimestamp(msg.at.seconds, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "id": msg.id,
        "name": msg.name,
        "note": msg.note if msg.HasField("note") else None,
        "score": msg.score,
        "ratio": msg.ratio,
        "ok": msg.ok,
        "raw": bytes_form(msg.raw),
        "big": {"decimal_text": str(msg.big)},
        "delta": msg.delta,
        "color": COLORS[msg.color],
        "lines": [{"sku": l.sku, "qty": l.qty, "color": COLORS[l.color]} for l in msg.lines],
        "counts": {k: v for k, v in msg.counts.items()},
        "at": f"{at}.{msg.at.nanos:09d}Z",
        "nick": msg.nick.value if msg.HasField("nick") else None,
        "attrs": json.loads(json.dumps(dict_of_struct(msg.attrs))) if msg.HasField("attrs") else None,
        "ship": {"city": msg.ship.city, "zip": msg.ship.zip} if msg.HasField("ship") else None,
        "card": msg.card if msg.WhichOneof("pay") == "card" else None,
        "account": msg.account if msg.WhichOneof("pay") == "account" else None,
        "nums": list(msg.nums),
        "f32": msg.f32,
        "sf64": msg.sf64,
        "price": {"decimal_text": str(from_proto_decimal(msg.price))},
        "day": datetime.date(msg.day.year, msg.day.month, msg.day.day).isoformat(),
    }


def dict_of_struct(struct):
    from google.protobuf.json_format import MessageToDict
    return MessageToDict(struct)


def write_descriptor_set(path):
    """Writes the schema as `protoc --include_imports --descriptor_set_out` would: a serialized
    FileDescriptorSet of shop/order.proto and every file it imports, imports first."""
    build_classes()
    pool = descriptor_pool.Default()
    files, seen = descriptor_pb2.FileDescriptorSet(), set()

    def add(name):
        if name in seen:
            return
        seen.add(name)
        descriptor = pool.FindFileByName(name)
        for dependency in descriptor.dependencies:
            add(dependency.name)
        descriptor.CopyToProto(files.file.add())

    add("shop/order.proto")
    with open(path, "wb") as out:
        out.write(files.SerializeToString())


def main():
    if sys.argv[1] == "--descriptor-set":
        write_descriptor_set(sys.argv[2])
        return
    if sys.argv[1] == "--consume":
        deserializer = ProtobufDeserializer(build_classes(), {"use.deprecated.format": False})
        consume(sys.argv[2], sys.argv[4], int(sys.argv[5]), deserializer, lambda msg: print(json.dumps(row_of(msg))))
        return
    args = [arg for arg in sys.argv[1:] if not arg.startswith("--")]
    with_key = "--key" in sys.argv[1:]
    bootstrap, url, topic = args[0], args[1], args[2]
    count = int(args[3]) if len(args) > 3 else 10
    Order = build_classes()
    registry = SchemaRegistryClient({"url": url})
    serializer = lambda: ProtobufSerializer(Order, registry, {"use.deprecated.format": False})
    producer = SerializingProducer({
        "bootstrap.servers": bootstrap,
        "key.serializer": serializer() if with_key else StringSerializer("utf_8"),
        "value.serializer": serializer(),
    })
    for i in range(count):
        msg, row = record(Order, i)
        key = f"k{i}"
        if with_key:
            key, row["_sluice_key_decoded"] = record(Order, 200 + i)
        producer.produce(topic, key=key, value=msg)
        print(json.dumps(row))
    producer.flush(30)


if __name__ == "__main__":
    main()
