//! The subscribers: non-blocking sockets over epoll (libc), a few threads (one by default), each owning a
//! share of the connections. A connection connects, upgrades, sends `eth_subscribe`, waits for its answer,
//! then reads notifications: only the frame header and the block number are parsed, and each arrival is
//! kept as (connection, block, instant) for the report. Slow clients subscribe the same way and are then
//! handed to the main thread, which never reads them until the end.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::json;
use crate::node::{FIRST_BLOCK, LOG_ADDRESS};
use crate::now_ns;
use crate::ws;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Heads,
    Logs,
    Slow,
}

/// Connection states, as published to the main thread.
pub const IDLE: u8 = 0;
pub const LIVE: u8 = 1;
pub const FAILED: u8 = 2;
pub const CLOSED: u8 = 3;
pub const HANDED_OVER: u8 = 4;

/// One notification received: which connection, which block (above `FIRST_BLOCK`), when.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub conn: u32,
    pub block: u32,
    pub t_ns: u64,
}

/// A slow client after its subscription was answered: never read again until the end.
pub struct SlowConn {
    pub fd: i32,
    /// Bytes read past the subscription's answer.
    pub carry: Vec<u8>,
    pub subscribed_ns: u64,
}

pub struct Plan {
    pub port: u16,
    pub heads: usize,
    pub logs: usize,
    pub slow: usize,
    pub threads: usize,
    /// SO_RCVBUF for slow clients (0: the system's default).
    pub slow_rcvbuf: usize,
    /// Connections connecting, upgrading or subscribing at once (all threads together).
    pub max_pending: usize,
}

impl Plan {
    pub fn total(&self) -> usize {
        self.heads + self.logs + self.slow
    }

    pub fn kind(&self, i: usize) -> Kind {
        if i < self.heads {
            Kind::Heads
        } else if i < self.heads + self.logs {
            Kind::Logs
        } else {
            Kind::Slow
        }
    }
}

/// What the client threads and the main thread share.
pub struct Shared {
    pub state: Vec<AtomicU8>,
    /// Highest block each connection received.
    pub last_block: Vec<AtomicU64>,
    pub subscribed: AtomicUsize,
    pub failed: AtomicUsize,
    /// Arrivals are kept from this instant on (ns; u64::MAX: not yet).
    pub record_from: AtomicU64,
    pub stop: AtomicBool,
    /// Notifications of a block at or below one the connection already had (duplicates or a head going
    /// backwards).
    pub not_increasing: AtomicU64,
    /// Notifications that came before their subscription's answer.
    pub early: AtomicU64,
    /// Why connections failed or ended (first message of each kind, with counts).
    pub ends: Mutex<BTreeMap<String, usize>>,
    pub slow: Mutex<Vec<SlowConn>>,
    pub tids: Mutex<Vec<i32>>,
}

impl Shared {
    pub fn new(total: usize) -> Arc<Shared> {
        Arc::new(Shared {
            state: (0..total).map(|_| AtomicU8::new(IDLE)).collect(),
            last_block: (0..total).map(|_| AtomicU64::new(0)).collect(),
            subscribed: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            record_from: AtomicU64::new(u64::MAX),
            stop: AtomicBool::new(false),
            not_increasing: AtomicU64::new(0),
            early: AtomicU64::new(0),
            ends: Mutex::new(BTreeMap::new()),
            slow: Mutex::new(Vec::new()),
            tids: Mutex::new(Vec::new()),
        })
    }

    fn end(&self, why: String) {
        *self.ends.lock().unwrap().entry(why).or_default() += 1;
    }
}

#[derive(PartialEq, Eq)]
enum St {
    Waiting,
    Connecting,
    Upgrading,
    Subscribing,
    Live,
    Gone,
}

struct Conn {
    fd: i32,
    global: usize,
    kind: Kind,
    st: St,
    carry: Vec<u8>,
    last: u64,
}

/// Runs one client thread over the connections `i` with `i % threads == t`; returns its arrivals.
pub fn run(plan: Arc<Plan>, shared: Arc<Shared>, t: usize) -> Vec<Arrival> {
    shared.tids.lock().unwrap().push(unsafe { libc::gettid() });
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(epfd >= 0, "epoll_create1: {}", std::io::Error::last_os_error());
    let mut conns: Vec<Conn> = (0..plan.total())
        .filter(|i| i % plan.threads == t)
        .map(|i| Conn {
            fd: -1,
            global: i,
            kind: plan.kind(i),
            st: St::Waiting,
            carry: Vec::new(),
            last: 0,
        })
        .collect();
    let max_pending = (plan.max_pending / plan.threads).max(1);
    let mut next_start = 0usize;
    let mut pending = 0usize;
    let mut arrivals: Vec<Arrival> = Vec::with_capacity(1 << 20);
    let mut buf = vec![0u8; 1 << 16];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let subscribe_heads = br#"{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}"#.to_vec();
    let subscribe_logs = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs",{{"address":"{LOG_ADDRESS}"}}]}}"#
    )
    .into_bytes();
    let mut rng = 0x2545_f491_4f6c_dd1du64 ^ t as u64;
    let mut mask = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng as u32).to_le_bytes()
    };

    while !shared.stop.load(Ordering::Relaxed) {
        // Start connections while fewer than `max_pending` are on their way.
        while pending < max_pending && next_start < conns.len() {
            let c = &mut conns[next_start];
            let idx = next_start;
            next_start += 1;
            match connect(plan.port, if c.kind == Kind::Slow { plan.slow_rcvbuf } else { 0 }) {
                Ok(fd) => {
                    c.fd = fd;
                    c.st = St::Connecting;
                    pending += 1;
                    epoll(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLOUT as u32, idx);
                }
                Err(e) => fail(&shared, c, format!("connect: {e}")),
            }
        }
        let n = unsafe { libc::epoll_wait(epfd, events.as_mut_ptr(), events.len() as i32, 50) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            panic!("epoll_wait: {e}");
        }
        let record_from = shared.record_from.load(Ordering::Relaxed);
        for ev in &events[..n as usize] {
            let idx = ev.u64 as usize;
            let c = &mut conns[idx];
            match c.st {
                St::Connecting => {
                    let mut err: libc::c_int = 0;
                    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                    unsafe {
                        libc::getsockopt(
                            c.fd,
                            libc::SOL_SOCKET,
                            libc::SO_ERROR,
                            &mut err as *mut _ as *mut _,
                            &mut len,
                        )
                    };
                    if err != 0 {
                        pending -= 1;
                        fail(
                            &shared,
                            c,
                            format!("connect: {}", std::io::Error::from_raw_os_error(err)),
                        );
                        continue;
                    }
                    let hs = ws::client_handshake(&format!("127.0.0.1:{}", plan.port), "/");
                    if !write_all(c.fd, &hs) {
                        pending -= 1;
                        fail(&shared, c, "handshake write failed".into());
                        continue;
                    }
                    c.st = St::Upgrading;
                    epoll(epfd, libc::EPOLL_CTL_MOD, c.fd, libc::EPOLLIN as u32, idx);
                }
                St::Upgrading | St::Subscribing | St::Live => {
                    let r = unsafe { libc::read(c.fd, buf.as_mut_ptr() as *mut _, buf.len()) };
                    if r <= 0 {
                        let e = std::io::Error::last_os_error();
                        if r < 0 && e.kind() == std::io::ErrorKind::WouldBlock {
                            continue;
                        }
                        if c.st != St::Live {
                            pending -= 1;
                        }
                        let why = if r == 0 {
                            "closed by Prism (EOF)".to_string()
                        } else {
                            format!("read: {e}")
                        };
                        end(&shared, c, why, epfd);
                        continue;
                    }
                    // The instant this read returned: every frame in it arrived by then.
                    let now = now_ns();
                    let record = now >= record_from;
                    // Usually one whole frame per read: parsed in place, only a partial frame is kept.
                    let mut carried = std::mem::take(&mut c.carry);
                    let data: &[u8] = if carried.is_empty() {
                        &buf[..r as usize]
                    } else {
                        carried.extend_from_slice(&buf[..r as usize]);
                        &carried
                    };
                    let mut at = 0usize;
                    if c.st == St::Upgrading {
                        let Some(h) = data.windows(4).position(|w| w == b"\r\n\r\n") else {
                            c.carry = data.to_vec();
                            continue;
                        };
                        if !data.starts_with(b"HTTP/1.1 101") {
                            pending -= 1;
                            let text = String::from_utf8_lossy(&data[..data.len().min(300)]).into_owned();
                            let status = text.lines().next().unwrap_or("").to_string();
                            let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
                            fail(&shared, c, format!("upgrade refused: {status} {body}"));
                            continue;
                        }
                        at = h + 4;
                        let sub = if c.kind == Kind::Logs {
                            &subscribe_logs
                        } else {
                            &subscribe_heads
                        };
                        let mut frame = Vec::with_capacity(sub.len() + 14);
                        ws::client_frame(&mut frame, ws::TEXT, sub, mask());
                        if !write_all(c.fd, &frame) {
                            pending -= 1;
                            fail(&shared, c, "subscribe write failed".into());
                            continue;
                        }
                        c.st = St::Subscribing;
                    }
                    while let Some(f) = ws::parse(&data[at..]) {
                        let (start, stop) = (at + f.start, at + f.end);
                        at += f.end;
                        let payload = &data[start..stop];
                        match f.opcode {
                            ws::TEXT if c.st == St::Subscribing && !is_notification(payload) => {
                                pending -= 1;
                                if json::field(payload, "result").and_then(json::string).is_none() {
                                    fail(
                                        &shared,
                                        c,
                                        format!("subscribe refused: {}", String::from_utf8_lossy(payload)),
                                    );
                                    break;
                                }
                                shared.subscribed.fetch_add(1, Ordering::SeqCst);
                                if c.kind == Kind::Slow {
                                    epoll(epfd, libc::EPOLL_CTL_DEL, c.fd, 0, idx);
                                    shared.state[c.global].store(HANDED_OVER, Ordering::SeqCst);
                                    shared.slow.lock().unwrap().push(SlowConn {
                                        fd: c.fd,
                                        carry: data[at..].to_vec(),
                                        subscribed_ns: now,
                                    });
                                    c.st = St::Gone;
                                    break;
                                }
                                c.st = St::Live;
                                shared.state[c.global].store(LIVE, Ordering::SeqCst);
                            }
                            ws::TEXT => {
                                if c.st == St::Subscribing {
                                    shared.early.fetch_add(1, Ordering::Relaxed);
                                }
                                let needle: &[u8] = if c.kind == Kind::Logs {
                                    br#""blockNumber":""#
                                } else {
                                    br#""number":""#
                                };
                                let Some(block) = json::hex_after(payload, needle) else {
                                    shared.end("a text frame with no block number".into());
                                    continue;
                                };
                                if block <= c.last {
                                    shared.not_increasing.fetch_add(1, Ordering::Relaxed);
                                }
                                c.last = c.last.max(block);
                                shared.last_block[c.global].store(c.last, Ordering::Relaxed);
                                if record {
                                    arrivals.push(Arrival {
                                        conn: c.global as u32,
                                        block: block.saturating_sub(FIRST_BLOCK) as u32,
                                        t_ns: now,
                                    });
                                }
                            }
                            ws::PING => {
                                let mut pong = Vec::new();
                                ws::client_frame(&mut pong, ws::PONG, payload, mask());
                                write_all(c.fd, &pong);
                            }
                            ws::CLOSE => {
                                if c.st != St::Live {
                                    pending -= 1;
                                }
                                let why = format!("close frame from Prism: {}", close_reason(payload));
                                end(&shared, c, why, epfd);
                                break;
                            }
                            op => shared.end(format!("unexpected opcode {op} (fin {})", f.fin)),
                        }
                    }
                    if c.st != St::Gone && at < data.len() {
                        c.carry = data[at..].to_vec();
                    }
                }
                St::Waiting | St::Gone => {}
            }
        }
    }
    for c in &conns {
        if c.fd >= 0 && c.st != St::Gone {
            unsafe { libc::close(c.fd) };
        }
    }
    unsafe { libc::close(epfd) };
    arrivals
}

fn is_notification(payload: &[u8]) -> bool {
    payload.windows(16).any(|w| w == b"eth_subscription")
}

/// "1008 client too slow: ..." from a close frame's payload.
pub fn close_reason(payload: &[u8]) -> String {
    if payload.len() < 2 {
        return "no code".into();
    }
    let code = u16::from_be_bytes([payload[0], payload[1]]);
    format!("{code} {}", String::from_utf8_lossy(&payload[2..]))
}

fn fail(shared: &Shared, c: &mut Conn, why: String) {
    shared.failed.fetch_add(1, Ordering::SeqCst);
    shared.state[c.global].store(FAILED, Ordering::SeqCst);
    shared.end(why);
    if c.fd >= 0 {
        unsafe { libc::close(c.fd) };
    }
    c.fd = -1;
    c.st = St::Gone;
}

fn end(shared: &Shared, c: &mut Conn, why: String, epfd: i32) {
    let was_live = c.st == St::Live;
    epoll(epfd, libc::EPOLL_CTL_DEL, c.fd, 0, 0);
    if was_live {
        shared.state[c.global].store(CLOSED, Ordering::SeqCst);
        shared.end(why);
        unsafe { libc::close(c.fd) };
        c.fd = -1;
        c.st = St::Gone;
    } else {
        fail(shared, c, why);
    }
}

fn epoll(epfd: i32, op: i32, fd: i32, events: u32, idx: usize) {
    let mut ev = libc::epoll_event {
        events,
        u64: idx as u64,
    };
    unsafe { libc::epoll_ctl(epfd, op, fd, &mut ev) };
}

fn connect(port: u16, rcvbuf: usize) -> std::io::Result<i32> {
    unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const _ as *const _,
            4,
        );
        if rcvbuf > 0 {
            let v = rcvbuf as libc::c_int;
            libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &v as *const _ as *const _, 4);
        }
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
            },
            sin_zero: [0; 8],
        };
        let r = libc::connect(
            fd,
            &addr as *const _ as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                libc::close(fd);
                return Err(e);
            }
        }
        Ok(fd)
    }
}

/// Writes a small message whole (a handshake, a subscribe, a pong): the socket's buffer takes it.
fn write_all(fd: i32, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        let r = unsafe { libc::write(fd, data.as_ptr() as *const _, data.len()) };
        if r <= 0 {
            return false;
        }
        data = &data[r as usize..];
    }
    true
}
