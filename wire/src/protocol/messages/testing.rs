//! Test support shared by the message modules: a test-only response encoder trait, round-trip
//! and robustness checks, and small proptest strategies.

use std::fmt::Debug;

use bytes::Bytes;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::{Request, Response, TopicId};
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

/// Encodes a response the way a broker would, so that decoders can be round-tripped.
pub(crate) trait EncodeResponse {
    fn encode(&self, version: i16, writer: &mut Writer);
}

pub(crate) fn encode_response<T: EncodeResponse>(value: &T, version: i16) -> Bytes {
    let mut writer = Writer::new();
    value.encode(version, &mut writer);
    Bytes::from(writer.into_inner())
}

pub(crate) fn decode_response<T: Response>(bytes: Bytes, version: i16) -> Result<T, DecodeError> {
    let mut reader = Reader::new(bytes);
    T::decode(version, &mut reader)
}

/// Encode, decode, encode again: the bytes must match, and a second trip must give the same value
/// (the first trip drops fields the version does not carry).
pub(crate) fn check_roundtrip<T>(value: &T, version: i16) -> Result<(), TestCaseError>
where
    T: Response + EncodeResponse + PartialEq + Debug,
{
    let bytes = encode_response(value, version);
    let first: T =
        decode_response(bytes.clone(), version).map_err(|e| TestCaseError::fail(format!("v{version}: {e}")))?;
    let again = encode_response(&first, version);
    prop_assert_eq!(&again, &bytes, "re-encoding at v{} differs", version);
    let second: T =
        decode_response(again, version).map_err(|e| TestCaseError::fail(format!("v{version} second trip: {e}")))?;
    prop_assert_eq!(&second, &first);
    damaged_copies_never_panic::<T>(&bytes, version);
    Ok(())
}

/// Decodes truncated and corrupted copies of a valid body: they may fail, never panic. Random
/// bytes rarely get past the first field; these reach every field of the layout.
pub(crate) fn damaged_copies_never_panic<T: Response>(bytes: &[u8], version: i16) {
    let step = (bytes.len() / 16).max(1);
    for position in (0..bytes.len()).step_by(step) {
        if let Some(prefix) = bytes.get(..position) {
            let _ = decode_response::<T>(Bytes::copy_from_slice(prefix), version);
        }
        for value in [0x00, 0x7f, 0xff] {
            let mut corrupted = bytes.to_vec();
            if let Some(byte) = corrupted.get_mut(position) {
                *byte = value;
            }
            let _ = decode_response::<T>(Bytes::from(corrupted), version);
        }
    }
}

/// Decoding arbitrary bytes at every version must return, never panic.
pub(crate) fn decode_arbitrary<T: Response>(data: &[u8], min: i16, max: i16) {
    for version in min..=max {
        let _ = decode_response::<T>(Bytes::copy_from_slice(data), version);
    }
}

pub(crate) fn request_bytes<R: Request>(request: &R, version: i16) -> Vec<u8> {
    let mut writer = Writer::new();
    request.encode(version, &mut writer);
    writer.into_inner()
}

pub(crate) fn assert_count_too_large<T: Response + Debug>(bytes: Vec<u8>, version: i16) {
    let result = decode_response::<T>(Bytes::from(bytes), version);
    assert!(
        matches!(result, Err(DecodeError::CountTooLarge { .. })),
        "v{version}: expected CountTooLarge, got {result:?}"
    );
}

/// The compact-array count `0xffffffff` (uvarint), i.e. 4294967294 elements.
pub(crate) const HUGE_UVARINT: [u8; 5] = [0xff, 0xff, 0xff, 0xff, 0x0f];
/// The classic array count `i32::MAX`.
pub(crate) const HUGE_I32: [u8; 4] = [0x7f, 0xff, 0xff, 0xff];

pub(crate) fn huge_count(flexible: bool) -> Vec<u8> {
    if flexible {
        HUGE_UVARINT.to_vec()
    } else {
        HUGE_I32.to_vec()
    }
}

pub(crate) fn name() -> impl Strategy<Value = String> {
    "[a-z0-9._-]{0,12}"
}

pub(crate) fn opt_name() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(name())
}

pub(crate) fn error_code() -> impl Strategy<Value = ErrorCode> {
    any::<i16>().prop_map(ErrorCode)
}

pub(crate) fn topic_id() -> impl Strategy<Value = TopicId> {
    any::<[u8; 16]>().prop_map(TopicId)
}

pub(crate) fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

pub(crate) fn small_vec<T: Debug>(element: impl Strategy<Value = T>, max: usize) -> impl Strategy<Value = Vec<T>> {
    proptest::collection::vec(element, 0..max)
}

pub(crate) fn arbitrary_data() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..256)
}
