#!/usr/bin/env python3
"""The module graph of Prism's sources, read from the code, and a check that it only gets better.

    python3 scripts/layers.py            # check: fails on a wrong-way module edge or a file-level import
                                         # cycle not in scripts/layers.allow, and on an allowed one that is
                                         # gone or smaller (so the list only shrinks)
    python3 scripts/layers.py --graph    # print every module-level edge, the wrong-way ones marked
    python3 scripts/layers.py --cycles   # print the file-level import cycles (strongly connected components)

The layers are crates (docs/ARCHITECTURE.md), so the compiler already refuses an import from a crate to one
above it. What the crate graph cannot see, this script checks: the order of the modules inside one crate
(`jsonscan`, `http1`, `rpc` in prism-wire; `upstream` < `access` < `cluster` < `edge` < `app` in the
application crate) and import cycles between files anywhere.

Every crate's files are read as if they still lay in one tree (`crates/core/src/call/forward.rs` is
`core/forward.rs`, `crates/wire/src/rpc/mod.rs` is `rpc/mod.rs`), and `prism_core::x`, `prism_wire::rpc::x`
and `crate::x` resolve in that tree, so module names and the allow list read the same as before the split.
Modules are the top-level entries of that tree (`core`, `edge`, `jsonscan`...). Layers, lowest first: a
module may import its own layer and the ones below it. `LAYERS` is the order the architecture wants; an edge
upwards is wrong-way.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# Crate source roots: (directory, the module its lib.rs is, or None where the crate holds several modules).
CRATES = {
    "prism_wire": ("crates/wire/src", None),
    "prism_runtime": ("crates/runtime/src", "runtime"),
    "prism_config": ("crates/config/src", "config"),
    "prism_telemetry": ("crates/telemetry/src", "telemetry"),
    "prism_transport": ("crates/transport/src", "transport"),
    "prism_core": ("crates/core/src", "core"),
    "prism_solana": ("crates/solana/src", "solana"),
    "prism": ("src", None),
}
ALLOW = os.path.join(ROOT, "scripts", "layers.allow")

# Lowest first; one line is one layer.
LAYERS = [
    ["jsonscan", "http1", "runtime", "rpc"],
    ["config"],
    ["telemetry"],
    ["transport"],
    ["core"],
    ["solana"],
    ["upstream"],
    ["access"],
    ["cluster"],
    ["edge"],
    ["app", "demo", "main", "lib"],
]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}

PATH = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\};", re.S)


def files():
    """(virtual path in the one-tree layout, real path, the crate's own module or None)."""
    for crate, (root, module) in CRATES.items():
        base = os.path.join(ROOT, root)
        for dirpath, _, names in os.walk(base):
            for n in names:
                if not n.endswith(".rs"):
                    continue
                real = os.path.join(dirpath, n)
                rel = os.path.relpath(real, base)
                if module:
                    rel = os.path.join(module, "mod.rs" if rel == "lib.rs" else rel)
                elif rel == "lib.rs" and crate != "prism":
                    continue  # prism-wire's lib.rs only declares its modules
                yield rel, real, module


def module_of(rel):
    """`core/forward.rs` -> ["core", "forward"]; `core/mod.rs` -> ["core"]; `lib.rs` -> []."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"] or parts == ["main"]:
        return []
    return parts


def resolve(segments, known):
    """The longest prefix of `segments` that is a module file in `known`."""
    for n in range(len(segments), 0, -1):
        key = tuple(segments[:n])
        if key in known:
            return key
    return None


def strip_comments(text):
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def edges():
    found = sorted(files())
    mods = {tuple(module_of(r)): r for r, _, _ in found}
    out = set()
    for rel, real, own in found:
        here = module_of(rel)
        # Inline `mod tests;` files are children: `super` in core/classify/tests.rs is core::judge::classify.
        text = strip_comments(open(real, encoding="utf-8").read())
        if own:
            text = re.sub(r"\bcrate::", "crate::" + own + "::", text)
        # Another crate's path is the same path in the one tree: prism_core::x is core::x, prism_wire::rpc is rpc.
        for crate, (_, module) in CRATES.items():
            if crate != "prism":
                text = re.sub(r"\b" + crate + r"::", "crate::" + (module + "::" if module else ""), text)
        paths = []
        for m in USE_GROUP.finditer(text):
            base = m.group(1) + m.group(2)
            for item in re.split(r",", m.group(3)):
                item = item.strip().split(" as ")[0].strip()
                if item and not item.startswith("{"):
                    paths.append(base + "::" + item.replace("{", "").replace("}", "").strip())
        paths += [m.group(1) + m.group(2) for m in PATH.finditer(text)]
        for p in paths:
            segs = [s for s in p.split("::") if s]
            if segs[0] == "crate":
                segs = segs[1:]
            else:
                base = list(here)
                # A file `a/b.rs` is module a::b: `super` is a.
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                segs = base + segs
            target = resolve(segs, mods)
            if target is None or list(target) == here:
                continue
            out.add((rel, mods[target]))
    return out


def top(rel):
    m = module_of(rel)
    return m[0] if m else os.path.splitext(rel)[0]


def module_edges(file_edges):
    return sorted({(top(a), top(b)) for a, b in file_edges if top(a) != top(b)})


def wrong_way(medges):
    return [(a, b) for a, b in medges if RANK.get(a, 99) < RANK.get(b, 99)]


def sccs(nodes, adj):
    """Tarjan, iterative."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(adj.get(root, ())))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
                continue
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]
                counter[0] += 1
                stack.append(nxt)
                on.add(nxt)
                work.append((nxt, iter(adj.get(nxt, ()))))
            elif nxt in on:
                low[v] = min(low[v], index[nxt])
    return out


def file_cycles(file_edges):
    adj = {}
    for a, b in file_edges:
        adj.setdefault(a, set()).add(b)
    nodes = sorted({x for e in file_edges for x in e})
    return sccs(nodes, {k: sorted(v) for k, v in adj.items()})


def read_allow():
    """(wrong-way module edges, file cycles) the allow list still tolerates."""
    edges, cycles = set(), []
    if not os.path.exists(ALLOW):
        return edges, cycles
    for line in open(ALLOW, encoding="utf-8"):
        line = line.split("#")[0].strip()
        if line.startswith("cycle:"):
            cycles.append(sorted(line[len("cycle:"):].split()))
        elif line:
            a, b = [x.strip() for x in line.split("->")]
            edges.add((a, b))
    return edges, cycles


def main():
    fe = edges()
    me = module_edges(fe)
    wrong = wrong_way(me)
    if "--graph" in sys.argv:
        for a, b in me:
            mark = "  WRONG-WAY" if (a, b) in wrong else ""
            print(f"{a} -> {b}{mark}")
        return 0
    if "--cycles" in sys.argv:
        cycles = file_cycles(fe)
        for c in cycles:
            print(f"{len(c)} files: " + ", ".join(c))
        mcycles = sccs(sorted({x for e in me for x in e}), {a: [b for x, b in me if x == a] for a, _ in me})
        print(f"file-level cycles: {len(cycles)} (largest {max((len(c) for c in cycles), default=0)} files)")
        print(f"module-level cycles: {[c for c in mcycles]}")
        return 0
    allow, allowed_cycles = read_allow()
    new = [e for e in wrong if e not in allow]
    gone = sorted(allow - set(wrong))
    bad = 0
    for a, b in new:
        users = sorted(f for f, t in fe if top(f) == a and top(t) == b)
        print(f"layers: wrong-way import {a} -> {b} (in {', '.join(users)}); see docs/ARCHITECTURE.md")
        bad += 1
    for a, b in gone:
        print(f"layers: {a} -> {b} no longer occurs: remove it from scripts/layers.allow")
        bad += 1
    cycles = file_cycles(fe)
    for c in cycles:
        if not any(set(c) <= set(k) for k in allowed_cycles):
            print(f"layers: new import cycle between {', '.join(c)}: break it (see docs/ARCHITECTURE.md)")
            bad += 1
    for k in allowed_cycles:
        if k not in cycles:
            print(f"layers: the allowed cycle {' '.join(k)} is gone or smaller: update scripts/layers.allow")
            bad += 1
    if bad:
        return 1
    print(
        f"layers: ok ({len(me)} module edges, no module cycle; {len(wrong)} wrong-way edges and "
        f"{len(cycles)} file cycles still allowed in scripts/layers.allow)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
