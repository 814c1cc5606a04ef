//! One upstream connection: plain TCP or TLS over TCP, with its read buffer.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::client::TlsStream;

use prism_runtime::net::TcpStream;
use prism_wire::http1::ReadBuf;

pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    /// True when the peer has not closed the socket and sent nothing unasked. A non-blocking `MSG_PEEK`:
    /// one syscall, no ring round trip, so a pooled connection the server closed is dropped before use.
    pub fn looks_alive(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: recv on a valid fd we own into a one-byte stack buffer; MSG_PEEK leaves data queued.
        let n = unsafe {
            libc::recv(
                self.tcp().as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_close(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}

/// A connection plus the bytes read from it but not yet used. Its buffer is lent by the pool for each
/// exchange (`ReadBuf::take_from`), so a connection idle in the pool holds none.
pub struct Conn {
    pub stream: Stream,
    pub buf: ReadBuf,
}

/// The read buffer an upstream exchange uses.
pub const READ_BUF: usize = 16 * 1024;

impl Conn {
    pub fn new(stream: Stream) -> Self {
        Conn {
            stream,
            buf: ReadBuf::idle(READ_BUF),
        }
    }
}
