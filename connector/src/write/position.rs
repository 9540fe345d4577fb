//! The input position of a `sluice write` job, as stored in the offsets topic: which file
//! (its identity), how far (byte offset and line number), and how much was written.
//!
//! The record's key is `sluice-write:<job id>`; its value one JSON object:
//!
//! ```json
//! {"version":1,"topic":"orders","byte_offset":1234,"line":20,"records":19,"dead_letters":1,
//!  "input":{"path":"/data/in.jsonl","device":2049,"inode":131,"prefix_bytes":1234,
//!           "prefix_fnv1a64":"af63bd4c8601b7df"}}
//! ```
//!
//! `line` is the number of lines consumed (the next line to read is `line + 1`). The file's
//! identity is its device and inode plus an FNV-1a hash of its first `prefix_bytes` bytes
//! (`min(byte_offset, 64 KiB)`): a file replaced by another one, truncated or rewritten before
//! the position does not match, and the job fails instead of resuming in the wrong place.
//! Values come from the network: [`Position::decode`] is bounded by serde_json's (the record's
//! size, recursion limit 128) and fuzzed (`fuzz/fuzz_targets/write_position.rs`).

use std::fs::File;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// How many leading bytes of the input the identity hashes at most.
pub const PREFIX_LIMIT: u64 = 64 * 1024;

/// A job's committed position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub version: u32,
    pub topic: String,
    pub byte_offset: u64,
    pub line: u64,
    pub records: u64,
    pub dead_letters: u64,
    pub input: FileIdentity,
}

/// Which file a position belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub path: String,
    pub device: u64,
    pub inode: u64,
    pub prefix_bytes: u64,
    pub prefix_fnv1a64: String,
}

impl Position {
    /// The JSON value stored in the offsets topic.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| unreachable!("a Position always serialises"))
    }

    /// Reads a stored value; `None` for anything that is not a version-1 position.
    pub fn decode(bytes: &[u8]) -> Option<Position> {
        serde_json::from_slice::<Position>(bytes).ok().filter(|position| position.version == 1)
    }
}

/// The offsets topic key of a job.
pub fn position_key(job_id: &str) -> Vec<u8> {
    format!("sluice-write:{job_id}").into_bytes()
}

/// FNV-1a, 64 bits: a stable hash (unlike std's) for identifying a file's contents, not for
/// security.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

/// The identity of the open `file` (named `path`) as it is now, hashing its first
/// `min(byte_offset, PREFIX_LIMIT)` bytes (fewer if the file is shorter), read with `pread` so
/// that the handle's position stays where it is. Also returns the file's size.
pub fn identify(path: &Path, file: &File, byte_offset: u64) -> std::io::Result<(FileIdentity, u64)> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let metadata = file.metadata()?;
    let wanted = byte_offset.min(PREFIX_LIMIT).min(metadata.len()) as usize;
    let mut prefix = vec![0; wanted];
    let mut filled = 0;
    while filled < wanted {
        match file.read_at(prefix.get_mut(filled..).unwrap_or_default(), filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    prefix.truncate(filled);
    let identity = FileIdentity {
        path: path.display().to_string(),
        device: metadata.dev(),
        inode: metadata.ino(),
        prefix_bytes: prefix.len() as u64,
        prefix_fnv1a64: format!("{:016x}", fnv1a64(&prefix)),
    };
    Ok((identity, metadata.len()))
}

/// Why a stored position does not belong to this file, in words; `None` when it does.
pub fn mismatch(stored: &Position, current: &FileIdentity, size: u64) -> Option<String> {
    let was = &stored.input;
    if (was.device, was.inode) != (current.device, current.inode) {
        return Some(format!(
            "it was device {} inode {} ({}), this file is device {} inode {}",
            was.device, was.inode, was.path, current.device, current.inode
        ));
    }
    if size < stored.byte_offset {
        return Some(format!(
            "this file has {size} bytes, fewer than the {} already written from it (truncated or replaced)",
            stored.byte_offset
        ));
    }
    if (was.prefix_bytes, &was.prefix_fnv1a64) != (current.prefix_bytes, &current.prefix_fnv1a64) {
        return Some(format!(
            "its first {} bytes differ from what was written (FNV-1a {} then, {} now: rewritten in place)",
            was.prefix_bytes, was.prefix_fnv1a64, current.prefix_fnv1a64
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(offset: u64) -> Position {
        Position {
            version: 1,
            topic: "t".into(),
            byte_offset: offset,
            line: 2,
            records: 2,
            dead_letters: 0,
            input: FileIdentity {
                path: "/x".into(),
                device: 1,
                inode: 2,
                prefix_bytes: offset,
                prefix_fnv1a64: format!("{:016x}", fnv1a64(&b"abcdefgh"[..offset as usize])),
            },
        }
    }

    #[test]
    fn encodes_and_decodes() {
        let stored = position(4);
        assert_eq!(Position::decode(&stored.encode()), Some(stored.clone()));
        assert_eq!(Position::decode(b"{}"), None);
        assert_eq!(Position::decode(b"\xff"), None);
        let mut later = stored;
        later.version = 2;
        assert_eq!(Position::decode(&later.encode()), None);
    }

    #[test]
    fn fnv_is_the_reference_function() {
        // Test vectors of the FNV reference (http://www.isthe.com/chongo/src/fnv/test_fnv.c).
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn a_different_file_is_named() {
        let stored = position(4);
        let same = stored.input.clone();
        assert_eq!(mismatch(&stored, &same, 8), None);
        let moved = FileIdentity { inode: 3, ..same.clone() };
        assert!(mismatch(&stored, &moved, 8).unwrap().contains("inode 2 (/x), this file is device 1 inode 3"));
        assert!(mismatch(&stored, &same, 3).unwrap().contains("fewer than the 4 already written"));
        let rewritten = FileIdentity { prefix_fnv1a64: format!("{:016x}", fnv1a64(b"abcX")), ..same };
        assert!(mismatch(&stored, &rewritten, 8).unwrap().contains("rewritten in place"));
    }
}
