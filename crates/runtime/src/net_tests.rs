//! The socket contract Prism relies on from the shard's streams, held against the vendored glommio's
//! ring-based reads (vendor/README.md): every byte arrives once and in order whatever the reader's buffer
//! size, a read dropped while it waits loses nothing, and EOF and resets end a read instead of hanging it.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::net::TcpStream;
use super::{test_shard as on_shard, timeout_at};

/// What the peer does, step by step, once a client connected.
enum Step {
    Send(Vec<u8>),
    /// Waits until the test says go, so a read can be made to wait on an empty socket first.
    Wait,
    /// Reads this many bytes and echoes them back.
    Echo(usize),
    Close,
    Reset,
}

fn peer(steps: Vec<Step>) -> (SocketAddr, mpsc::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go, gate) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        for step in steps {
            match step {
                Step::Send(bytes) => s.write_all(&bytes).unwrap(),
                Step::Wait => gate.recv().unwrap(),
                Step::Echo(n) => {
                    let mut buf = vec![0; n];
                    s.read_exact(&mut buf).unwrap();
                    s.write_all(&buf).unwrap();
                }
                Step::Close => {
                    let _ = s.shutdown(Shutdown::Both);
                    return;
                }
                Step::Reset => {
                    socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
                    return;
                }
            }
        }
        // Keep the socket open until the test is done with it.
        let _ = gate.recv();
    });
    (addr, go)
}

fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// Reads until EOF with reads of `chunk` bytes.
async fn read_all(s: &mut TcpStream, chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0; chunk];
    loop {
        let n = timeout_at(deadline(), s.read(&mut buf))
            .await
            .expect("read hung")
            .unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_large_message_arrives_whole_and_in_order_for_every_read_size() {
    let message = pattern(300_000);
    for chunk in [1, 7, 2047, 2048, 2049, 65_536] {
        let (addr, _go) = peer(vec![Step::Send(message.clone()), Step::Close]);
        let got = on_shard(async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            read_all(&mut s, chunk).await
        });
        assert_eq!(got.len(), message.len(), "read size {chunk}");
        assert!(got == message, "bytes reordered or changed with read size {chunk}");
    }
}

#[test]
fn a_read_dropped_while_it_waits_loses_nothing_that_arrives_after() {
    let (addr, go) = peer(vec![Step::Wait, Step::Send(b"late bytes".to_vec()), Step::Close]);
    let got = on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 4096];
        let early = timeout_at(Instant::now() + Duration::from_millis(30), s.read(&mut buf)).await;
        assert!(early.is_err(), "nothing was sent yet, the read must still be waiting");
        go.send(()).unwrap();
        // A smaller buffer than the dropped read had: what its recv took must still come out in pieces.
        read_all(&mut s, 3).await
    });
    assert_eq!(got, b"late bytes");
}

#[test]
fn writes_and_reads_alternate_on_one_connection() {
    let sizes = [1usize, 100, 2048, 5000, 70_000, 3];
    let (addr, _go) = peer(sizes.iter().map(|&n| Step::Echo(n)).chain([Step::Close]).collect());
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        for (round, &n) in sizes.iter().enumerate() {
            let sent = pattern(n + round);
            let sent = &sent[round..];
            timeout_at(deadline(), s.write_all(sent))
                .await
                .expect("write hung")
                .unwrap();
            let mut back = vec![0; n];
            timeout_at(deadline(), s.read_exact(&mut back))
                .await
                .expect("read hung")
                .unwrap();
            assert!(back == sent, "round {round}: echo differs");
        }
        let mut buf = [0u8; 16];
        assert_eq!(
            timeout_at(deadline(), s.read(&mut buf)).await.unwrap().unwrap(),
            0,
            "EOF after close"
        );
    });
}

#[test]
fn eof_ends_a_waiting_read_and_every_read_after_it() {
    let (addr, go) = peer(vec![Step::Send(b"last".to_vec()), Step::Wait, Step::Close]);
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 64];
        let n = timeout_at(deadline(), s.read(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf[..n], b"last");
        go.send(()).unwrap();
        for _ in 0..3 {
            assert_eq!(
                timeout_at(deadline(), s.read(&mut buf))
                    .await
                    .expect("read hung")
                    .unwrap(),
                0
            );
        }
    });
}

#[test]
fn a_reset_ends_a_waiting_read_with_an_error() {
    let (addr, go) = peer(vec![Step::Wait, Step::Reset]);
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 64];
        let waiting = timeout_at(Instant::now() + Duration::from_millis(30), s.read(&mut buf)).await;
        assert!(waiting.is_err(), "the read waits while the peer is quiet");
        go.send(()).unwrap();
        let out = timeout_at(deadline(), s.read(&mut buf))
            .await
            .expect("read hung after a reset");
        let err = out.expect_err("a reset is an error, not data or EOF");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
    });
}

#[test]
fn a_peek_after_a_dropped_read_sees_the_bytes_that_read_took() {
    let (addr, go) = peer(vec![Step::Wait, Step::Send(b"peeked".to_vec())]);
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 64];
        let early = timeout_at(Instant::now() + Duration::from_millis(30), s.read(&mut buf)).await;
        assert!(early.is_err());
        go.send(()).unwrap();
        let n = timeout_at(deadline(), s.peek(&mut buf))
            .await
            .expect("peek hung")
            .unwrap();
        assert_eq!(&buf[..n], b"peeked");
        let n = timeout_at(deadline(), s.read(&mut buf)).await.unwrap().unwrap();
        assert_eq!(&buf[..n], b"peeked", "peek must not consume");
        go.send(()).unwrap();
    });
}

/// A peer that reads everything until EOF and reports what it got.
fn sink() -> (SocketAddr, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let _ = tx.send(got);
    });
    (addr, rx)
}

fn received(rx: &mpsc::Receiver<Vec<u8>>) -> Vec<u8> {
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the peer never saw EOF")
}

#[test]
fn a_stream_dropped_right_after_its_writes_still_delivers_every_byte_then_eof() {
    // Small writes are queued on the ring and reported written at once: dropping the stream before the
    // reactor ran must neither lose them nor close the socket under them.
    let (addr, rx) = sink();
    let sent: Vec<u8> = on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut sent = Vec::new();
        for i in 0..50usize {
            let piece = pattern(10 + i * 37);
            s.write_all(&piece).await.unwrap();
            sent.extend_from_slice(&piece);
        }
        let big = pattern(200_000);
        s.write_all(&big).await.unwrap();
        sent.extend_from_slice(&big);
        s.write_all(b"tail").await.unwrap();
        sent.extend_from_slice(b"tail");
        drop(s);
        sent
    });
    let got = received(&rx);
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "bytes lost or reordered");
}

#[test]
fn close_sends_the_queued_bytes_before_the_fin() {
    let (addr, rx) = sink();
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"answer before close").await.unwrap();
        s.close().await.unwrap();
        // The peer saw EOF: keep the stream alive past it, so only close could have sent the FIN.
        let got = received(&rx);
        assert_eq!(got, b"answer before close");
        drop(s);
    });
}

#[test]
fn writes_to_a_peer_that_reset_fail_instead_of_hanging() {
    let (addr, go) = peer(vec![Step::Wait, Step::Reset]);
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        go.send(()).unwrap();
        // Wait for the reset to arrive: a read sees it.
        let mut buf = [0u8; 8];
        let _ = timeout_at(deadline(), s.read(&mut buf)).await.expect("read hung");
        let mut failed = false;
        for _ in 0..100 {
            let wrote = timeout_at(deadline(), async {
                s.write_all(&[7u8; 512]).await?;
                s.flush().await
            })
            .await
            .expect("write hung");
            if wrote.is_err() {
                failed = true;
                break;
            }
        }
        let closed = timeout_at(deadline(), s.close()).await.expect("close hung");
        assert!(
            failed || closed.is_err(),
            "writes to a reset socket reported success every time"
        );
    });
}

/// Whether the kernel still holds a TCP socket from local port `from` to port `to` (`/proc/net/tcp`):
/// a socket lives on after its descriptor is closed while a ring write holds it.
fn tcp_socket_exists(from: u16, to: u16) -> bool {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let want = (format!(":{from:04X}"), format!(":{to:04X}"));
    table.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace().skip(1);
        let (local, remote) = (cols.next().unwrap_or(""), cols.next().unwrap_or(""));
        local.ends_with(&want.0) && remote.ends_with(&want.1)
    })
}

/// A peer that keeps its connection open and never reads: a write queued on the ring waits for room that
/// never comes, and the runtime keeps the socket for it even after its stream is dropped. `reset` ends the
/// wait: the kernel lets go of the socket while the peer still does not read, and the peer gets a reset,
/// not the rest. (Without it the socket stays until the peer reads: the test fails at "still held".)
#[test]
fn a_reset_frees_a_socket_whose_queued_write_waits_on_a_peer_that_never_reads() {
    let listener = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener.set_recv_buffer_size(4096).unwrap();
    listener
        .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    listener.listen(1).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let (go, gate) = mpsc::channel::<()>();
    let (tx, ended) = mpsc::channel::<std::io::Result<usize>>();
    std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut s: std::net::TcpStream = s.into();
        gate.recv().unwrap();
        let mut got = 0;
        let mut buf = vec![0u8; 64 * 1024];
        let end = loop {
            match s.read(&mut buf) {
                Ok(0) => break Ok(got),
                Ok(n) => got += n,
                Err(e) => break Err(e),
            }
        };
        let _ = tx.send(end);
    });
    on_shard(async move {
        use std::os::fd::AsRawFd;
        let mut s = TcpStream::connect(addr).await.unwrap();
        let fd = s.as_raw_fd();
        let port = s.local_addr().unwrap().port();
        assert!(tcp_socket_exists(port, addr.port()));
        // Fill both buffers: each 16 KiB write is queued and reported done; the next waits for it.
        let chunk = pattern(16 * 1024);
        let mut stalled = false;
        for _ in 0..10_000 {
            let until = Instant::now() + Duration::from_millis(200);
            if timeout_at(until, s.write_all(&chunk)).await.is_err() {
                stalled = true;
                break;
            }
        }
        assert!(stalled, "the peer never reads: some write must wait");
        super::net::reset(fd);
        drop(s);
        let until = deadline();
        while tcp_socket_exists(port, addr.port()) {
            assert!(Instant::now() < until, "the socket is still held by its queued write");
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    });
    go.send(()).unwrap();
    let end = ended
        .recv_timeout(Duration::from_secs(10))
        .expect("the peer's read hung");
    assert!(
        matches!(&end, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the peer should see a reset, got {end:?}"
    );
}

/// Waits until `count` reaches `n`, polling it; fails the test at the deadline.
async fn reach(count: &std::cell::Cell<usize>, n: usize, what: &str) {
    let until = deadline();
    while count.get() < n {
        assert!(Instant::now() < until, "only {} of {n} {what}", count.get());
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// More connections with bytes waiting than the runtime has provided buffers (256, vendor/glommio
/// sys/uring.rs): every reader first takes a few bytes and holds the rest of its recv, so the buffers run
/// out and later recvs fail with ENOBUFS inside the runtime. Each must still get its message whole.
#[test]
fn readers_get_every_byte_when_the_provided_buffers_run_out() {
    const CONNS: usize = 300;
    const LEN: usize = 1500;
    fn message(idx: usize) -> Vec<u8> {
        let mut m = (idx as u32).to_le_bytes().to_vec();
        m.extend((0..LEN).map(|i| (i * 31 + idx * 7) as u8));
        m
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go, gate) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for _ in 0..CONNS {
            open.push(listener.accept().unwrap().0);
        }
        gate.recv().unwrap();
        for (idx, s) in open.iter_mut().enumerate() {
            s.write_all(&message(idx)).unwrap();
            s.shutdown(Shutdown::Write).unwrap();
        }
        let _ = gate.recv(); // keeps the sockets open until the test is done
    });
    on_shard(async move {
        let armed = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let firsts = std::rc::Rc::new(std::cell::Cell::new(0usize));
        let mut readers = Vec::new();
        for _ in 0..CONNS {
            let mut s = TcpStream::connect(addr).await.unwrap();
            let (armed, firsts) = (armed.clone(), firsts.clone());
            readers.push(glommio::spawn_local(async move {
                // A large read that waits submits a recv for a whole buffer's worth; it is dropped, so the
                // 4-byte read below takes a few of those bytes and the buffer stays held for the rest.
                let mut big = vec![0u8; 2048];
                let waiting = futures_lite::future::poll_once(s.read(&mut big)).await;
                assert!(waiting.is_none(), "nothing was sent yet");
                armed.set(armed.get() + 1);
                let mut got = vec![0u8; 4];
                timeout_at(deadline(), s.read_exact(&mut got))
                    .await
                    .expect("first read hung")
                    .unwrap();
                firsts.set(firsts.get() + 1);
                // Hold this recv's buffer until every reader took its first bytes.
                reach(&firsts, CONNS, "readers got bytes").await;
                got.extend(read_all(&mut s, 512).await);
                got
            }));
        }
        reach(&armed, CONNS, "reads submitted").await;
        go.send(()).unwrap();
        let mut seen = vec![false; CONNS];
        for reader in readers {
            let got = reader.await;
            let idx = u32::from_le_bytes(got[..4].try_into().unwrap()) as usize;
            assert!(idx < CONNS && !seen[idx], "message {idx} twice or out of range");
            seen[idx] = true;
            assert!(
                got == message(idx),
                "message {idx} arrived changed ({} bytes)",
                got.len()
            );
        }
    });
}

/// An idle connection's read gives its buffer back while it waits, and still gets the bytes that end the
/// wait (`ReadBuf::read_idle_from`, what idle keep-alive clients cost: perf/idle_clients.py).
#[test]
fn an_idle_read_holds_no_buffer_while_it_waits_and_loses_nothing() {
    use prism_wire::http1::{ReadBuf, SpareBufs};
    let (addr, go) = peer(vec![
        Step::Send(b"first".to_vec()),
        Step::Wait,
        Step::Send(pattern(700)),
    ]);
    on_shard(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut buf = ReadBuf::with_capacity(1024);
        let spares = SpareBufs::default();
        let n = timeout_at(deadline(), buf.read_idle_from(&mut s, 1024, &spares))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(buf.filled(), &b"first"[..n]);
        buf.consume(n);
        if n < 5 {
            let rest = timeout_at(deadline(), buf.read_idle_from(&mut s, 1024, &spares))
                .await
                .unwrap()
                .unwrap();
            buf.consume(rest);
        }
        // Nothing buffered now: a read that has to wait lets go of the buffer.
        {
            let read = buf.read_idle_from(&mut s, 1024, &spares);
            futures_lite::pin!(read);
            assert!(
                futures_lite::future::poll_once(&mut read).await.is_none(),
                "nothing was sent yet"
            );
        }
        assert_eq!(buf.capacity(), 0, "a waiting idle read kept its buffer");
        assert_eq!(spares.take().len(), 1024, "the buffer went to the spares");
        go.send(()).unwrap();
        let mut got = Vec::new();
        while got.len() < 700 {
            let n = timeout_at(deadline(), buf.read_idle_from(&mut s, 1024, &spares))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "EOF before the message ended");
            got.extend_from_slice(buf.filled());
            buf.consume(n);
        }
        assert_eq!(got, pattern(700));
        assert!(buf.capacity() >= 512, "bytes arrived, so the buffer is back");
    });
}
