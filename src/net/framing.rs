//! A length-delimited codec that knows whether a frame has begun, for
//! both ends of a connection: the codec takes a frame's length out of its
//! read buffer as soon as the length has come, so an empty buffer does not
//! say the peer sent nothing.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// The wire's codec, and whether a frame has begun: the codec takes a
/// frame's length out of its buffer as soon as the length has arrived, and
/// would then call a stream that ends there ended in good order, between
/// frames. A stream cut in the middle of a frame is broken, whatever the
/// byte it was cut at.
pub(crate) struct Framing {
    codec: LengthDelimitedCodec,
    /// A frame's length was read and its body has not all come.
    in_frame: bool,
}

impl Framing {
    pub(crate) fn new(codec: LengthDelimitedCodec) -> Framing {
        Framing {
            codec,
            in_frame: false,
        }
    }
}

impl Framing {
    /// Whether a frame's length has come and its body not all of it: the
    /// peer has begun a frame, though the read buffer may be empty.
    pub(crate) fn in_frame(&self) -> bool {
        self.in_frame
    }

    /// The codec inside, to change its limits.
    pub(crate) fn codec_mut(&mut self) -> &mut LengthDelimitedCodec {
        &mut self.codec
    }
}

impl Encoder<Bytes> for Framing {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        self.codec.encode(item, dst)
    }
}

impl Decoder for Framing {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        let before = src.len();
        let frame = self.codec.decode(src)?;
        match &frame {
            Some(_) => self.in_frame = false,
            // The length was taken out: its body is yet to come.
            None if src.len() < before => self.in_frame = true,
            None => {}
        }
        Ok(frame)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        match self.decode(src)? {
            Some(frame) => Ok(Some(frame)),
            None if src.is_empty() && !self.in_frame => Ok(None),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream ended in the middle of a frame",
            )),
        }
    }
}
