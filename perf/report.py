#!/usr/bin/env python3
"""Summarises perf/compare.sh results (one JSON line per oha run) into the comparison table.

  report.py RESULTS.jsonl            full table (medians across rounds)
  report.py --one RESULTS.jsonl      one line for the last run (progress while the script runs)
"""
import argparse
import json
import statistics
import sys

ORDER = ["direct", "nginx", "floor", "base", "prism", "baseon", "prismon"]


def load_oha(path):
    with open(path) as f:
        j = json.load(f)
    s = j.get("summary", {})
    lp = j.get("latencyPercentiles") or j.get("latency_percentiles") or {}
    codes = j.get("statusCodeDistribution", {}) or {}
    errors = j.get("errorDistribution", {}) or {}
    ok = sum(v for k, v in codes.items() if str(k).startswith("2"))
    non2xx = sum(v for k, v in codes.items() if not str(k).startswith("2"))
    # Requests still in flight when -z ends are cut off by oha: not failures.
    n_err = sum(v for k, v in errors.items() if "deadline" not in k)
    return {
        "seconds": s.get("total") or 0.0,
        "p50_us": (lp.get("p50") or 0) * 1e6,
        "p99_us": (lp.get("p99") or 0) * 1e6,
        "rps": s.get("requestsPerSec") or 0.0,
        "ok": ok,
        "non2xx": non2xx,
        "errors": n_err,
        "error_kinds": errors,
        "answered": ok + non2xx,
    }


def rows(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            r.update(load_oha(r["oha"]))
            cpu_s = r["cpu_ticks"] / r["hz"]
            r["cpu_us_per_req"] = cpu_s * 1e6 / r["answered"] if r["answered"] and r["target"] != "direct" else None
            busy = r.get("core_busy_ticks")
            if busy is not None and r["answered"]:
                r["core_us_per_req"] = busy / r["hz"] * 1e6 / r["answered"]
                # Busy time on the proxy core not charged to the proxy: softirq, or other work (noise).
                r["foreign_pct"] = 100.0 * max(0, busy - r["cpu_ticks"]) / r["hz"] / max(r["seconds"], 1e-9)
            else:
                r["core_us_per_req"] = r["foreign_pct"] = None
            r["sched_us_per_req"] = (
                r["sched_ns"] / 1e3 / r["answered"] if r["answered"] and r["target"] != "direct" else None
            )
            sc = r.get("syscalls", -1)
            r["syscalls_per_req"] = sc / r["answered"] if sc is not None and sc >= 0 and r["answered"] else None
            out.append(r)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1, suffix=""):
    return "-" if x is None else f"{x:.{nd}f}{suffix}"


def one(path):
    r = rows(path)[-1]
    extra = ""
    if r["cpu_us_per_req"] is not None and r["sched_us_per_req"] is not None:
        extra = f" cpu/req={r['cpu_us_per_req']:.1f}us (sched {r['sched_us_per_req']:.1f}us) rss={r['rss_kb']/1024:.1f}MiB"
    if r["foreign_pct"] is not None:
        extra += f" core-busy/req={r['core_us_per_req']:.1f}us other-on-proxy-core={r['foreign_pct']:.0f}%"
    bad = ""
    if r["errors"] or r["non2xx"]:
        bad = f" NON-2XX={r['non2xx']} ERRORS={r['errors']} {r['error_kinds']}"
    print(
        f"  round {r['round']} {r['target']:<6} {r['mode']:<6} p50={r['p50_us']:.0f}us p99={r['p99_us']:.0f}us "
        f"rps={r['rps']:.0f} n={r['answered']}{extra}{bad}",
        file=sys.stdout,
    )


def table(path, rate, duration):
    rs = rows(path)
    targets = [t for t in ORDER if any(r["target"] == t for r in rs)]
    rounds = sorted({r["round"] for r in rs})

    def get(t, mode, rnd=None):
        return [r for r in rs if r["target"] == t and r["mode"] == mode and (rnd is None or r["round"] == rnd)]

    # Added latency per round (target minus direct in the same round), then the median across rounds.
    def added(t, key):
        if t == "direct" or "direct" not in targets:
            return None
        diffs = []
        for rnd in rounds:
            a, d = get(t, "fixed", rnd), get("direct", "fixed", rnd)
            if a and d:
                diffs.append(a[0][key] - d[0][key])
        return med(diffs)

    summary = {}
    for t in targets:
        fx, cl = get(t, "fixed"), get(t, "closed")
        summary[t] = {
            "p50": med([r["p50_us"] for r in fx]),
            "p99": med([r["p99_us"] for r in fx]),
            "add_p50": added(t, "p50_us"),
            "add_p99": added(t, "p99_us"),
            "fixed_rps": med([r["rps"] for r in fx]),
            "cpu_fixed": med([r["cpu_us_per_req"] for r in fx]),
            "sys_fixed": med([r["syscalls_per_req"] for r in fx]),
            "cpu_closed": med([r["cpu_us_per_req"] for r in cl]),
            "sched_closed": med([r["sched_us_per_req"] for r in cl]),
            "core_closed": med([r["core_us_per_req"] for r in cl]),
            "foreign": med([r["foreign_pct"] for r in rs if r["target"] == t]),
            "closed_rps": med([r["rps"] for r in cl]),
            "rss": max([r["rss_kb"] for r in rs if r["target"] == t] or [0]) / 1024 or None,
            "bad": sum(r["errors"] + r["non2xx"] for r in rs if r["target"] == t),
            "total": sum(r["answered"] + r["errors"] for r in rs if r["target"] == t),
        }

    print(
        f"Loopback comparison: {len(rounds)} round(s), {duration}s per run; fixed rate {rate} req/s "
        f"(oha -q, --latency-correction); closed loop for throughput. Medians across rounds."
    )
    cols = [
        ("target", "", 8, lambda t, s: t),
        ("p50", "µs", 7, lambda t, s: fmt(s["p50"], 0)),
        ("p99", "µs", 7, lambda t, s: fmt(s["p99"], 0)),
        ("+p50", "µs", 7, lambda t, s: fmt(s["add_p50"], 0)),
        ("+p99", "µs", 7, lambda t, s: fmt(s["add_p99"], 0)),
        ("rate", "req/s", 7, lambda t, s: fmt(s["fixed_rps"], 0)),
        ("CPU/req", "µs@rate", 9, lambda t, s: fmt(s["cpu_fixed"], 1)),
        ("CPU/req", "µs,closed", 10, lambda t, s: fmt(s["cpu_closed"], 1)),
        ("sysc/req", "@rate", 9, lambda t, s: fmt(s["sys_fixed"], 2)),
        ("core/req", "µs,closed", 10, lambda t, s: fmt(s["core_closed"], 1)),
        ("closed", "req/s", 8, lambda t, s: fmt(s["closed_rps"], 0)),
        ("peakRSS", "MiB", 8, lambda t, s: fmt(s["rss"], 1)),
        ("other", "%core", 6, lambda t, s: fmt(s["foreign"], 0)),
        ("errors", "", 7, lambda t, s: str(s["bad"])),
    ]
    line = lambda cells: "".join(c.rjust(w + 1) if i else c.ljust(w) for i, (c, w) in enumerate(cells))
    print(line([(c[0], c[2]) for c in cols]))
    print(line([(c[1], c[2]) for c in cols]))
    print("-" * sum(c[2] + 1 for c in cols))
    for t in targets:
        print(line([(c[3](t, summary[t]), c[2]) for c in cols]))
    print()
    def ratio(a, b):
        return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"

    for name in ("base", "prism", "baseon", "prismon"):
        if name not in summary or "nginx" not in summary:
            continue
        p, n = summary[name], summary["nginx"]
        if "floor" in summary:
            f = summary["floor"]
            print(
                f"{name}/floor: CPU per request {ratio(p['cpu_closed'], f['cpu_closed'])} (closed loop), "
                f"{ratio(p['cpu_fixed'], f['cpu_fixed'])} (at {rate} req/s)   [target ≤ 1.10]"
            )
        print(
            f"{name}/nginx: CPU per request {ratio(p['cpu_closed'], n['cpu_closed'])} (closed loop), "
            f"{ratio(p['cpu_fixed'], n['cpu_fixed'])} (at {rate} req/s)   [target ≤ 0.80]"
        )
        print(
            f"{name}/nginx: added p50 {ratio(p['add_p50'], n['add_p50'])} "
            f"({fmt(p['add_p50'], 0)} µs vs {fmt(n['add_p50'], 0)} µs)   [target ≤ 1.00]"
        )
        print(
            f"{name}/nginx: added p99 {ratio(p['add_p99'], n['add_p99'])}   [target ≤ 2.00]; "
            f"system calls per request {fmt(p['sys_fixed'], 2)} vs {fmt(n['sys_fixed'], 2)}   [target ≤ nginx, aim ≤ 2]"
        )
    for t in targets:
        s = summary[t]
        if s["fixed_rps"] is not None and s["fixed_rps"] < 0.95 * rate:
            print(f"warning: {t} reached only {s['fixed_rps']:.0f} req/s of the {rate} req/s fixed rate")
        if s["foreign"] is not None and s["foreign"] > 20:
            print(
                f"warning: during {t}'s runs the proxy core spent {s['foreign']:.0f}% of the time on other work "
                "(softirq, or other processes such as a build): figures are skewed, rerun on a quiet machine"
            )
        if s["bad"]:
            print(f"warning: {t} had {s['bad']} errors or non-2xx answers of {s['total']} requests")
    print(
        "p50/p99/+p50/+p99: at the fixed rate; +: per-round difference to the direct run, median across rounds.\n"
        "CPU/req: utime+stime of the proxy's processes (/proc/PID/stat) over the run / answered requests\n"
        "  (closed loop: the throughput figure). sysc/req: perf stat raw_syscalls:sys_enter over the proxy's\n"
        "  processes at the fixed rate / requests (the tracepoint itself costs a little CPU in those runs).\n"
        "  core/req: all busy time of the proxy's core (incl. softirq) / requests.\n"
        "other %core: busy time on the proxy's core not charged to the proxy (softirq + anything else running: noise)."
    )
    return summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--one", action="store_true")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--duration", type=int, default=10)
    a = ap.parse_args()
    if a.one:
        one(a.results)
    else:
        table(a.results, a.rate, a.duration)


if __name__ == "__main__":
    main()
