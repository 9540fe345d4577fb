// The producer side of the franz-go peer (bench/producer.py):
//
//	bench-peer-franz-go produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]
//
// franz-go's defaults plus the acks (all: idempotent, its default; leader: LeaderAck without
// idempotent writes, which franz-go requires for acks other than all), the batch compression
// and the linger. RATE (records/s, 0: unlimited) paces the sends for the latency runs. Null
// keys; the same 1024 values as sluice-produce's (same xorshift, same words). Records go
// through the asynchronous Produce with a promise per record, which records the
// send-to-acknowledgement latency. Prints one JSON line, as sluice-produce does.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// values are the 1024 values of sluice-produce (bench/sluice/src/bin/sluice-produce.rs).
func values(size int) [][]byte {
	state := uint64(0x2545_f491_4f6c_dd1d)
	words := []string{"order", "amount", "customer", "status", "shipped", "12.50", "true", "null", "EUR", "2026"}
	out := make([][]byte, 1024)
	for i := range out {
		value := make([]byte, 0, size+16)
		for len(value) < size {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			value = append(value, words[state%uint64(len(words))]...)
			value = append(value, ' ')
		}
		out[i] = value[:size]
	}
	return out
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-peer-franz-go produce: "+format+"\n", args...)
	os.Exit(1)
}

func produce(args []string) {
	if len(args) != 7 && len(args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: bench-peer-franz-go produce BOOTSTRAP TOPIC COUNT SIZE CODEC all|leader LINGER_MS [RATE]")
		os.Exit(2)
	}
	bootstrap, topic := args[0], args[1]
	count, _ := strconv.Atoi(args[2])
	size, _ := strconv.Atoi(args[3])
	linger, _ := strconv.Atoi(args[6])
	rate := 0.0
	if len(args) == 8 {
		rate, _ = strconv.ParseFloat(args[7], 64)
	}
	var codec kgo.CompressionCodec
	switch args[4] {
	case "none":
		codec = kgo.NoCompression()
	case "gzip":
		codec = kgo.GzipCompression()
	case "snappy":
		codec = kgo.SnappyCompression()
	case "lz4":
		codec = kgo.Lz4Compression()
	case "zstd":
		codec = kgo.ZstdCompression()
	default:
		fail("unknown codec %s", args[4])
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(time.Duration(linger) * time.Millisecond),
	}
	switch args[5] {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "leader":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	default:
		fail("acks must be all or leader, not %s", args[5])
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fail("%v", err)
	}
	defer client.Close()
	vals := values(size)
	var mu sync.Mutex
	latencies := make([]time.Duration, 0, count)
	var firstErr error
	ctx := context.Background()
	started := time.Now()
	for i := 0; i < count; i++ {
		if rate > 0 {
			due := started.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		sent := time.Now()
		client.Produce(ctx, &kgo.Record{Value: vals[i%len(vals)]}, func(_ *kgo.Record, err error) {
			elapsed := time.Since(sent)
			mu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			} else if err == nil {
				latencies = append(latencies, elapsed)
			}
			mu.Unlock()
		})
	}
	if err := client.Flush(ctx); err != nil {
		fail("flush: %v", err)
	}
	elapsed := time.Since(started).Seconds()
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		fail("a send failed: %v", firstErr)
	}
	sort.Slice(latencies, func(a, b int) bool { return latencies[a] < latencies[b] })
	percentile := func(p float64) float64 {
		if len(latencies) == 0 {
			return 0
		}
		return float64(latencies[int(float64(len(latencies)-1)*p)].Microseconds()) / 1000
	}
	fmt.Printf(`{"client":"franz-go","records":%d,"acked":%d,"size":%d,"rate":%g,"seconds":%.3f,"records_per_sec":%.0f,"mb_per_sec":%.2f,"p50_ms":%.2f,"p99_ms":%.2f}`+"\n",
		count, len(latencies), size, rate, elapsed, float64(count)/elapsed, float64(count*size)/elapsed/1e6, percentile(0.5), percentile(0.99))
}
