//! The server's side of RFC 6455 framing, without I/O: client frames (masked, maybe fragmented) assembled
//! into messages within a size limit, and unmasked server frames written into a caller's buffer. Prism
//! writes its own frames so that one notification can be laid out once and each subscriber's copy is its
//! subscription id spliced between two shared halves (`edge::ws`), and so that an idle session holds no
//! codec buffers.

/// Frame opcodes (RFC 6455 §5.2).
pub const TEXT: u8 = 0x1;
pub const BINARY: u8 = 0x2;
pub const CLOSE: u8 = 0x8;
pub const PING: u8 = 0x9;
pub const PONG: u8 = 0xA;
const CONTINUATION: u8 = 0x0;

/// Close codes Prism sends (RFC 6455 §7.4.1).
pub const CLOSE_NORMAL: u16 = 1000;
pub const CLOSE_AWAY: u16 = 1001;
pub const CLOSE_PROTOCOL: u16 = 1002;
pub const CLOSE_NOT_UTF8: u16 = 1007;
pub const CLOSE_POLICY: u16 = 1008;
pub const CLOSE_TOO_BIG: u16 = 1009;

/// A whole message from the client.
#[derive(Debug, PartialEq, Eq)]
pub enum WsMessage {
    /// A text message, checked to be UTF-8.
    Text(Vec<u8>),
    Binary(Vec<u8>),
    /// Its payload, to be echoed in the pong.
    Ping(Vec<u8>),
    Pong,
    /// The client's close code, when it sent one.
    Close(Option<u16>),
}

/// What the client did wrong: the session ends with [`WsViolation::close_code`] and [`WsViolation::reason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.reason())]
pub enum WsViolation {
    Protocol(&'static str),
    /// A message (its frames together) over the session's limit (`limits.max_body_bytes`).
    TooBig,
    NotUtf8,
}

impl WsViolation {
    /// The close frame's reason: the rule broken.
    pub fn reason(&self) -> &'static str {
        match self {
            WsViolation::Protocol(why) => why,
            WsViolation::TooBig => "message too big (limits.max_body_bytes)",
            WsViolation::NotUtf8 => "text message is not UTF-8",
        }
    }

    pub fn close_code(&self) -> u16 {
        match self {
            WsViolation::Protocol(_) => CLOSE_PROTOCOL,
            WsViolation::TooBig => CLOSE_TOO_BIG,
            WsViolation::NotUtf8 => CLOSE_NOT_UTF8,
        }
    }
}

/// How far [`WsReader::next`] got with the bytes it was given.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// `used` bytes made a whole message.
    Message(usize, WsMessage),
    /// `used` bytes were one fragment of a message still open: call again with the rest.
    Fragment(usize),
    /// Nothing used: at least this many bytes (from the start of what was given) make the next frame.
    Need(usize),
}

/// Assembles a client's frames into messages. Holds memory only while a fragmented message is open.
#[derive(Debug)]
pub struct WsReader {
    /// The data message being assembled from fragments, and its opcode.
    open: Option<(u8, Vec<u8>)>,
    max_message: usize,
}

impl WsReader {
    pub fn new(max_message: usize) -> Self {
        WsReader {
            open: None,
            max_message,
        }
    }

    /// Takes the next frame from the start of `buf`.
    pub fn next(&mut self, buf: &[u8]) -> Result<Progress, WsViolation> {
        let Some(head) = parse_head(buf)? else {
            return Ok(Progress::Need(buf.len().max(2) + 1));
        };
        let control = head.opcode & 0x8 != 0;
        if control {
            if !head.fin {
                return Err(WsViolation::Protocol("fragmented control frame"));
            }
            if head.len > 125 {
                return Err(WsViolation::Protocol("control frame over 125 bytes"));
            }
        } else {
            let so_far = self.open.as_ref().map_or(0, |(_, m)| m.len() as u64);
            if so_far.saturating_add(head.len) > self.max_message as u64 {
                return Err(WsViolation::TooBig);
            }
            match (head.opcode, &self.open) {
                (CONTINUATION, None) => return Err(WsViolation::Protocol("continuation without a message")),
                (TEXT | BINARY, Some(_)) => return Err(WsViolation::Protocol("new message inside a fragmented one")),
                _ => {}
            }
        }
        // Bounded above: a control frame by 125, a data frame by `max_message`.
        let total = head.size + head.len as usize;
        if buf.len() < total {
            return Ok(Progress::Need(total));
        }
        let mut payload = buf[head.size..total].to_vec();
        unmask(&mut payload, head.mask);
        let message = match head.opcode {
            PING => WsMessage::Ping(payload),
            PONG => WsMessage::Pong,
            CLOSE => WsMessage::Close(close_code(&payload)?),
            opcode => {
                let (opcode, message) = match (opcode, self.open.take()) {
                    (CONTINUATION, Some((first, mut message))) => {
                        message.extend_from_slice(&payload);
                        (first, message)
                    }
                    (opcode, _) => (opcode, payload),
                };
                if !head.fin {
                    self.open = Some((opcode, message));
                    return Ok(Progress::Fragment(total));
                }
                if opcode == TEXT {
                    if std::str::from_utf8(&message).is_err() {
                        return Err(WsViolation::NotUtf8);
                    }
                    WsMessage::Text(message)
                } else {
                    WsMessage::Binary(message)
                }
            }
        };
        Ok(Progress::Message(total, message))
    }
}

/// A frame's head as read: where its payload starts and how long it is.
struct Head {
    fin: bool,
    opcode: u8,
    mask: [u8; 4],
    /// Bytes of the head (2 to 14).
    size: usize,
    len: u64,
}

/// The head at the start of `buf`, or None until all of it is there.
fn parse_head(buf: &[u8]) -> Result<Option<Head>, WsViolation> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    if b0 & 0x70 != 0 {
        return Err(WsViolation::Protocol("reserved bits set (no extension was agreed)"));
    }
    let opcode = b0 & 0x0F;
    if !matches!(opcode, CONTINUATION | TEXT | BINARY | CLOSE | PING | PONG) {
        return Err(WsViolation::Protocol("reserved opcode"));
    }
    if b1 & 0x80 == 0 {
        return Err(WsViolation::Protocol("client frame not masked"));
    }
    let (len, at) = match b1 & 0x7F {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => {
                let len = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                if len >> 63 != 0 {
                    return Err(WsViolation::Protocol("payload length's top bit set"));
                }
                (len, 10)
            }
            None => return Ok(None),
        },
        n => (u64::from(n), 2),
    };
    let Some(mask) = buf.get(at..at + 4) else {
        return Ok(None);
    };
    Ok(Some(Head {
        fin: b0 & 0x80 != 0,
        opcode,
        mask: mask.try_into().expect("4 bytes"),
        size: at + 4,
        len,
    }))
}

/// A close frame's code: none, or two bytes and a UTF-8 reason.
fn close_code(payload: &[u8]) -> Result<Option<u16>, WsViolation> {
    match payload {
        [] => Ok(None),
        [_] => Err(WsViolation::Protocol("close frame with a one-byte payload")),
        [a, b, reason @ ..] => {
            if std::str::from_utf8(reason).is_err() {
                return Err(WsViolation::NotUtf8);
            }
            Ok(Some(u16::from_be_bytes([*a, *b])))
        }
    }
}

fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    let word = u32::from_ne_bytes(mask);
    let mut chunks = payload.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ word;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (i, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[i];
    }
}

/// Writes the head of one whole (FIN) unmasked server frame carrying `len` bytes.
pub fn write_head(out: &mut Vec<u8>, opcode: u8, len: usize) {
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xFFFF => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// Writes one whole server frame.
pub fn write_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    write_head(out, opcode, payload.len());
    out.extend_from_slice(payload);
}

/// Writes a close frame: the code and a reason (cut to fit a control frame).
pub fn write_close(out: &mut Vec<u8>, code: u16, reason: &str) {
    let mut cut = reason.len().min(123);
    while !reason.is_char_boundary(cut) {
        cut -= 1;
    }
    write_head(out, CLOSE, 2 + cut);
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(&reason.as_bytes()[..cut]);
}

#[cfg(test)]
#[path = "ws_frame_tests.rs"]
mod tests;
