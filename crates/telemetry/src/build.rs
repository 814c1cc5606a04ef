//! What the process is and what it uses: the version and commit (`prism --version`,
//! `prism_build_info`), and the standard process metrics (resident memory, open file descriptors, CPU
//! seconds) read from `/proc/self` when `/metrics` is scraped.

use std::fmt::Write as _;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The commit the binary was built from (set by `build.rs`; "unknown" outside a git checkout).
pub const COMMIT: &str = env!("PRISM_COMMIT");

/// `0.1.0 (commit 1a2b3c4d5e6f)`: what `prism --version` prints after the name.
pub const LONG_VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("PRISM_COMMIT"), ")");

/// `prism_build_info` and the `process_*` metrics (Prometheus' standard names).
pub fn render(out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP prism_build_info The running binary: version and commit.\n# TYPE prism_build_info gauge\nprism_build_info{{version=\"{VERSION}\",commit=\"{COMMIT}\"}} 1"
    );
    let Some(p) = ProcessStats::read() else {
        return;
    };
    let _ = writeln!(
        out,
        "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {}",
        p.resident_bytes
    );
    let _ = writeln!(
        out,
        "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {}",
        p.open_fds
    );
    let _ = writeln!(
        out,
        "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds {}",
        p.max_fds
    );
    let _ = writeln!(
        out,
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}",
        p.cpu_seconds
    );
    let _ = writeln!(
        out,
        "# HELP process_start_time_seconds Start time of the process since the Unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}",
        p.start_time_seconds
    );
}

/// This process as `/proc/self` tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    pub resident_bytes: u64,
    pub open_fds: u64,
    pub max_fds: u64,
    pub cpu_seconds: f64,
    pub start_time_seconds: f64,
}

impl ProcessStats {
    pub fn read() -> Option<ProcessStats> {
        // SAFETY: sysconf only reads a system constant.
        let (page, ticks) = unsafe { (libc::sysconf(libc::_SC_PAGESIZE), libc::sysconf(libc::_SC_CLK_TCK)) };
        let (page, ticks) = (page.max(1) as u64, ticks.max(1) as f64);
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let resident_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may hold spaces and parentheses): state is field 3.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        let start_ticks: f64 = fields.get(19)?.parse().ok()?;
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ").and_then(|v| v.trim().parse::<f64>().ok()))?;
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()?
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Some(ProcessStats {
            resident_bytes: resident_pages * page,
            open_fds,
            max_fds,
            cpu_seconds: (utime + stime) / ticks,
            start_time_seconds: boot + start_ticks / ticks,
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_measured() {
        let p = super::ProcessStats::read().expect("/proc/self is readable on Linux");
        assert!(p.resident_bytes > 1 << 20, "{p:?}");
        assert!(p.open_fds >= 3 && p.max_fds >= p.open_fds, "{p:?}");
        assert!(p.start_time_seconds > 1.6e9, "{p:?}");
        let mut out = String::new();
        super::render(&mut out);
        assert!(
            out.contains("prism_build_info{version=\"") && out.contains("process_open_fds "),
            "{out}"
        );
    }
}
