//! What a run measured, and the table (or JSON) it prints; also the watch over the slow clients.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::client::{self, Shared};
use crate::node::{Emitted, FIRST_BLOCK};
use crate::{now_ns, ws, Args};

/// What the main thread read around the measuring window.
pub struct Window {
    pub t0: u64,
    pub t1: u64,
    pub rss_before: u64,
    pub rss_subscribed: u64,
    pub rss_load: u64,
    pub prism_ticks: u64,
    pub prism_sched_ns: u64,
    pub client_ns: u64,
    pub tool_ns: u64,
    /// (busy, total) jiffies of Prism's and the tool's cores over the window.
    pub prism_core: Option<(u64, u64)>,
    pub tool_core: Option<(u64, u64)>,
    /// The blocks the node mined in the window.
    pub emitted: Vec<Emitted>,
    /// Which connections were subscribed and live when the window opened: each must get every block.
    pub live_at_start: Vec<bool>,
    pub subscribe_s: f64,
    /// newHeads and logs subscriptions Prism held at the node once every client subscribed, and its
    /// WebSocket connections there.
    pub upstream: (usize, usize, u64),
}

#[derive(Default)]
struct SlowState {
    dropped_ns: Option<u64>,
    tcp_state: u8,
}

/// Watches the slow clients' TCP state without reading them: Prism dropping one shows as the socket
/// leaving ESTABLISHED (a FIN after a close frame: CLOSE_WAIT; a reset: CLOSE).
#[derive(Default)]
pub struct SlowWatch {
    seen: Vec<SlowState>,
}

fn tcp_state(fd: i32) -> u8 {
    let mut info = [0u8; 256];
    let mut len = info.len() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr() as *mut _,
            &mut len,
        )
    };
    if r == 0 {
        info[0]
    } else {
        0
    }
}

fn tcp_state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTABLISHED",
        7 => "CLOSE (reset)",
        8 => "CLOSE_WAIT (FIN)",
        _ => "other",
    }
}

pub struct SlowReport {
    pub count: usize,
    pub dropped: usize,
    /// Seconds from each dropped client's subscription to its drop, sorted.
    pub after_s: Vec<f64>,
    /// How each ended: "close frame 1008 ...", "reset", "FIN without a close frame", "still open".
    pub how: BTreeMap<String, usize>,
    /// Notifications found unread in their sockets at the end.
    pub unread_notifications: u64,
}

impl SlowWatch {
    pub fn watch(&mut self, shared: &Shared) {
        let slow = shared.slow.lock().unwrap();
        while self.seen.len() < slow.len() {
            self.seen.push(SlowState::default());
        }
        let now = now_ns();
        for (c, s) in slow.iter().zip(self.seen.iter_mut()) {
            if s.dropped_ns.is_none() {
                let st = tcp_state(c.fd);
                if st != 1 {
                    s.dropped_ns = Some(now);
                    s.tcp_state = st;
                }
            }
        }
    }

    pub fn dropped(&self) -> usize {
        self.seen.iter().filter(|s| s.dropped_ns.is_some()).count()
    }

    /// Reads what each slow client's socket holds, to see how it ended.
    pub fn finish(self, shared: &Shared) -> SlowReport {
        let slow = shared.slow.lock().unwrap();
        let mut r = SlowReport {
            count: slow.len(),
            dropped: 0,
            after_s: Vec::new(),
            how: BTreeMap::new(),
            unread_notifications: 0,
        };
        let mut chunk = vec![0u8; 1 << 16];
        for (c, s) in slow.iter().zip(self.seen.iter()) {
            let mut data = c.carry.clone();
            let mut err = None;
            let mut eof = false;
            loop {
                let n = unsafe { libc::recv(c.fd, chunk.as_mut_ptr() as *mut _, chunk.len(), libc::MSG_DONTWAIT) };
                if n > 0 {
                    data.extend_from_slice(&chunk[..n as usize]);
                    continue;
                }
                if n == 0 {
                    eof = true;
                } else {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::WouldBlock {
                        err = Some(e);
                    }
                }
                break;
            }
            let mut at = 0;
            let mut close = None;
            while let Some(f) = ws::parse(&data[at..]) {
                match f.opcode {
                    ws::TEXT => r.unread_notifications += 1,
                    ws::CLOSE => close = Some(client::close_reason(&data[at + f.start..at + f.end])),
                    _ => {}
                }
                at += f.end;
            }
            let how = match (close, err, eof) {
                (Some(reason), _, _) => format!("close frame {reason}"),
                (None, Some(e), _) => format!("{e}"),
                (None, None, true) => "FIN without a close frame".into(),
                (None, None, false) => "still open".into(),
            };
            let how = match s.dropped_ns {
                Some(_) => format!("{how} [{}]", tcp_state_name(s.tcp_state)),
                None => how,
            };
            *r.how.entry(how).or_default() += 1;
            if let Some(d) = s.dropped_ns {
                r.dropped += 1;
                r.after_s.push(d.saturating_sub(c.subscribed_ns) as f64 / 1e9);
            }
            unsafe { libc::close(c.fd) };
        }
        r.after_s.sort_by(|a, b| a.total_cmp(b));
        r
    }
}

pub struct Inputs<'a> {
    pub args: &'a Args,
    pub window: Window,
    pub arrivals: Vec<client::Arrival>,
    pub shared: &'a Shared,
    pub slow: SlowReport,
    pub calls: BTreeMap<String, u64>,
    pub unknown: BTreeMap<String, u64>,
    pub head_bytes: u64,
    pub ticks_per_s: u64,
    pub prism_threads: usize,
}

/// Latency quantiles in ms.
#[derive(Default, Clone, Copy)]
pub struct Quantiles {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

fn quantiles(mut v: Vec<u64>) -> Quantiles {
    if v.is_empty() {
        return Quantiles::default();
    }
    v.sort_unstable();
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1] as f64 / 1e6;
    Quantiles {
        n: v.len(),
        p50: at(0.50),
        p99: at(0.99),
        max: at(1.0),
    }
}

#[derive(Default)]
pub struct PerKind {
    pub subscribers: usize,
    pub delivered_in_window: u64,
    pub lost: u64,
    pub duplicate: u64,
    /// Each delivery: from the node's write of the block's frame to the client's read.
    pub each: Quantiles,
    /// Each block: from the node's write to the last client's read.
    pub last: Quantiles,
}

pub struct Report {
    pub text_head: String,
    pub heads: PerKind,
    pub logs: PerKind,
    pub window_s: f64,
    pub blocks: usize,
    pub first_block: u64,
    pub rss_before_kib: u64,
    pub rss_subscribed_kib: u64,
    pub rss_load_kib: u64,
    pub kib_per_subscriber: f64,
    pub delivered: u64,
    pub prism_us_per_note: f64,
    pub prism_us_per_note_ticks: f64,
    pub prism_core_busy: Option<f64>,
    /// Busy time on Prism's core not charged to Prism (softirq, other processes), as a share of the window.
    pub prism_core_other: Option<f64>,
    /// Prism's core's busy time per notification (Prism, plus the loopback softirq work on that core).
    pub prism_core_us_per_note: Option<f64>,
    pub client_us_per_note: f64,
    pub client_core_share: f64,
    pub tool_us_per_note: f64,
    pub tool_core_busy: Option<f64>,
    pub subscribed: usize,
    pub failed: usize,
    pub subscribe_s: f64,
    pub not_increasing: u64,
    pub early: u64,
    pub ends: BTreeMap<String, usize>,
    pub slow: SlowReport,
    pub calls: BTreeMap<String, u64>,
    pub unknown: BTreeMap<String, u64>,
    pub head_bytes: u64,
    /// newHeads and logs subscriptions Prism held at the node, and its WebSocket connections there.
    pub upstream: (usize, usize, u64),
}

impl Report {
    pub fn build(i: Inputs) -> Report {
        let a = i.args;
        let w = &i.window;
        let nb = w.emitted.len();
        let index: HashMap<u32, usize> = w
            .emitted
            .iter()
            .enumerate()
            .map(|(k, e)| ((e.block - FIRST_BLOCK) as u32, k))
            .collect();
        let clients = a.heads + a.logs;
        let mut count = vec![0u8; clients * nb];
        let (mut each_h, mut each_l) = (Vec::new(), Vec::new());
        let mut last_h = vec![0u64; nb];
        let mut last_l = vec![0u64; nb];
        let (mut heads, mut logs) = (PerKind::default(), PerKind::default());
        for ar in &i.arrivals {
            let conn = ar.conn as usize;
            if conn >= clients {
                continue;
            }
            let logs_kind = conn >= a.heads;
            if ar.t_ns >= w.t0 && ar.t_ns <= w.t1 {
                if logs_kind {
                    logs.delivered_in_window += 1;
                } else {
                    heads.delivered_in_window += 1;
                }
            }
            let Some(&k) = index.get(&ar.block) else { continue };
            let c = &mut count[conn * nb + k];
            *c = c.saturating_add(1);
            let e = &w.emitted[k];
            let sent = if logs_kind { e.logs_ns } else { e.heads_ns };
            if sent == 0 {
                continue;
            }
            let lat = ar.t_ns.saturating_sub(sent);
            if logs_kind {
                each_l.push(lat);
                last_l[k] = last_l[k].max(lat);
            } else {
                each_h.push(lat);
                last_h[k] = last_h[k].max(lat);
            }
        }
        for conn in 0..clients {
            if !w.live_at_start[conn] {
                continue;
            }
            let pk = if conn >= a.heads { &mut logs } else { &mut heads };
            pk.subscribers += 1;
            for &c in &count[conn * nb..(conn + 1) * nb] {
                if c == 0 {
                    pk.lost += 1;
                } else {
                    pk.duplicate += c as u64 - 1;
                }
            }
        }
        heads.each = quantiles(each_h);
        logs.each = quantiles(each_l);
        heads.last = quantiles(last_h.into_iter().filter(|&x| x > 0).collect());
        logs.last = quantiles(last_l.into_iter().filter(|&x| x > 0).collect());
        let window_s = (w.t1 - w.t0) as f64 / 1e9;
        let delivered = heads.delivered_in_window + logs.delivered_in_window;
        let per = |ns: f64| {
            if delivered > 0 {
                ns / 1e3 / delivered as f64
            } else {
                0.0
            }
        };
        let subscribers = a.heads + a.logs + a.slow;
        let busy = |c: Option<(u64, u64)>| c.filter(|c| c.1 > 0).map(|(b, t)| b as f64 / t as f64);
        let text_head = format!(
            "Prism {} ({} threads), one shard{}; {} newHeads + {} logs subscribers{}; a block every {} ms; newHeads result {} bytes",
            a.bin.display(),
            i.prism_threads,
            match (a.prism_cpu, a.tool_cpu) {
                (Some(p), Some(t)) => format!(" on core {p}, the tool on core {t}"),
                _ => " (not pinned)".into(),
            },
            a.heads,
            a.logs,
            if a.slow > 0 {
                format!(" + {} slow (never read; SO_RCVBUF {})", a.slow, if a.slow_rcvbuf > 0 { a.slow_rcvbuf.to_string() } else { "default".into() })
            } else {
                String::new()
            },
            a.interval_ms,
            i.head_bytes,
        );
        Report {
            text_head,
            window_s,
            blocks: nb,
            first_block: w.emitted.first().map(|e| e.block).unwrap_or(0),
            rss_before_kib: w.rss_before,
            rss_subscribed_kib: w.rss_subscribed,
            rss_load_kib: w.rss_load,
            kib_per_subscriber: if subscribers > 0 {
                (w.rss_subscribed as f64 - w.rss_before as f64) / subscribers as f64
            } else {
                0.0
            },
            delivered,
            prism_us_per_note: per(w.prism_sched_ns as f64),
            prism_us_per_note_ticks: per(w.prism_ticks as f64 * 1e9 / i.ticks_per_s as f64),
            prism_core_busy: busy(w.prism_core),
            prism_core_other: busy(w.prism_core).map(|b| b - w.prism_sched_ns as f64 / (w.t1 - w.t0).max(1) as f64),
            prism_core_us_per_note: busy(w.prism_core).map(|b| per(b * (w.t1 - w.t0) as f64)),
            client_us_per_note: per(w.client_ns as f64),
            client_core_share: w.client_ns as f64 / (w.t1 - w.t0).max(1) as f64,
            tool_us_per_note: per(w.tool_ns as f64),
            tool_core_busy: busy(w.tool_core),
            subscribed: i.shared.subscribed.load(Ordering::SeqCst),
            failed: i.shared.failed.load(Ordering::SeqCst),
            subscribe_s: w.subscribe_s,
            not_increasing: i.shared.not_increasing.load(Ordering::SeqCst),
            early: i.shared.early.load(Ordering::SeqCst),
            ends: i.shared.ends.lock().unwrap().clone(),
            slow: i.slow,
            calls: i.calls,
            unknown: i.unknown,
            head_bytes: i.head_bytes,
            upstream: w.upstream,
            heads,
            logs,
        }
    }

    pub fn table(&self) -> String {
        let mut s = String::new();
        let mib = |k: u64| k as f64 / 1024.0;
        let _ = writeln!(s, "{}", self.text_head);
        let _ = writeln!(
            s,
            "subscribe       {} subscribed, {} failed, in {:.1} s",
            self.subscribed, self.failed, self.subscribe_s
        );
        let _ = writeln!(
            s,
            "Prism RSS       {:.1} MiB before any client, {:.1} MiB all subscribed and idle: {:.2} KiB per subscriber; {:.1} MiB at the window's end",
            mib(self.rss_before_kib),
            mib(self.rss_subscribed_kib),
            self.kib_per_subscriber,
            mib(self.rss_load_kib)
        );
        let _ = writeln!(
            s,
            "window          {:.1} s: {} blocks from {}, {} notifications delivered ({} newHeads, {} logs)",
            self.window_s,
            self.blocks,
            self.first_block,
            self.delivered,
            self.heads.delivered_in_window,
            self.logs.delivered_in_window
        );
        let _ = writeln!(
            s,
            "complete        newHeads: {} subscribers x {} blocks, lost {}, duplicate {}; logs: {} x {}, lost {}, duplicate {}; out of order {}, before the answer {}",
            self.heads.subscribers, self.blocks, self.heads.lost, self.heads.duplicate,
            self.logs.subscribers, self.blocks, self.logs.lost, self.logs.duplicate,
            self.not_increasing, self.early
        );
        let _ = writeln!(
            s,
            "Prism CPU       {:.2} us per notification ({:.2} from utime+stime ticks){}",
            self.prism_us_per_note,
            self.prism_us_per_note_ticks,
            match (self.prism_core_busy, self.prism_core_other, self.prism_core_us_per_note) {
                (Some(b), Some(o), Some(u)) => format!(
                    "; its core {:.0} % busy ({u:.2} us per notification), {:.0} % of that not Prism's{}",
                    b * 100.0,
                    o * 100.0,
                    if o > 0.2 {
                        " (WARNING: something else ran there)"
                    } else {
                        ""
                    }
                ),
                _ => String::new(),
            }
        );
        let _ = writeln!(
            s,
            "tool CPU        clients {:.2} us per notification ({:.0} % of a core), whole tool {:.2} us{}",
            self.client_us_per_note,
            self.client_core_share * 100.0,
            self.tool_us_per_note,
            self.tool_core_busy
                .map(|b| format!("; its core {:.0} % busy", b * 100.0))
                .unwrap_or_default()
        );
        let _ = writeln!(
            s,
            "latency ms                     p50      p99      max   (from the node's write of the frame)"
        );
        for (name, k) in [("newHeads", &self.heads), ("logs", &self.logs)] {
            if k.each.n == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "  {name:<9} each delivery {:8.2} {:8.2} {:8.2}",
                k.each.p50, k.each.p99, k.each.max
            );
            let _ = writeln!(
                s,
                "  {name:<9} last client   {:8.2} {:8.2} {:8.2}",
                k.last.p50, k.last.p99, k.last.max
            );
        }
        if self.slow.count > 0 {
            let a = &self.slow.after_s;
            let q = |f: f64| {
                a.get(((f * a.len() as f64) as usize).min(a.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or(0.0)
            };
            let _ = writeln!(
                s,
                "slow clients    {} never read: {} dropped by Prism{}; {} notifications were unread in their sockets",
                self.slow.count,
                self.slow.dropped,
                if a.is_empty() {
                    String::new()
                } else {
                    format!(
                        " after {:.1} / {:.1} / {:.1} s (min / median / max from subscribing)",
                        q(0.0),
                        q(0.5),
                        q(1.0)
                    )
                },
                self.slow.unread_notifications
            );
            for (how, n) in &self.slow.how {
                let _ = writeln!(s, "                {n} x {how}");
            }
        }
        if !self.ends.is_empty() {
            let _ = writeln!(s, "client ends     (failures and connections Prism ended)");
            for (why, n) in &self.ends {
                let _ = writeln!(s, "                {n} x {why}");
            }
        }
        let calls: Vec<String> = self.calls.iter().map(|(m, n)| format!("{m} {n}")).collect();
        let _ = writeln!(
            s,
            "node            Prism held {} newHeads and {} logs subscriptions on {} WebSocket(s); calls: {}",
            self.upstream.0,
            self.upstream.1,
            self.upstream.2,
            calls.join(", ")
        );
        if !self.unknown.is_empty() {
            let _ = writeln!(s, "unknown methods {:?}", self.unknown);
        }
        s
    }

    pub fn json(&self) -> String {
        let q = |q: &Quantiles| {
            format!(
                "{{\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"n\":{}}}",
                q.p50, q.p99, q.max, q.n
            )
        };
        let k = |k: &PerKind| {
            format!(
                "{{\"subscribers\":{},\"delivered_in_window\":{},\"lost\":{},\"duplicate\":{},\"each\":{},\"last_client\":{}}}",
                k.subscribers, k.delivered_in_window, k.lost, k.duplicate, q(&k.each), q(&k.last)
            )
        };
        let map = |m: &BTreeMap<String, usize>| {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{}:{v}", json_str(k))).collect();
            format!("{{{}}}", parts.join(","))
        };
        let opt = |v: Option<f64>| v.map(|b| format!("{b:.3}")).unwrap_or("null".into());
        format!(
            concat!(
                "{{\"setup\":{},\"subscribed\":{},\"failed\":{},\"subscribe_s\":{:.2},",
                "\"rss_before_kib\":{},\"rss_subscribed_kib\":{},\"rss_load_kib\":{},\"kib_per_subscriber\":{:.3},",
                "\"window_s\":{:.3},\"blocks\":{},\"delivered\":{},\"prism_us_per_notification\":{:.3},",
                "\"prism_us_per_notification_ticks\":{:.3},\"prism_core_busy\":{},\"prism_core_other\":{},\"prism_core_us_per_notification\":{},\"client_us_per_notification\":{:.3},",
                "\"client_core_share\":{:.3},\"tool_us_per_notification\":{:.3},\"tool_core_busy\":{},",
                "\"out_of_order\":{},\"before_answer\":{},\"newHeads\":{},\"logs\":{},",
                "\"slow\":{{\"count\":{},\"dropped\":{},\"after_s\":[{}],\"how\":{},\"unread_notifications\":{}}},",
                "\"ends\":{},\"head_bytes\":{}}}"
            ),
            json_str(&self.text_head),
            self.subscribed,
            self.failed,
            self.subscribe_s,
            self.rss_before_kib,
            self.rss_subscribed_kib,
            self.rss_load_kib,
            self.kib_per_subscriber,
            self.window_s,
            self.blocks,
            self.delivered,
            self.prism_us_per_note,
            self.prism_us_per_note_ticks,
            opt(self.prism_core_busy),
            opt(self.prism_core_other),
            opt(self.prism_core_us_per_note),
            self.client_us_per_note,
            self.client_core_share,
            self.tool_us_per_note,
            opt(self.tool_core_busy),
            self.not_increasing,
            self.early,
            k(&self.heads),
            k(&self.logs),
            self.slow.count,
            self.slow.dropped,
            self.slow.after_s.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(","),
            map(&self.slow.how),
            self.slow.unread_notifications,
            map(&self.ends),
            self.head_bytes,
        )
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}
