#!/usr/bin/env python3
"""Bursty page loads through Prism: each "page" fires its reads at once, most of them identical eth_calls (a
token list asking balanceOf for the same wallet, the same decimals() again and again). Prints how many calls the
clients made and how many reached the upstream (from Prism's /metrics), and the reduction ratio.

Usage: page_load.py PRISM_URL ADMIN_URL [PAGES] [CALLS_PER_PAGE] [DISTINCT_PER_PAGE]
"""
import json
import sys
import threading
import urllib.request


def post(url, body):
    req = urllib.request.Request(url, data=body.encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def metric_sum(admin, name):
    text = urllib.request.urlopen(admin + "/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def page(url, page_no, calls, distinct, errors):
    threads = []

    def one(i):
        # Most calls repeat a handful of questions; `distinct` of them are unique to this page.
        if i < distinct:
            data = "0x70a08231%064x" % (page_no * 1000 + i)
        else:
            data = "0x313ce567"  # decimals(): asked by every token row
        body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "eth_call",
                           "params": [{"to": "0x" + "ab" * 20, "data": data}, "latest"]})
        try:
            out = post(url, body)
            if out.get("id") != i or "result" not in out:
                errors.append(out)
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors.append(str(e))

    for i in range(calls):
        t = threading.Thread(target=one, args=(i,))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def main():
    url, admin = sys.argv[1], sys.argv[2]
    pages = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    distinct = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    before_up = metric_sum(admin, "prism_upstream_attempts_total")
    before_calls = metric_sum(admin, "prism_calls_total")
    errors = []
    for p in range(pages):
        page(url, p, calls, distinct, errors)
    up = metric_sum(admin, "prism_upstream_attempts_total") - before_up
    client = metric_sum(admin, "prism_calls_total") - before_calls
    print(json.dumps({"pages": pages, "calls_per_page": calls, "client_calls": int(client),
                      "upstream_calls": int(up), "reduction": round(client / max(up, 1), 2),
                      "errors": len(errors)}))
    if errors:
        print("first error:", errors[0], file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
