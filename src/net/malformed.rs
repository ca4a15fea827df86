//! What was wrong with bytes a reader could not take, in words that name
//! the message, the place and the cause. A frame holds exactly one
//! message: bytes after it are refused, since they can only come from a
//! corrupted length or field, and a message read from such a frame may not
//! be the one that was sent.

use crate::Error;

/// The message postcard decoded from a payload of `total` bytes with
/// `left` bytes not read, or why it is malformed.
pub(crate) fn whole<T>(
    decoded: postcard::Result<T>,
    total: usize,
    left: usize,
) -> Result<T, Error> {
    let what = message_name::<T>();
    let at = total - left;
    match decoded {
        Ok(message) if left == 0 => Ok(message),
        Ok(_) => Err(Error::InvalidArgument(format!(
            "malformed {what}: {left} bytes after its end at byte {at} of {total}"
        ))),
        Err(e) => Err(Error::InvalidArgument(format!(
            "malformed {what} at byte {at} of {total}: {}",
            why(&e)
        ))),
    }
}

/// The last part of a type's path: `Request`, `Welcome`.
fn message_name<T>() -> &'static str {
    let name = std::any::type_name::<T>();
    let name = name.split('<').next().unwrap_or(name);
    name.rsplit("::").next().unwrap_or(name)
}

/// Why postcard could not decode, in words of the protocol.
fn why(err: &postcard::Error) -> String {
    use postcard::Error as E;
    match err {
        E::DeserializeUnexpectedEnd => "the frame ends inside the message".into(),
        E::DeserializeBadVarint => "an integer too large for its field".into(),
        E::DeserializeBadBool => "a boolean that is neither 0 nor 1".into(),
        E::DeserializeBadUtf8 => "text that is not UTF-8".into(),
        E::DeserializeBadOption => "an option tag that is neither 0 nor 1".into(),
        E::DeserializeBadEnum => "a variant index too large".into(),
        // serde's own errors reach postcard without their words: here an
        // unknown variant, a duration whose seconds overflow, or a listing
        // reply of more entries than one may carry.
        E::SerdeDeCustom => {
            "an unknown variant, a duration out of range, or a listing reply of more entries \
             than one may carry"
                .into()
        }
        other => other.to_string(),
    }
}

/// Why a frame could not be read, as the reader reports it: a length over
/// `limit` is named with the limit. `buffered` is the reader's buffer,
/// which still starts with the refused length.
pub(crate) fn bad_frame(err: &std::io::Error, buffered: &[u8], limit: usize) -> String {
    let too_big = err
        .get_ref()
        .is_some_and(|inner| inner.is::<tokio_util::codec::LengthDelimitedCodecError>());
    match buffered {
        [a, b, c, d, ..] if too_big => format!(
            "bad frame: a frame of {} bytes; at most {limit} bytes are allowed",
            u32::from_be_bytes([*a, *b, *c, *d])
        ),
        _ => format!("bad frame: {err}"),
    }
}
