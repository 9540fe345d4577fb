// franz-go peer: consumes a topic by direct assignment (ConsumePartitions) from the earliest
// offset until RECORDS records, with franz-go's defaults, and prints the benchmark's summary
// line.
//
//	bench-peer-franz-go BOOTSTRAP TOPIC PARTITIONS RECORDS
//	bench-peer-franz-go produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]
//
// The produce mode (the producer benchmark, bench/producer.py) is in produce.go.
// BENCH_IDLE=1: after the summary line, go on polling until killed (bench/idle_partitions.py).
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "produce" {
		produce(os.Args[2:])
		return
	}
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: bench-peer-franz-go BOOTSTRAP TOPIC PARTITIONS RECORDS")
		os.Exit(2)
	}
	bootstrap, topic := os.Args[1], os.Args[2]
	partitions, _ := strconv.Atoi(os.Args[3])
	wanted, _ := strconv.ParseInt(os.Args[4], 10, 64)

	offsets := map[int32]kgo.Offset{}
	for p := 0; p < partitions; p++ {
		offsets[int32(p)] = kgo.NewOffset().AtStart()
	}
	// The clock starts before the client exists: franz-go connects and looks offsets up
	// lazily, from the first poll on.
	started := time.Now()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-peer-franz-go:", err)
		os.Exit(1)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 600*time.Second)
	defer cancel()
	var records, bytes int64
	var first float64
	for records < wanted {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "bench-peer-franz-go: only %d of %d records after 600 s\n", records, wanted)
			os.Exit(1)
		}
		fetches.EachError(func(t string, p int32, err error) {
			fmt.Fprintf(os.Stderr, "bench-peer-franz-go: %s-%d: %v\n", t, p, err)
			os.Exit(1)
		})
		iter := fetches.RecordIter()
		for !iter.Done() && records < wanted {
			record := iter.Next()
			if records == 0 {
				first = time.Since(started).Seconds()
			}
			records++
			bytes += int64(len(record.Value) + len(record.Key))
		}
	}
	elapsed := time.Since(started).Seconds()
	fmt.Printf("RESULT records=%d bytes=%d elapsed_s=%.6f first_s=%.6f\n", records, bytes, elapsed, first)
	// The idle-partitions benchmark (bench/idle_partitions.py): caught up, go on polling the
	// (idle) partitions until killed.
	if os.Getenv("BENCH_IDLE") != "" {
		os.Stdout.Sync()
		for {
			fetches := client.PollFetches(context.Background())
			fetches.EachError(func(t string, p int32, err error) {
				fmt.Fprintf(os.Stderr, "bench-peer-franz-go: %s-%d: %v\n", t, p, err)
				os.Exit(1)
			})
		}
	}
}
