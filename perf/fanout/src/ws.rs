//! Just enough WebSocket (RFC 6455) for both ends of the test: the server's `Sec-WebSocket-Accept`
//! (SHA-1 + base64, for the fake node), masked client frames, and parsing frames from either side.

/// WebSocket opcodes the tool cares about.
pub const TEXT: u8 = 1;
pub const CLOSE: u8 = 8;
pub const PING: u8 = 9;
pub const PONG: u8 = 10;

/// One parsed frame: where its payload lies in the buffer, and how long the whole frame is.
#[derive(Debug, Clone, Copy)]
pub struct Frame {
    pub fin: bool,
    pub opcode: u8,
    pub start: usize,
    pub end: usize,
    pub mask: Option<[u8; 4]>,
}

/// Parses the frame at the start of `buf`; `None` until all of it is there.
pub fn parse(buf: &[u8]) -> Option<Frame> {
    if buf.len() < 2 {
        return None;
    }
    let fin = buf[0] & 0x80 != 0;
    let opcode = buf[0] & 0x0f;
    let masked = buf[1] & 0x80 != 0;
    let mut pos = 2;
    let len = match buf[1] & 0x7f {
        126 => {
            if buf.len() < 4 {
                return None;
            }
            pos = 4;
            u16::from_be_bytes([buf[2], buf[3]]) as usize
        }
        127 => {
            if buf.len() < 10 {
                return None;
            }
            pos = 10;
            u64::from_be_bytes(buf[2..10].try_into().ok()?) as usize
        }
        n => n as usize,
    };
    let mask = if masked {
        if buf.len() < pos + 4 {
            return None;
        }
        let m = [buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]];
        pos += 4;
        Some(m)
    } else {
        None
    };
    let end = pos.checked_add(len)?;
    if buf.len() < end {
        return None;
    }
    Some(Frame {
        fin,
        opcode,
        start: pos,
        end,
        mask,
    })
}

/// Undoes a client's mask in place.
pub fn unmask(payload: &mut [u8], mask: [u8; 4]) {
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

fn header(out: &mut Vec<u8>, opcode: u8, len: usize, masked: bool) {
    out.push(0x80 | opcode);
    let m = if masked { 0x80 } else { 0 };
    if len < 126 {
        out.push(m | len as u8);
    } else if len < 65536 {
        out.push(m | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(m | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// A server frame (unmasked).
pub fn server_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    header(out, opcode, payload.len(), false);
    out.extend_from_slice(payload);
}

/// A client frame, masked with `mask` as RFC 6455 requires of clients.
pub fn client_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: [u8; 4]) {
    header(out, opcode, payload.len(), true);
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
}

/// The client's upgrade request for `path` on `host`.
pub fn client_handshake(host: &str, path: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

/// `Sec-WebSocket-Accept` for a client's key.
pub fn accept_key(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64(&sha1(&input))
}

fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks(64) {
        let mut w = [0u32; 80];
        for i in 0..16 {
            w[i] = u32::from_be_bytes(block[4 * i..4 * i + 4].try_into().unwrap());
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_key_is_the_rfc_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn frames_round_trip() {
        let mut buf = Vec::new();
        let body = vec![b'x'; 70_000];
        client_frame(&mut buf, TEXT, &body, [1, 2, 3, 4]);
        let f = parse(&buf).unwrap();
        assert_eq!((f.opcode, f.end), (TEXT, buf.len()));
        let mut p = buf[f.start..f.end].to_vec();
        unmask(&mut p, f.mask.unwrap());
        assert_eq!(p, body);
        assert!(parse(&buf[..buf.len() - 1]).is_none());
        let mut s = Vec::new();
        server_frame(&mut s, TEXT, b"hello");
        let f = parse(&s).unwrap();
        assert_eq!(&s[f.start..f.end], b"hello");
    }
}
