//! The runtime's floor for `perf/compare.sh` (target `floor`): the least a glommio HTTP/1.1 forwarder can
//! do, with none of Prism's logic. One executor (one core), like a one-shard Prism: accept, read a request
//! with httparse, write it unchanged to an upstream connection owned by the client connection, read the
//! answer (Content-Length framed), write it back. Same runtime settings Prism uses by default
//! (`io_memory` 128 KiB, no spin before park), TCP_NODELAY on both sides, one buffer per direction kept for
//! the connection's life. Whatever Prism spends above this row is Prism's own; what this row spends above
//! nginx is how glommio's sockets work (issue 15).
//!
//! Usage: `floor_forwarder LISTEN_ADDR UPSTREAM_ADDR` (both `127.0.0.1:port`). No TLS, no chunked
//! answers, no pipelining: a measuring tool, not a proxy.

use std::io;
use std::net::SocketAddr;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};
use glommio::{LocalExecutorBuilder, Placement};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: floor_forwarder LISTEN_ADDR UPSTREAM_ADDR");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse().expect("LISTEN_ADDR");
    let upstream: SocketAddr = upstream.parse().expect("UPSTREAM_ADDR");
    LocalExecutorBuilder::new(Placement::Unbound)
        .name("floor")
        .io_memory(128 << 10)
        .spawn(move || async move {
            let listener = TcpListener::bind(listen).expect("bind");
            eprintln!("floor forwarder on {listen} -> {upstream}");
            loop {
                match listener.accept().await {
                    Ok(client) => {
                        glommio::spawn_local(async move {
                            let _ = serve(client, upstream).await;
                        })
                        .detach();
                    }
                    Err(e) => eprintln!("accept: {e}"),
                }
            }
        })
        .expect("executor")
        .join()
        .expect("join");
}

/// One client connection: requests in turn, each forwarded over this connection's own upstream socket.
async fn serve(mut client: TcpStream, upstream: SocketAddr) -> io::Result<()> {
    client.set_nodelay(true)?;
    let mut up: Option<TcpStream> = None;
    let mut req = Vec::with_capacity(4096);
    let mut ans = Vec::with_capacity(4096);
    loop {
        req.clear();
        let Some(len) = read_message(&mut client, &mut req, Kind::Request).await? else {
            return Ok(()); // the client closed between requests
        };
        if up.is_none() {
            let s = TcpStream::connect(upstream).await?;
            s.set_nodelay(true)?;
            up = Some(s);
        }
        let u = up.as_mut().expect("connected above");
        u.write_all(&req[..len]).await?;
        ans.clear();
        let Some(alen) = read_message(u, &mut ans, Kind::Response).await? else {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "upstream closed"));
        };
        client.write_all(&ans[..alen]).await?;
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Request,
    Response,
}

/// Reads one whole message (head and Content-Length body) into `buf`; its length, or `None` on a clean
/// close before any byte of it.
async fn read_message(s: &mut TcpStream, buf: &mut Vec<u8>, kind: Kind) -> io::Result<Option<usize>> {
    loop {
        if let Some(total) = framed_len(buf, kind)? {
            if buf.len() >= total {
                return Ok(Some(total));
            }
        }
        let at = buf.len();
        buf.resize(at + 4096, 0);
        let n = s.read(&mut buf[at..]).await?;
        buf.truncate(at + n);
        if n == 0 {
            if at == 0 {
                return Ok(None);
            }
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed mid-message"));
        }
    }
}

/// The whole message's length once its head is in `buf` (head + Content-Length).
fn framed_len(buf: &[u8], kind: Kind) -> io::Result<Option<usize>> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let parsed = match kind {
        Kind::Request => httparse::Request::new(&mut headers).parse(buf),
        Kind::Response => httparse::Response::new(&mut headers).parse(buf),
    };
    let head = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
    };
    let body = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0);
    Ok(Some(head + body))
}
