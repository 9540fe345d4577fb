#!/usr/bin/env bash
# Which codec and how many batches each tool writes into the target (10,000 x 1 KiB zstd text).
set -euo pipefail
cd /work/wt-mm2
export SOURCE=127.0.0.2:19092 TARGET=127.0.0.2:19192,127.0.0.2:29192,127.0.0.2:39192
out=bench/results/mirror-2026-12-02/codec-check; mkdir -p $out
src=codec-src-$(date +%s)
python3 -c "
import sys; sys.argv=['x']; sys.path.insert(0,'bench'); import mirror
mirror.Admin('$SOURCE').create('$src',3,1)"
bash tests/kafka/broker.sh java org.apache.kafka.tools.ProducerPerformance --topic $src --num-records 10000 \
  --payload-file bench/results/mirror-2026-12-02/payload-1024.txt --throughput -1 --producer-props bootstrap.servers=$SOURCE \
  acks=all linger.ms=10 batch.size=65536 compression.type=zstd > $out/fill.log
for mode in at_least_once exactly_once; do
  cat > $out/sluice-$mode.json <<J
{"source": {"brokers": ["$SOURCE"]}, "target": {"brokers": ["127.0.0.2:19192","127.0.0.2:29192","127.0.0.2:39192"]},
 "topics": ["$src"], "target_topic": "cc-$mode.{topic}", "commit_mode": "$mode", "create_topics": true,
 "replication_factor": 3, "compression": "zstd"}
J
  target/x86_64-unknown-linux-musl/release/sluice mirror --config $out/sluice-$mode.json --mode bounded > $out/sluice-$mode.out 2>&1
done
sed -e "s/^clusters = .*/clusters = cc, dst/" -e "s/^s[0-9a-z]*\./cc./" -e "s/^s[0-9a-z]*->dst/cc->dst/" -e "s/^dst->s[0-9a-z]*/dst->cc/" \
  -e "s/->dst.topics = .*/->dst.topics = $src/" bench/results/mirror-2026-12-02/none-100b-mm2-at_least_once-27446r0ma/mm2.properties > $out/mm2.properties
echo "dst.producer.compression.type = zstd" >> $out/mm2.properties
timeout 120 java -Xms256M -Xmx2G -Dlog4j2.configurationFile=bench/results/mirror-2026-12-02/none-100b-mm2-at_least_once-27446r0ma/log4j2.properties \
  -cp "bench/mm2/lib/*" org.apache.kafka.connect.mirror.MirrorMaker $out/mm2.properties > $out/mm2.out 2>&1 &
mm2=$!
for i in $(seq 1 110); do
  sleep 1
  n=$(python3 -c "
import sys; sys.argv=['x']; sys.path.insert(0,'bench'); import mirror
print(mirror.Admin('$TARGET').end_sum('cc.$src') or 0)")
  [[ "$n" -ge 10000 ]] && break
done
kill -TERM $mm2; wait $mm2 || true
for t in cc-at_least_once.$src cc-exactly_once.$src cc.$src; do
  d=$(ls -d .kafka/cluster/node*/data/$t-0 | head -1)
  bash tests/kafka/broker.sh java kafka.tools.DumpLogSegments --files $d/00000000000000000000.log > $out/dump-$t.txt 2>&1 || true
  echo "$t: $(du -b $d/00000000000000000000.log | cut -f1) bytes in p0;" \
    "$(grep -c 'baseOffset' $out/dump-$t.txt) batches; codecs: $(grep -o 'compresscodec: [a-z]*' $out/dump-$t.txt | sort | uniq -c | tr '\n' ' ')"
done | tee $out/summary.txt
d=$(ls -d .kafka/single/data/$src-0); echo "source $src p0: $(du -b $d/00000000000000000000.log | cut -f1) bytes" | tee -a $out/summary.txt
