//! Incremental decoder for `Transfer-Encoding: chunked` bodies (RFC 9112 §7.1), with a size cap.

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("malformed chunked encoding")]
    Malformed,
    #[error("body exceeds the size limit")]
    TooLarge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(usize),
    DataCrlf,
    Trailers,
    Done,
}

/// Feed it bytes as they arrive; it appends decoded data to `out` and says how much input it used.
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    max: usize,
}

/// A size line longer than this is malformed (hex digits plus generous room for extensions).
const MAX_LINE: usize = 4096;

impl ChunkedDecoder {
    pub fn new(max: usize) -> Self {
        ChunkedDecoder {
            state: State::Size,
            max,
        }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes as much of `input` as possible. Returns bytes consumed; call again with more input until
    /// `is_done()`.
    pub fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, ChunkError> {
        let mut pos = 0;
        loop {
            match self.state {
                State::Done => return Ok(pos),
                State::Size => {
                    let Some(nl) = memchr::memchr(b'\n', &input[pos..]) else {
                        if input.len() - pos > MAX_LINE {
                            return Err(ChunkError::Malformed);
                        }
                        return Ok(pos);
                    };
                    // The same cap whether the line arrived in one read or several.
                    if nl > MAX_LINE {
                        return Err(ChunkError::Malformed);
                    }
                    let line = &input[pos..pos + nl];
                    let line = line.strip_suffix(b"\r").ok_or(ChunkError::Malformed)?;
                    let hex = line.split(|b| *b == b';').next().unwrap_or(&[]).trim_ascii();
                    if hex.is_empty() || hex.len() > 15 || !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(ChunkError::Malformed);
                    }
                    let size = usize::from_str_radix(std::str::from_utf8(hex).map_err(|_| ChunkError::Malformed)?, 16)
                        .map_err(|_| ChunkError::Malformed)?;
                    pos += nl + 1;
                    if size == 0 {
                        self.state = State::Trailers;
                    } else {
                        if out.len().saturating_add(size) > self.max {
                            return Err(ChunkError::TooLarge);
                        }
                        self.state = State::Data(size);
                    }
                }
                State::Data(left) => {
                    let n = left.min(input.len() - pos);
                    if n == 0 {
                        return Ok(pos);
                    }
                    out.extend_from_slice(&input[pos..pos + n]);
                    pos += n;
                    self.state = if n == left {
                        State::DataCrlf
                    } else {
                        State::Data(left - n)
                    };
                }
                State::DataCrlf => {
                    if input.len() - pos < 2 {
                        return Ok(pos);
                    }
                    if &input[pos..pos + 2] != b"\r\n" {
                        return Err(ChunkError::Malformed);
                    }
                    pos += 2;
                    self.state = State::Size;
                }
                State::Trailers => {
                    let Some(nl) = memchr::memchr(b'\n', &input[pos..]) else {
                        if input.len() - pos > MAX_LINE {
                            return Err(ChunkError::Malformed);
                        }
                        return Ok(pos);
                    };
                    if nl > MAX_LINE {
                        return Err(ChunkError::Malformed);
                    }
                    let line = &input[pos..pos + nl];
                    pos += nl + 1;
                    if line == b"\r" || line.is_empty() {
                        self.state = State::Done;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_across_arbitrary_splits() {
        let wire = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for split in 0..wire.len() {
            let mut d = ChunkedDecoder::new(1024);
            let mut out = Vec::new();
            let mut pending = wire[..split].to_vec();
            let used = d.decode(&pending, &mut out).unwrap();
            pending.drain(..used);
            pending.extend_from_slice(&wire[split..]);
            let used = d.decode(&pending, &mut out).unwrap();
            assert!(d.is_done(), "split {split}");
            assert_eq!(out, b"Wikipedia in\r\n\r\nchunks.");
            assert_eq!(&pending[used..], b"NEXT");
        }
    }

    #[test]
    fn rejects_bad_input_and_oversize() {
        let mut out = Vec::new();
        assert_eq!(
            ChunkedDecoder::new(10).decode(b"zz\r\n", &mut out),
            Err(ChunkError::Malformed)
        );
        assert_eq!(
            ChunkedDecoder::new(10).decode(b"3\r\nabcX\r\n", &mut out),
            Err(ChunkError::Malformed)
        );
        assert_eq!(
            ChunkedDecoder::new(10).decode(b"b\r\n", &mut out),
            Err(ChunkError::TooLarge)
        );
        assert_eq!(
            ChunkedDecoder::new(10).decode(b"ffffffffffffffffff\r\n", &mut out),
            Err(ChunkError::Malformed)
        );
    }
}
