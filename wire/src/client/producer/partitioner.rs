//! Choosing a record's partition: the Java client's default (murmur2 of the key bytes, sticky
//! partitions for null keys) and the [`Partitioner`] trait for custom ones.
//!
//! # References
//! - `Utils.murmur2`, `Utils.toPositive`, `BuiltInPartitioner` (Kafka 4.1 clients).
//! - KIP-480 (sticky partitioner), KIP-794 (switch after `batch.size` bytes).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;

/// Maps keyed by topic name on the path of every record: FNV-1a, a few instructions per byte of
/// a short name where SipHash's setup cost more than the rest of the lookup. The names come
/// from the application, not the network, so hash flooding is not a concern here.
pub(crate) type TopicMap<V> = HashMap<String, V, BuildHasherDefault<TopicHasher>>;

/// FNV-1a, 64 bits.
#[derive(Debug)]
pub(crate) struct TopicHasher(u64);

impl Default for TopicHasher {
    fn default() -> Self {
        TopicHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for TopicHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Chooses the partition of a record that names none.
///
/// `partition` is called once per record, from the task that calls
/// [`Producer::send`](crate::Producer::send); it must return a partition in
/// `0..partition_count`. `record_appended` tells a stateful partitioner how many bytes went to
/// the partition it chose (the default one switches its sticky partition after `batch_size`).
///
/// ```
/// use sluice_wire::Partitioner;
///
/// /// Everything to partition 0.
/// #[derive(Debug)]
/// struct First;
///
/// impl Partitioner for First {
///     fn partition(&self, _topic: &str, _key: Option<&[u8]>, _value: Option<&[u8]>, _partition_count: i32) -> i32 {
///         0
///     }
/// }
/// assert_eq!(First.partition("t", None, None, 3), 0);
/// ```
pub trait Partitioner: Send + Sync + std::fmt::Debug {
    /// The partition for a record of `topic` with this key and value.
    fn partition(&self, topic: &str, key: Option<&[u8]>, value: Option<&[u8]>, partition_count: i32) -> i32;

    /// `bytes` (the record's estimated size) were appended to `partition` of `topic`.
    fn record_appended(&self, topic: &str, partition: i32, bytes: usize) {
        let _ = (topic, partition, bytes);
    }
}

/// The Java client's default partitioner: a record with a key goes to
/// `toPositive(murmur2(key)) % partition_count`, so the same keys land on the same partitions
/// as with the Java producer; records without a key stick to one partition per topic until
/// `batch_size` bytes went there, then move to another one chosen at random (KIP-480,
/// KIP-794 without the adaptive weighting by queue size).
#[derive(Debug)]
pub struct DefaultPartitioner {
    batch_size: usize,
    sticky: Mutex<TopicMap<Sticky>>,
}

#[derive(Debug, Clone, Copy)]
struct Sticky {
    partition: i32,
    bytes: usize,
}

impl DefaultPartitioner {
    /// Switches null-key records to another partition after `batch_size` bytes.
    pub fn new(batch_size: usize) -> Self {
        DefaultPartitioner { batch_size: batch_size.max(1), sticky: Mutex::new(TopicMap::default()) }
    }
}

impl Partitioner for DefaultPartitioner {
    fn partition(&self, topic: &str, key: Option<&[u8]>, _value: Option<&[u8]>, partition_count: i32) -> i32 {
        let count = partition_count.max(1);
        if let Some(key) = key {
            return key_partition(key, count);
        }
        let mut sticky = self.sticky.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match sticky.get(topic) {
            Some(current) if current.partition < count && current.bytes < self.batch_size => current.partition,
            previous => {
                let previous = previous.map(|p| p.partition);
                let mut next = (random_u64() % count as u64) as i32;
                // Move on: the point of switching is to spread batches.
                if count > 1 && Some(next) == previous {
                    next = (next + 1) % count;
                }
                sticky.insert(topic.to_string(), Sticky { partition: next, bytes: 0 });
                next
            }
        }
    }

    fn record_appended(&self, topic: &str, partition: i32, bytes: usize) {
        let mut sticky = self.sticky.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(current) = sticky.get_mut(topic).filter(|current| current.partition == partition) {
            current.bytes = current.bytes.saturating_add(bytes);
        }
    }
}

/// The partition the Java client's default partitioner gives a key:
/// `Utils.toPositive(Utils.murmur2(key)) % partition_count`.
///
/// ```
/// assert_eq!(sluice_wire::key_partition(b"foobar", 1), 0);
/// ```
pub fn key_partition(key: &[u8], partition_count: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % partition_count.max(1)
}

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`): MurmurHash2, 32 bits, seed
/// 0x9747b28c, little-endian words.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h: u32 = SEED ^ data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(<[u8; 4]>::try_from(chunk).unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if let Some(&byte) = tail.get(2) {
            h ^= u32::from(byte) << 16;
        }
        if let Some(&byte) = tail.get(1) {
            h ^= u32::from(byte) << 8;
        }
        if let Some(&byte) = tail.first() {
            h ^= u32::from(byte);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// A xorshift draw seeded per process from the clock and a counter: the sticky partition only
/// needs to differ between producers, not to be unpredictable.
fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut x = STATE.load(Ordering::Relaxed);
    if x == 0 {
        x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x2545_f491_4f6c_dd1d, |d| d.as_nanos() as u64)
            | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    STATE.store(x, Ordering::Relaxed);
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_matches_the_java_client() {
        // The cases of Kafka's UtilsTest.testMurmur2.
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (input, expected) in cases {
            assert_eq!(murmur2(input), expected, "{}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn keys_always_land_on_the_same_partition_and_empty_keys_hash() {
        let partitioner = DefaultPartitioner::new(16384);
        for key in [&b"a"[..], b"order-17", b""] {
            let first = partitioner.partition("t", Some(key), None, 12);
            assert!((0..12).contains(&first));
            assert_eq!(partitioner.partition("t", Some(key), None, 12), first);
            assert_eq!(first, key_partition(key, 12));
        }
    }

    #[test]
    fn null_keys_stick_until_a_batch_worth_of_bytes_went_there() {
        let partitioner = DefaultPartitioner::new(100);
        let first = partitioner.partition("t", None, None, 6);
        for _ in 0..9 {
            assert_eq!(partitioner.partition("t", None, None, 6), first);
            partitioner.record_appended("t", first, 10);
        }
        partitioner.record_appended("t", first, 10);
        let next = partitioner.partition("t", None, None, 6);
        assert_ne!(next, first, "switches after batch_size bytes");
        assert!((0..6).contains(&next));
        // One partition: nowhere else to go.
        assert_eq!(partitioner.partition("one", None, None, 1), 0);
    }
}
