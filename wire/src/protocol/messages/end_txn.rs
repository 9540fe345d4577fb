//! EndTxn (key 26): commit or abort a transaction at its coordinator.
//!
//! Versions 0..=5, flexible from 3. v5 (transaction version 2, KIP-890) answers with the
//! producer id and the epoch the producer must use next: the coordinator bumps the epoch at the
//! end of every transaction, and hands out a new producer id when the epoch is exhausted. A
//! producer on transaction version 1 sends at most v4.
//!
//! # References
//! - `EndTxnRequest.json`, `EndTxnResponse.json` (Kafka 4.1).
//! - KIP-98, KIP-890.

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// True to commit, false to abort.
    pub committed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnResponse {
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
    /// v5+: the producer id to use next (-1 before).
    pub producer_id: i64,
    /// v5+: the epoch to use next (-1 before).
    pub producer_epoch: i16,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 5;

/// The highest version a producer on transaction version 1 may send.
pub const MAX_VERSION_TV1: i16 = 4;

impl Request for EndTxnRequest {
    const API_KEY: ApiKey = ApiKey::END_TXN;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = EndTxnResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.transactional_id);
        writer.i64(self.producer_id);
        writer.i16(self.producer_epoch);
        writer.bool(self.committed);
        write_no_tags(writer, flexible);
    }
}

impl Response for EndTxnResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "EndTxn response version")?;
        let flexible = ApiKey::END_TXN.is_flexible(version);
        let throttle_time_ms = reader.i32("throttle time")?;
        let error_code = ErrorCode(reader.i16("error code")?);
        let (producer_id, producer_epoch) =
            if version >= 5 { (reader.i64("producer id")?, reader.i16("producer epoch")?) } else { (-1, -1) };
        skip_tags(reader, flexible)?;
        reader.finish("EndTxn response")?;
        Ok(EndTxnResponse { throttle_time_ms, error_code, producer_id, producer_epoch })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for EndTxnResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            w.i32(self.throttle_time_ms);
            w.i16(self.error_code.0);
            if version >= 5 {
                w.i64(self.producer_id);
                w.i16(self.producer_epoch);
            }
            write_no_tags(w, ApiKey::END_TXN.is_flexible(version));
        }
    }

    proptest! {
        #[test]
        fn response_roundtrips(
            throttle_time_ms in any::<i32>(),
            error_code in error_code(),
            producer_id in any::<i64>(),
            producer_epoch in any::<i16>(),
        ) {
            for version in MIN_VERSION..=MAX_VERSION {
                let value = if version >= 5 {
                    EndTxnResponse { throttle_time_ms, error_code, producer_id, producer_epoch }
                } else {
                    EndTxnResponse { throttle_time_ms, error_code, producer_id: -1, producer_epoch: -1 }
                };
                check_roundtrip(&value, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<EndTxnResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request =
            EndTxnRequest { transactional_id: "tx".into(), producer_id: 7, producer_epoch: 2, committed: true };
        assert_eq!(request_bytes(&request, 0), [0, 2, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 1]);
        assert_eq!(request_bytes(&request, 5), [3, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 1, 0]);
    }

    #[test]
    fn v5_carries_the_next_epoch() {
        let bytes = bytes::Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 3, 0]);
        let response: EndTxnResponse = decode_response(bytes, 5).unwrap();
        assert_eq!((response.producer_id, response.producer_epoch), (9, 3));
    }
}
