//! AddOffsetsToTxn (key 25): a transactional producer tells its transaction coordinator that
//! the transaction will commit offsets of a consumer group (transaction version 1; with
//! transaction version 2 TxnOffsetCommit v5 adds the group implicitly, KIP-890).
//!
//! Versions 0..=4, flexible from 3.
//!
//! # References
//! - `AddOffsetsToTxnRequest.json`, `AddOffsetsToTxnResponse.json` (Kafka 4.1).
//! - KIP-98 (transactions).

use super::{check_version, skip_tags, write_no_tags, Request, Response};
use crate::protocol::api::ApiKey;
use crate::protocol::codec::{DecodeError, Reader, Writer};
use crate::protocol::error_code::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOffsetsToTxnRequest {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub group_id: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddOffsetsToTxnResponse {
    pub throttle_time_ms: i32,
    pub error_code: ErrorCode,
}

const MIN_VERSION: i16 = 0;
const MAX_VERSION: i16 = 4;

impl Request for AddOffsetsToTxnRequest {
    const API_KEY: ApiKey = ApiKey::ADD_OFFSETS_TO_TXN;
    const MIN_VERSION: i16 = MIN_VERSION;
    const MAX_VERSION: i16 = MAX_VERSION;
    type Response = AddOffsetsToTxnResponse;

    fn encode(&self, version: i16, writer: &mut Writer) {
        let flexible = Self::API_KEY.is_flexible(version);
        writer.string(flexible, &self.transactional_id);
        writer.i64(self.producer_id);
        writer.i16(self.producer_epoch);
        writer.string(flexible, &self.group_id);
        write_no_tags(writer, flexible);
    }
}

impl Response for AddOffsetsToTxnResponse {
    fn decode(version: i16, reader: &mut Reader) -> Result<Self, DecodeError> {
        check_version(version, MIN_VERSION, MAX_VERSION, "AddOffsetsToTxn response version")?;
        let flexible = ApiKey::ADD_OFFSETS_TO_TXN.is_flexible(version);
        let response = AddOffsetsToTxnResponse {
            throttle_time_ms: reader.i32("throttle time")?,
            error_code: ErrorCode(reader.i16("error code")?),
        };
        skip_tags(reader, flexible)?;
        reader.finish("AddOffsetsToTxn response")?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::testing::*;
    use proptest::prelude::*;

    impl EncodeResponse for AddOffsetsToTxnResponse {
        fn encode(&self, version: i16, w: &mut Writer) {
            w.i32(self.throttle_time_ms);
            w.i16(self.error_code.0);
            write_no_tags(w, ApiKey::ADD_OFFSETS_TO_TXN.is_flexible(version));
        }
    }

    proptest! {
        #[test]
        fn response_roundtrips(throttle_time_ms in any::<i32>(), error_code in error_code()) {
            let value = AddOffsetsToTxnResponse { throttle_time_ms, error_code };
            for version in MIN_VERSION..=MAX_VERSION {
                check_roundtrip(&value, version)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in arbitrary_data()) {
            decode_arbitrary::<AddOffsetsToTxnResponse>(&data, MIN_VERSION, MAX_VERSION);
        }
    }

    #[test]
    fn request_golden() {
        let request = AddOffsetsToTxnRequest {
            transactional_id: "tx".into(),
            producer_id: 7,
            producer_epoch: 2,
            group_id: "g".into(),
        };
        assert_eq!(request_bytes(&request, 0), [0, 2, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 0, 1, b'g']);
        assert_eq!(request_bytes(&request, 3), [3, b't', b'x', 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, 2, b'g', 0]);
    }
}
