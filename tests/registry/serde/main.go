// Command serde produces schema-registry records with franz-go's serializer (github.com/twmb/
// franz-go/pkg/sr: sr.Client registers the schema, sr.Serde frames each value) through franz-go's
// producer (pkg/kgo) to a real Kafka broker, for Sluice's test connector/tests/franz_serde.rs.
// Not Sluice's code: the bytes are franz-go's, hamba/avro's and google.golang.org/protobuf's.
//
//	serde -brokers 127.0.0.1:19092 -registry http://127.0.0.1:18081 -topic T -format avro [-count 12]
//	serde ... -format protobuf [-message order|header] [-index-form short|long]
//
// It prints one JSON line per record, in production order: the payload columns of the row
// `sluice read` must write for it, computed here with Go's own formatting (time.Format,
// encoding/base64, math/big, strconv), not Sluice's:
//
//   - bytes as {"utf8": ...} when valid UTF-8, else {"base64": ...} (standard, padded);
//   - decimals and 64-bit unsigned integers as {"decimal_text": ...}: the row holds a JSON number
//     of exactly that text;
//   - floats by their shortest text in their own width, with ".0" after a whole number;
//   - dates "2006-01-02"; times "15:04:05.000" (millis) or ".000000" (micros); timestamps
//     RFC 3339 in UTC with the unit's digits and "Z" (Protobuf's Timestamp: 9 digits); local
//     timestamps the same without "Z";
//   - Avro unions as the branch's value; Protobuf fields without presence that are not set as
//     their type's default, with presence as null; enum values without a name as their number.
//
// Avro (-format avro): the record franz.Order, registered under <topic>-value, encoded with
// hamba/avro: every primitive, an enum, a fixed, the logical types (decimal on bytes and on
// fixed, uuid, date, time-millis/micros, timestamp-millis/micros, local-timestamp-millis/micros),
// a nested record, arrays (of records, strings, arrays), a map of ["null", double], ["null", T]
// and [T, "null"] unions on both branches, and a five-branch union.
//
// Protobuf (-format protobuf): the file franz/order.proto, built in Go as a FileDescriptorProto
// (no protoc) and registered as Confluent's serializers register one: schema type PROTOBUF, the
// schema text the base64 of the serialized FileDescriptorProto, the imported franz/common.proto
// registered first under its own name as a schema reference, the well-known imports
// (google/protobuf/*, confluent/type/*, google/type/*) not registered. Messages are
// google.golang.org/protobuf dynamicpb messages. -message order (the default) writes franz.Order,
// the file's second message (message index [1]): scalars of every kind, proto3 optional, enums
// (imported, nested, a number without a name), a repeated nested message, maps (string and int32
// keys), a oneof, packed and unpacked repeated fields, the largest field number, and the
// well-known Timestamp, StringValue, confluent.type.Decimal and google.type.Date. -message header
// writes franz.Header, the first message (index [0]); franz-go's sr.ConfluentHeader writes [0] as
// the single byte 0x00 (the shortcut Confluent's serializers use too). -index-form long instead
// writes it in full, count 1 then index 0 (0x02 0x00), as some serializers do: a SerdeHeader of
// this program's own (below), plugged into sr.Serde with sr.Header; the rest is franz-go's.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:19092", "bootstrap brokers, comma separated")
	registry := flag.String("registry", "http://127.0.0.1:18081", "schema registry URL")
	topic := flag.String("topic", "", "topic to produce to (it must exist)")
	format := flag.String("format", "avro", "avro or protobuf")
	message := flag.String("message", "order", "protobuf: order (index [1]) or header (index [0])")
	indexForm := flag.String("index-form", "short", "protobuf, index [0]: short (0x00, franz-go's) or long (0x02 0x00)")
	count := flag.Int("count", 12, "records to produce")
	flag.Parse()
	if *topic == "" {
		fail("-topic is required")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	registryClient, err := sr.NewClient(sr.URLs(*registry))
	check(err, "schema registry client")
	subject := *topic + "-value"

	var values [][]byte
	var rows []map[string]any
	switch *format {
	case "avro":
		values, rows = avroRecords(ctx, registryClient, subject, *count)
	case "protobuf":
		values, rows = protobufRecords(ctx, registryClient, subject, *message, *indexForm, *count)
	default:
		fail("-format must be avro or protobuf, not %q", *format)
	}

	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.DefaultProduceTopic(*topic))
	check(err, "kgo client")
	defer producer.Close()
	records := make([]*kgo.Record, len(values))
	for i, value := range values {
		records[i] = &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: value}
	}
	check(producer.ProduceSync(ctx, records...).FirstErr(), "produce")

	out := json.NewEncoder(os.Stdout)
	for _, row := range rows {
		check(out.Encode(row), "print a row")
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "serde: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

// ---------------------------------------------------------------------------------------------
// Avro

const avroSchema = `{"type": "record", "name": "Order", "namespace": "franz", "fields": [
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
  {"name": "ship", "type": {"type": "record", "name": "Address", "fields": [
    {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}},
  {"name": "note", "type": ["null", "string"]},
  {"name": "later", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
  {"name": "either", "type": ["null", "long", "string", "Color", "Address"]},
  {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
    {"name": "sku", "type": "string"}, {"name": "n", "type": "int"}]}}},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "grid", "type": {"type": "array", "items": {"type": "array", "items": "int"}}},
  {"name": "attrs", "type": {"type": "map", "values": ["null", "double"]}}
]}`

// avroRecords registers avroSchema under subject and returns count framed values and their rows.
func avroRecords(ctx context.Context, registry *sr.Client, subject string, count int) ([][]byte, []map[string]any) {
	schema, err := avro.Parse(avroSchema)
	check(err, "parse the Avro schema")
	registered, err := registry.CreateSchema(ctx, subject, sr.Schema{Schema: avroSchema, Type: sr.TypeAvro})
	check(err, "register the Avro schema")

	var serde sr.Serde
	serde.Register(registered.ID, map[string]any(nil), sr.EncodeFn(func(v any) ([]byte, error) {
		return avro.Marshal(schema, v)
	}))
	values := make([][]byte, count)
	rows := make([]map[string]any, count)
	for i := range count {
		value, row := avroOrder(i)
		values[i], err = serde.Encode(value)
		check(err, fmt.Sprintf("encode Avro record %d", i))
		rows[i] = row
	}
	return values, rows
}

// avroOrder is record i as hamba/avro takes it (a map; unions as {"type name": value}) and the
// row it must become.
func avroOrder(i int) (map[string]any, map[string]any) {
	qty := []int32{int32(-i * 1000), math.MaxInt32, math.MinInt32}[i%3]
	big := []int64{1<<62 + int64(i), math.MaxInt64, math.MinInt64}[i%3]
	ratio := []float32{0.1, 1.5, -2, math.MaxFloat32, math.SmallestNonzeroFloat32}[i%5]
	score := []float64{-0.1 * float64(i+1), 1e300, 5e-324, 0, -3}[i%5]
	blob := []byte(fmt.Sprintf("txt%d", i))
	if i%2 == 1 {
		blob = []byte{byte(i), 0, 0xff}
	} else if i == 4 {
		blob = []byte{}
	}
	tag := [4]byte{'t', 'g', byte('0' + i%10), 'x'}
	if i%2 == 1 {
		tag[3] = 0x80
	}
	price := []string{"-12345.678", "0.000", "-0.005", "999999999.999"}[i%4]
	amount := fmt.Sprintf("%s9999999999999999.%02d", map[bool]string{true: "-", false: ""}[i%2 == 1], 99-i)
	ref := fmt.Sprintf("6f1c2e0a-0000-4000-8000-%012d", i)
	day := []time.Time{
		time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i),
		time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
	}[i%4]
	tMillis := []time.Duration{
		13*time.Hour + 14*time.Minute + 15*time.Second + 16*time.Millisecond,
		0,
		24*time.Hour - time.Millisecond,
	}[i%3]
	tMicros := 24*time.Hour - time.Duration(i+1)*time.Microsecond
	if i%3 == 1 {
		tMicros = 0
	}
	ts := time.Date(2024, 1, 2, 3, 4, 5, 678_901_000+i*1000, time.UTC)
	if i%4 == 3 {
		ts = time.Date(1969, 12, 31, 23, 59, 59, 999_999_000, time.UTC)
	}
	// hamba/avro writes a local timestamp's wall clock in the process's time zone.
	local := time.Date(2023, 12, 31, 23, 59, 59, 123_456_000+i*1000, time.Local)
	ship := map[string]any{"city": "Paris ü", "zip": int32(75000 + i)}

	var note, noteRow any
	if i%2 == 0 {
		text := fmt.Sprintf("note %d", i)
		if i%4 == 0 {
			text = ""
		}
		note, noteRow = map[string]any{"string": text}, text
	}
	var later, laterRow any
	if i%2 == 1 {
		at := ts.Add(time.Duration(i) * time.Hour)
		later, laterRow = map[string]any{"long.timestamp-micros": at}, utc(at, 6)
	}
	either := []any{
		nil,
		map[string]any{"long": int64(42 + i)},
		map[string]any{"string": "text"},
		map[string]any{"franz.Color": "BLUE"},
		map[string]any{"franz.Address": map[string]any{"city": "Lyon", "zip": int32(69000)}},
	}[i%5]
	eitherRow := []any{nil, int64(42 + i), "text", "BLUE", map[string]any{"city": "Lyon", "zip": 69000}}[i%5]
	lines, linesRow := []any{}, []any{}
	for j := range i % 3 {
		lines = append(lines, map[string]any{"sku": fmt.Sprintf("s%d", j), "n": int32(j)})
		linesRow = append(linesRow, map[string]any{"sku": fmt.Sprintf("s%d", j), "n": j})
	}
	tags, tagsRow := []any{}, []any{}
	for j := range i % 4 {
		tags = append(tags, fmt.Sprintf("t%d", j))
		tagsRow = append(tagsRow, fmt.Sprintf("t%d", j))
	}
	grid := []any{[]any{int32(i), int32(-i)}, []any{}}
	gridRow := []any{[]any{i, -i}, []any{}}
	attrs, attrsRow := map[string]any{}, map[string]any{}
	if i%2 == 0 {
		attrs = map[string]any{"a": map[string]any{"double": 1.25}, "b": nil}
		attrsRow = map[string]any{"a": float64Text(1.25), "b": nil}
	}

	value := map[string]any{
		"id": fmt.Sprintf("order-%d-ünïcode \"q\" \\", i), "flag": i%2 == 0, "qty": qty, "big": big,
		"ratio": ratio, "score": score, "blob": blob, "nothing": nil, "color": []string{"RED", "GREEN", "BLUE"}[i%3],
		"tag": tag, "price": rat(price), "amount": rat(amount), "ref": ref, "day": day,
		"t_ms": tMillis, "t_us": tMicros, "ts_ms": ts, "ts_us": ts, "lts_ms": local, "lts_us": local,
		"ship": ship, "note": note, "later": later, "either": either, "lines": lines, "tags": tags,
		"grid": grid, "attrs": attrs,
	}
	row := map[string]any{
		"id": value["id"], "flag": value["flag"], "qty": qty, "big": big,
		"ratio": float32Text(ratio), "score": float64Text(score), "blob": bytesForm(blob), "nothing": nil,
		"color": value["color"], "tag": bytesForm(tag[:]),
		"price": decimalText(price), "amount": decimalText(amount), "ref": ref,
		"day":    day.Format("2006-01-02"),
		"t_ms":   clock(tMillis, 3),
		"t_us":   clock(tMicros, 6),
		"ts_ms":  utc(ts, 3),
		"ts_us":  utc(ts, 6),
		"lts_ms": local.Format("2006-01-02T15:04:05.000"),
		"lts_us": local.Format("2006-01-02T15:04:05.000000"),
		"ship":   map[string]any{"city": "Paris ü", "zip": 75000 + i},
		"note":   noteRow, "later": laterRow, "either": eitherRow, "lines": linesRow, "tags": tagsRow,
		"grid": gridRow, "attrs": attrsRow,
	}
	return value, row
}

// ---------------------------------------------------------------------------------------------
// Protobuf

// longFirstIndex is franz-go's ConfluentHeader except that the first message's index array [0]
// is written in full (count 1, index 0: zigzag varints 0x02 0x00) instead of the 0x00 shortcut.
type longFirstIndex struct{ sr.ConfluentHeader }

func (h *longFirstIndex) AppendEncode(b []byte, id int, index []int) ([]byte, error) {
	if len(index) == 1 && index[0] == 0 {
		b, err := h.ConfluentHeader.AppendEncode(b, id, nil)
		return append(b, 0x02, 0x00), err
	}
	return h.ConfluentHeader.AppendEncode(b, id, index)
}

// protobufRecords registers franz/common.proto and franz/order.proto (referencing it) and
// returns count framed values of message `message` and their rows.
func protobufRecords(ctx context.Context, registry *sr.Client, subject, message, indexForm string, count int) ([][]byte, []map[string]any) {
	common, order := protoFiles()
	files := new(protoregistry.Files)
	for _, known := range []protoreflect.FileDescriptor{
		timestamppb.File_google_protobuf_timestamp_proto, wrapperspb.File_google_protobuf_wrappers_proto,
	} {
		check(files.RegisterFile(known), "register "+known.Path())
	}
	for _, file := range append(knownFiles(), common, order) {
		descriptor, err := protodesc.NewFile(file, files)
		check(err, "build "+file.GetName())
		check(files.RegisterFile(descriptor), "register "+file.GetName())
	}

	// As Confluent's ProtobufSerializer: the import that is not a well-known type first, under
	// its file name as subject, then the schema with it as a reference.
	commonSchema, err := registry.CreateSchema(ctx, common.GetName(), sr.Schema{Schema: serialized(common), Type: sr.TypeProtobuf})
	check(err, "register "+common.GetName())
	registered, err := registry.CreateSchema(ctx, subject, sr.Schema{
		Schema:     serialized(order),
		Type:       sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: common.GetName(), Subject: common.GetName(), Version: commonSchema.Version}},
	})
	check(err, "register "+order.GetName())

	var opts []sr.SerdeOrEncodingOpt
	switch indexForm {
	case "short":
	case "long":
		opts = append(opts, sr.Header(&longFirstIndex{}))
	default:
		fail("-index-form must be short or long, not %q", indexForm)
	}
	serde := sr.NewSerde(opts...)
	var index int
	var build func(protoreflect.MessageDescriptor, int) (*dynamicpb.Message, map[string]any)
	switch message {
	case "order":
		index, build = 1, orderMessage
	case "header":
		index, build = 0, headerMessage
	default:
		fail("-message must be order or header, not %q", message)
	}
	name := order.GetPackage() + "." + map[string]string{"order": "Order", "header": "Header"}[message]
	descriptor, err := files.FindDescriptorByName(protoreflect.FullName(name))
	check(err, "find the message")
	serde.Register(registered.ID, &dynamicpb.Message{}, sr.Index(index), sr.EncodeFn(func(v any) ([]byte, error) {
		return proto.Marshal(v.(proto.Message))
	}))

	values := make([][]byte, count)
	rows := make([]map[string]any, count)
	for i := range count {
		msg, row := build(descriptor.(protoreflect.MessageDescriptor), i)
		values[i], err = serde.Encode(msg)
		check(err, fmt.Sprintf("encode Protobuf record %d", i))
		rows[i] = row
	}
	return values, rows
}

func serialized(file *descriptorpb.FileDescriptorProto) string {
	bytes, err := proto.Marshal(file)
	check(err, "serialize "+file.GetName())
	return base64.StdEncoding.EncodeToString(bytes)
}

type fdp = descriptorpb.FieldDescriptorProto

const (
	optional = descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	repeated = descriptorpb.FieldDescriptorProto_LABEL_REPEATED
)

func field(name string, number int32, kind descriptorpb.FieldDescriptorProto_Type, typeName string, label descriptorpb.FieldDescriptorProto_Label) *fdp {
	f := &fdp{Name: proto.String(name), Number: proto.Int32(number), Type: kind.Enum(), Label: label.Enum()}
	if typeName != "" {
		f.TypeName = proto.String(typeName)
	}
	return f
}

func inOneof(f *fdp, oneof int32, synthetic bool) *fdp {
	f.OneofIndex = proto.Int32(oneof)
	if synthetic {
		f.Proto3Optional = proto.Bool(true)
	}
	return f
}

func enum(name string, values ...string) *descriptorpb.EnumDescriptorProto {
	e := &descriptorpb.EnumDescriptorProto{Name: proto.String(name)}
	for number, value := range values {
		e.Value = append(e.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(value), Number: proto.Int32(int32(number))})
	}
	return e
}

func mapEntry(name string, key, value descriptorpb.FieldDescriptorProto_Type) *descriptorpb.DescriptorProto {
	return &descriptorpb.DescriptorProto{
		Name:    proto.String(name),
		Field:   []*fdp{field("key", 1, key, "", optional), field("value", 2, value, "", optional)},
		Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
	}
}

// knownFiles are the well-known files Sluice builds in that have no generated Go package here:
// confluent/type/decimal.proto and google/type/date.proto, with the fields Confluent's and
// Google's files give them. Confluent's serializers do not register them (skip.known.types).
func knownFiles() []*descriptorpb.FileDescriptorProto {
	const (
		bytesType = descriptorpb.FieldDescriptorProto_TYPE_BYTES
		int32Type = descriptorpb.FieldDescriptorProto_TYPE_INT32
	)
	return []*descriptorpb.FileDescriptorProto{{
		Name: proto.String("confluent/type/decimal.proto"), Package: proto.String("confluent.type"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Decimal"), Field: []*fdp{
			field("value", 1, bytesType, "", optional),
			field("precision", 2, descriptorpb.FieldDescriptorProto_TYPE_UINT32, "", optional),
			field("scale", 3, int32Type, "", optional),
		}}},
	}, {
		Name: proto.String("google/type/date.proto"), Package: proto.String("google.type"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Date"), Field: []*fdp{
			field("year", 1, int32Type, "", optional),
			field("month", 2, int32Type, "", optional),
			field("day", 3, int32Type, "", optional),
		}}},
	}}
}

// protoFiles are franz/common.proto and franz/order.proto.
func protoFiles() (*descriptorpb.FileDescriptorProto, *descriptorpb.FileDescriptorProto) {
	type T = descriptorpb.FieldDescriptorProto_Type
	const (
		String  T = descriptorpb.FieldDescriptorProto_TYPE_STRING
		Int32   T = descriptorpb.FieldDescriptorProto_TYPE_INT32
		Int64   T = descriptorpb.FieldDescriptorProto_TYPE_INT64
		Message T = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
		Enum    T = descriptorpb.FieldDescriptorProto_TYPE_ENUM
	)
	common := &descriptorpb.FileDescriptorProto{
		Name: proto.String("franz/common.proto"), Package: proto.String("franz"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Address"), Field: []*fdp{
			field("city", 1, String, "", optional), field("zip", 2, Int32, "", optional),
		}}},
		EnumType: []*descriptorpb.EnumDescriptorProto{enum("Color", "RED", "GREEN", "BLUE")},
	}
	header := &descriptorpb.DescriptorProto{Name: proto.String("Header"), Field: []*fdp{
		field("trace", 1, String, "", optional), field("seq", 2, Int64, "", optional),
	}}
	legacy := field("legacy", 18, descriptorpb.FieldDescriptorProto_TYPE_SINT64, "", repeated)
	legacy.Options = &descriptorpb.FieldOptions{Packed: proto.Bool(false)}
	order := &descriptorpb.DescriptorProto{
		Name: proto.String("Order"),
		NestedType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Line"), Field: []*fdp{
				field("sku", 1, String, "", optional), field("qty", 2, Int32, "", optional),
				field("color", 3, Enum, ".franz.Color", optional),
			}},
			mapEntry("CountsEntry", String, Int64),
			mapEntry("LabelsEntry", Int32, String),
		},
		EnumType:  []*descriptorpb.EnumDescriptorProto{enum("Status", "STATUS_UNSPECIFIED", "OPEN", "CLOSED")},
		OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String("pay")}, {Name: proto.String("_note")}},
		Field: []*fdp{
			field("id", 1, Int64, "", optional),
			field("name", 2, String, "", optional),
			inOneof(field("note", 3, String, "", optional), 1, true),
			field("score", 4, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "", optional),
			field("ratio", 5, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "", optional),
			field("ok", 6, descriptorpb.FieldDescriptorProto_TYPE_BOOL, "", optional),
			field("raw", 7, descriptorpb.FieldDescriptorProto_TYPE_BYTES, "", optional),
			field("big", 8, descriptorpb.FieldDescriptorProto_TYPE_UINT64, "", optional),
			field("delta", 9, descriptorpb.FieldDescriptorProto_TYPE_SINT32, "", optional),
			field("color", 10, Enum, ".franz.Color", optional),
			field("lines", 11, Message, ".franz.Order.Line", repeated),
			field("counts", 12, Message, ".franz.Order.CountsEntry", repeated),
			field("at", 13, Message, ".google.protobuf.Timestamp", optional),
			field("ship", 14, Message, ".franz.Address", optional),
			inOneof(field("card", 15, String, "", optional), 0, false),
			inOneof(field("account", 16, Int64, "", optional), 0, false),
			field("nums", 17, Int32, "", repeated),
			legacy,
			field("f32", 19, descriptorpb.FieldDescriptorProto_TYPE_FIXED32, "", optional),
			field("sf64", 20, descriptorpb.FieldDescriptorProto_TYPE_SFIXED64, "", optional),
			field("u32", 21, descriptorpb.FieldDescriptorProto_TYPE_UINT32, "", optional),
			field("s64", 22, descriptorpb.FieldDescriptorProto_TYPE_SINT64, "", optional),
			field("f64", 23, descriptorpb.FieldDescriptorProto_TYPE_FIXED64, "", optional),
			field("i32", 24, Int32, "", optional),
			field("tags", 25, String, "", repeated),
			field("labels", 26, Message, ".franz.Order.LabelsEntry", repeated),
			field("status", 27, Enum, ".franz.Order.Status", optional),
			field("nick", 28, Message, ".google.protobuf.StringValue", optional),
			field("price", 29, Message, ".confluent.type.Decimal", optional),
			field("day", 30, Message, ".google.type.Date", optional),
			field("ratios", 31, descriptorpb.FieldDescriptorProto_TYPE_DOUBLE, "", repeated),
			field("far", 536_870_911, Int32, "", optional),
		},
	}
	orderFile := &descriptorpb.FileDescriptorProto{
		Name: proto.String("franz/order.proto"), Package: proto.String("franz"), Syntax: proto.String("proto3"),
		Dependency: []string{
			"franz/common.proto", "google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto",
			"confluent/type/decimal.proto", "google/type/date.proto",
		},
		MessageType: []*descriptorpb.DescriptorProto{header, order},
	}
	return common, orderFile
}

// fields sets a dynamic message's fields by name.
type fields struct{ msg protoreflect.Message }

func (f fields) of(name string) protoreflect.FieldDescriptor {
	fd := f.msg.Descriptor().Fields().ByName(protoreflect.Name(name))
	if fd == nil {
		fail("no field %s in %s", name, f.msg.Descriptor().FullName())
	}
	return fd
}

func (f fields) set(name string, value protoreflect.Value) { f.msg.Set(f.of(name), value) }

// message marks field name present and returns it to set its fields.
func (f fields) message(name string) fields { return fields{f.msg.Mutable(f.of(name)).Message()} }

func (f fields) list(name string) protoreflect.List { return f.msg.Mutable(f.of(name)).List() }

func (f fields) mapOf(name string) protoreflect.Map { return f.msg.Mutable(f.of(name)).Map() }

var colors = []string{"RED", "GREEN", "BLUE"}

func headerMessage(descriptor protoreflect.MessageDescriptor, i int) (*dynamicpb.Message, map[string]any) {
	msg := dynamicpb.NewMessage(descriptor)
	f := fields{msg}
	trace := fmt.Sprintf("trace-%d é", i)
	if i%3 == 2 {
		trace = ""
	}
	f.set("trace", protoreflect.ValueOfString(trace))
	seq := int64(i)*1_000_000_007 - 3
	f.set("seq", protoreflect.ValueOfInt64(seq))
	return msg, map[string]any{"trace": trace, "seq": seq}
}

// orderMessage is record i of franz.Order and the row it must become.
func orderMessage(descriptor protoreflect.MessageDescriptor, i int) (*dynamicpb.Message, map[string]any) {
	msg := dynamicpb.NewMessage(descriptor)
	f := fields{msg}
	row := map[string]any{}
	v := protoreflect.ValueOf

	id := int64(-7 + i*1_000_000_007)
	f.set("id", v(id))
	row["id"] = id
	row["name"] = ""
	if i%3 != 1 {
		name := fmt.Sprintf("order \u00e9 %d", i)
		f.set("name", v(name))
		row["name"] = name
	}
	row["note"] = nil
	if i%2 == 0 {
		note := fmt.Sprintf("note %d", i)
		if i%4 == 0 {
			note = ""
		}
		f.set("note", v(note))
		row["note"] = note
	}
	score := []float64{float64(i)*1.5 - 2, 1e300, -5e-324, 0.1}[i%4]
	f.set("score", v(score))
	row["score"] = float64Text(score)
	ratio := []float32{0.25 * float32(i), 0.1, -math.MaxFloat32}[i%3]
	f.set("ratio", v(ratio))
	row["ratio"] = float32Text(ratio)
	f.set("ok", v(i%2 == 1))
	row["ok"] = i%2 == 1
	raw := []byte(fmt.Sprintf("txt%d", i))
	if i%2 == 1 {
		raw = []byte{0xff, byte(i), 0}
	}
	if i == 4 {
		raw = nil // not set: the default, empty bytes
	} else {
		f.set("raw", v(raw))
	}
	row["raw"] = bytesForm(raw)
	big := []uint64{1<<63 + uint64(i), math.MaxUint64, 0}[i%3]
	f.set("big", v(big))
	row["big"] = map[string]any{"decimal_text": strconv.FormatUint(big, 10)}
	delta := []int32{int32(-i * 1000), math.MinInt32, math.MaxInt32}[i%3]
	f.set("delta", v(delta))
	row["delta"] = delta
	f.set("color", protoreflect.ValueOfEnum(protoreflect.EnumNumber(i%3)))
	row["color"] = colors[i%3]

	lines, linesRow := f.list("lines"), []any{}
	for j := range i % 3 {
		line := fields{lines.AppendMutable().Message()}
		sku := fmt.Sprintf("sku-%d-%d", i, j)
		line.set("sku", v(sku))
		line.set("qty", v(int32(j)))
		line.set("color", protoreflect.ValueOfEnum(protoreflect.EnumNumber((i+j)%3)))
		linesRow = append(linesRow, map[string]any{"sku": sku, "qty": j, "color": colors[(i+j)%3]})
	}
	row["lines"] = linesRow
	counts, countsRow := f.mapOf("counts"), map[string]any{}
	for j := range i%2 + 1 {
		key := fmt.Sprintf("k%d", j)
		counts.Set(v(key).MapKey(), v(int64(1<<40+j)))
		countsRow[key] = int64(1<<40 + j)
	}
	row["counts"] = countsRow

	row["at"] = nil
	if i%6 != 5 {
		seconds, nanos := int64(1_709_214_330+i*86_400), int32(123_456_789-i)
		switch i % 6 {
		case 3:
			seconds, nanos = -1, 500 // before the epoch
		case 4:
			seconds, nanos = 0, 0 // the epoch: present, every field at its default
		}
		at := f.message("at")
		at.set("seconds", v(seconds))
		at.set("nanos", v(nanos))
		row["at"] = time.Unix(seconds, int64(nanos)).UTC().Format("2006-01-02T15:04:05.000000000Z")
	}
	row["ship"] = nil
	if i%2 == 0 {
		ship := f.message("ship")
		if i%4 == 2 {
			row["ship"] = map[string]any{"city": "", "zip": 0} // present, empty
		} else {
			ship.set("city", v("Paris"))
			ship.set("zip", v(int32(75000+i)))
			row["ship"] = map[string]any{"city": "Paris", "zip": 75000 + i}
		}
	}
	row["card"], row["account"] = nil, nil
	switch {
	case i%6 == 5: // neither member of the oneof
	case i%2 == 1:
		card := fmt.Sprintf("card-%d", i)
		f.set("card", v(card))
		row["card"] = card
	default:
		account := int64(1_000_000_000_000 + i)
		if i%4 == 2 {
			account = 0 // a oneof member set to its default is still set
		}
		f.set("account", v(account))
		row["account"] = account
	}
	nums, numsRow := f.list("nums"), []any{}
	if i%4 != 3 {
		for _, n := range []int32{int32(i), int32(-i), math.MaxInt32, math.MinInt32} {
			nums.Append(v(n))
			numsRow = append(numsRow, n)
		}
	}
	row["nums"] = numsRow
	legacy, legacyRow := f.list("legacy"), []any{}
	for _, n := range []int64{-1, int64(i), math.MinInt64} {
		legacy.Append(v(n))
		legacyRow = append(legacyRow, n)
	}
	row["legacy"] = legacyRow
	f32 := uint32(4_000_000_000 + i)
	f.set("f32", v(f32))
	row["f32"] = f32
	sf64 := -(int64(1) << 62) - int64(i)
	f.set("sf64", v(sf64))
	row["sf64"] = sf64
	u32 := []uint32{math.MaxUint32, uint32(i)}[i%2]
	f.set("u32", v(u32))
	row["u32"] = u32
	s64 := []int64{math.MinInt64, math.MaxInt64, int64(-i)}[i%3]
	f.set("s64", v(s64))
	row["s64"] = s64
	f64 := []uint64{math.MaxUint64, uint64(i)}[i%2]
	f.set("f64", v(f64))
	row["f64"] = map[string]any{"decimal_text": strconv.FormatUint(f64, 10)}
	i32 := int32(-1 - i) // negative: a ten-byte varint
	f.set("i32", v(i32))
	row["i32"] = i32
	tags, tagsRow := f.list("tags"), []any{}
	for j := range i % 3 {
		tag := fmt.Sprintf("tag %d", j)
		tags.Append(v(tag))
		tagsRow = append(tagsRow, tag)
	}
	row["tags"] = tagsRow
	labels := f.mapOf("labels")
	labels.Set(v(int32(-1)).MapKey(), v("minus one"))
	labels.Set(v(int32(i)).MapKey(), v(fmt.Sprintf("label %d", i)))
	row["labels"] = map[string]any{"-1": "minus one", strconv.Itoa(i): fmt.Sprintf("label %d", i)}
	status := []protoreflect.EnumNumber{0, 1, 2, 7}[i%4] // 7 has no name
	f.set("status", protoreflect.ValueOfEnum(status))
	row["status"] = []string{"STATUS_UNSPECIFIED", "OPEN", "CLOSED", "7"}[i%4]
	row["nick"] = nil
	if i%2 == 1 {
		nick := fmt.Sprintf("nick%d", i)
		if i%4 == 3 {
			nick = "" // present, empty
		}
		f.message("nick").set("value", v(nick))
		row["nick"] = nick
	}
	row["price"] = nil
	if i%5 != 4 {
		text := []string{"-12.34", "0.00", "12345678901234567890.123456789", "-0.000000001"}[i%5]
		unscaled, scale := unscaledOf(text)
		price := f.message("price")
		price.set("value", v(twosComplement(unscaled)))
		price.set("precision", v(uint32(len(strings.Trim(strings.Replace(text, ".", "", 1), "-")))))
		price.set("scale", v(int32(scale)))
		row["price"] = decimalText(text)
	}
	day := f.message("day")
	date := time.Date(2024, 2, 1+i%29, 0, 0, 0, 0, time.UTC)
	day.set("year", v(int32(date.Year())))
	day.set("month", v(int32(date.Month())))
	day.set("day", v(int32(date.Day())))
	row["day"] = date.Format("2006-01-02")
	ratios, ratiosRow := f.list("ratios"), []any{}
	for _, x := range []float64{0.5, -1e300, float64(i)} {
		ratios.Append(v(x))
		ratiosRow = append(ratiosRow, float64Text(x))
	}
	row["ratios"] = ratiosRow
	far := int32(i * 3)
	f.set("far", v(far))
	row["far"] = far
	return msg, row
}

// ---------------------------------------------------------------------------------------------
// Forms of the row

func bytesForm(b []byte) map[string]any {
	if utf8.Valid(b) {
		return map[string]any{"utf8": string(b)}
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b)}
}

func float64Text(x float64) json.Number { return floatText(x, 64) }

func float32Text(x float32) json.Number { return floatText(float64(x), 32) }

// floatText is x's shortest text in its width, with ".0" after a whole number.
func floatText(x float64, bits int) json.Number {
	text := strconv.FormatFloat(x, 'g', -1, bits)
	if !strings.ContainsAny(text, ".eE") {
		text += ".0"
	}
	return json.Number(text)
}

func decimalText(text string) map[string]any { return map[string]any{"decimal_text": text} }

func rat(text string) *big.Rat {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		fail("not a decimal: %s", text)
	}
	return r
}

// unscaledOf is the unscaled integer and the scale of decimal text such as "-12.34".
func unscaledOf(text string) (*big.Int, int) {
	scale := 0
	if at := strings.IndexByte(text, '.'); at >= 0 {
		scale = len(text) - at - 1
	}
	unscaled, ok := new(big.Int).SetString(strings.Replace(text, ".", "", 1), 10)
	if !ok {
		fail("not a decimal: %s", text)
	}
	return unscaled, scale
}

// twosComplement is i as minimal big-endian two's complement bytes (Java's
// BigInteger.toByteArray, which Confluent's Decimal conversion uses).
func twosComplement(i *big.Int) []byte {
	if i.Sign() >= 0 {
		b := i.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	magnitudeLess := new(big.Int).Sub(new(big.Int).Neg(i), big.NewInt(1))
	n := magnitudeLess.BitLen()/8 + 1
	modulus := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	return new(big.Int).Add(modulus, i).FillBytes(make([]byte, n))
}

func utc(t time.Time, digits int) string {
	return t.UTC().Format("2006-01-02T15:04:05." + strings.Repeat("0", digits) + "Z")
}

// clock is a time of day as HH:MM:SS and digits of fraction.
func clock(d time.Duration, digits int) string {
	unit := map[int]time.Duration{3: time.Millisecond, 6: time.Microsecond}[digits]
	seconds := int64(d / time.Second)
	fraction := int64(d%time.Second) / int64(unit)
	return fmt.Sprintf("%02d:%02d:%02d.%0*d", seconds/3600, seconds/60%60, seconds%60, digits, fraction)
}
