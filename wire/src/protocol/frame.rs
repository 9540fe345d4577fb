//! Length-prefixed framing, sans-IO: feed bytes in, take whole frames out.
//!
//! Every Kafka message is an `i32` size followed by that many bytes. A size that is negative or
//! larger than the configured maximum is an error *before* any buffer grows, so a broker (or
//! something that is not a broker, such as a TLS listener or an HTTP server) cannot make the
//! client allocate 2 GiB.

use bytes::{Buf, Bytes, BytesMut};

/// Why a frame could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// The size prefix is negative.
    NegativeSize(i32),
    /// The size prefix is larger than the limit.
    TooLarge { size: usize, limit: usize },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::NegativeSize(size) => write!(f, "frame size prefix is negative ({size})"),
            FrameError::TooLarge { size, limit } => {
                // A TLS alert or an HTTP reply read as a size prefix gives an absurd number.
                write!(
                    f,
                    "frame of {size} bytes exceeds the limit of {limit} bytes (is this a Kafka \
                     listener, and does its security protocol match the client's TLS/SASL settings?)"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Splits a byte stream into frames no larger than `max_frame_size`.
#[derive(Debug)]
pub struct FrameDecoder {
    max_frame_size: usize,
}

impl FrameDecoder {
    pub fn new(max_frame_size: usize) -> Self {
        FrameDecoder { max_frame_size }
    }

    /// The size of the frame at the front of `buffer`, once its prefix has arrived.
    pub fn peek_size(&self, buffer: &[u8]) -> Result<Option<usize>, FrameError> {
        let Some(prefix) = buffer.first_chunk::<4>() else { return Ok(None) };
        let size = i32::from_be_bytes(*prefix);
        if size < 0 {
            return Err(FrameError::NegativeSize(size));
        }
        let size = size as usize;
        if size > self.max_frame_size {
            return Err(FrameError::TooLarge { size, limit: self.max_frame_size });
        }
        Ok(Some(size))
    }

    /// Takes one whole frame (without its size prefix) off the front of `buffer`, or `Ok(None)`
    /// when more bytes are needed.
    pub fn decode(&self, buffer: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
        let Some(size) = self.peek_size(buffer)? else { return Ok(None) };
        if buffer.len() < 4 + size {
            return Ok(None);
        }
        buffer.advance(4);
        Ok(Some(buffer.split_to(size).freeze()))
    }
}

/// Prefixes an encoded message with its size.
pub fn encode_frame(body: &[u8]) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(body);
    frame
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_whole_frame() {
        let decoder = FrameDecoder::new(100);
        let mut buffer = BytesMut::from(&[0u8, 0, 0, 3, 1, 2][..]);
        assert_eq!(decoder.decode(&mut buffer).unwrap(), None);
        buffer.extend_from_slice(&[3, 0, 0]);
        assert_eq!(decoder.decode(&mut buffer).unwrap().unwrap().as_ref(), &[1, 2, 3]);
        assert_eq!(buffer.len(), 2);
    }

    #[test]
    fn two_gib_prefix_is_rejected_without_allocating() {
        let decoder = FrameDecoder::new(64 << 20);
        let mut buffer = BytesMut::from(&[0x7fu8, 0xff, 0xff, 0xff][..]);
        let err = decoder.decode(&mut buffer).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }));
        assert!(err.to_string().contains("is this a Kafka listener"));
        let mut negative = BytesMut::from(&[0xffu8, 0xff, 0xff, 0xff][..]);
        assert_eq!(decoder.decode(&mut negative).unwrap_err(), FrameError::NegativeSize(-1));
    }
}
