#!/usr/bin/env python3
"""Issue 39's size targets for the sources of every crate (src/ and crates/*/src/), read from the code, and a ratchet so they only get better.

    python3 scripts/targets.py           # check: fails on an offender not in scripts/targets.allow, on a
                                         # listed one that grew, and on a listed one that is gone or smaller
                                         # (so the list only shrinks: rewrite it with --write)
    python3 scripts/targets.py --report  # every offender and the totals, nothing checked
    python3 scripts/targets.py --write   # rewrite scripts/targets.allow from the code as it is

The targets (tests apart: `*_tests.rs` and `tests.rs` files and what follows a file's `#[cfg(test)]`):
  - no source file over 500 lines of code (blank and comment-only lines not counted),
  - no struct outside the config crate (crates/config/) with more than 12 fields,
  - no `clippy::too_many_arguments` allow,
  - no function over 100 lines.
A line-based reading, not a parser: a struct is `struct Name {` to the `}` at its indentation, a field a
line at one level deeper that starts `name:` (or `pub... name:`), a function `fn name(` to the `}` at its
indentation.
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SOURCE_ROOTS = ["src"] + sorted(os.path.join("crates", c, "src") for c in os.listdir(os.path.join(ROOT, "crates")))
ALLOW = os.path.join(ROOT, "scripts", "targets.allow")

MAX_FILE_LOC = 500
MAX_FIELDS = 12
MAX_FN_LINES = 100

STRUCT = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?struct\s+([A-Za-z_][A-Za-z0-9_]*)[^;(]*\{\s*$")
FIELD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?[a-z_][a-z0-9_]*\s*:")
FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")


def sources():
    walks = [os.walk(os.path.join(ROOT, root)) for root in SOURCE_ROOTS]
    for dirpath, _, files in sorted(w for walk in walks for w in walk):
        for f in sorted(files):
            if f.endswith(".rs") and not f.endswith("_tests.rs") and f != "tests.rs":
                path = os.path.join(dirpath, f)
                yield os.path.relpath(path, ROOT), open(path, encoding="utf-8").read().split("\n")


def without_tests(lines):
    for i, line in enumerate(lines):
        if line.strip() == "#[cfg(test)]":
            return lines[:i]
    return lines


LINT_ATTRIBUTE = re.compile(r"^#!?\[(allow|expect|warn|deny)\(.*\)\]$")


def code_lines(lines):
    """Lines of code: not blank, not a comment, not a one-line lint attribute (the lint wall asks for those:
    an `#[expect(clippy::too_many_lines)]` on a listed function should not make its file grow)."""
    return sum(1 for l in lines if l.strip() and not l.strip().startswith("//") and not LINT_ATTRIBUTE.match(l.strip()))


def block_end(lines, start, indent):
    """Index of the line closing the block opened at `start` (a `}` at `indent`), or None."""
    for j in range(start + 1, len(lines)):
        if lines[j].startswith(indent + "}") and not lines[j].startswith(indent + "} else"):
            return j
    return None


def offenders():
    found = {}
    for path, lines in sources():
        lines = without_tests(lines)
        loc = code_lines(lines)
        if loc > MAX_FILE_LOC:
            found[f"file {path}"] = loc
        for i, line in enumerate(lines):
            if "clippy::too_many_arguments" in line:
                name = next((FN.match(l).group(2) for l in lines[i + 1 : i + 6] if FN.match(l)), f"line{i + 1}")
                found[f"too_many_arguments {path}::{name}"] = 1
            m = STRUCT.match(line)
            if m and not path.startswith("crates/config/"):
                end = block_end(lines, i, m.group(1))
                if end is not None:
                    inner = m.group(1) + "    "
                    fields = sum(
                        1
                        for l in lines[i + 1 : end]
                        if l.startswith(inner) and not l.startswith(inner + " ") and FIELD.match(l)
                    )
                    if fields > MAX_FIELDS:
                        found[f"struct {path}::{m.group(2)}"] = fields
            m = FN.match(line)
            if m and not line.rstrip().endswith(";"):
                # The body opens on this line or on one of the signature's next lines.
                open_at = next((k for k in range(i, min(i + 12, len(lines))) if lines[k].rstrip().endswith("{")), None)
                if open_at is None:
                    continue
                end = block_end(lines, open_at, m.group(1))
                if end is not None and end - i + 1 > MAX_FN_LINES:
                    key = f"fn {path}::{m.group(2)}"
                    found[key] = max(found.get(key, 0), end - i + 1)
    return found


def read_allow():
    allowed = {}
    if os.path.exists(ALLOW):
        for line in open(ALLOW, encoding="utf-8"):
            line = line.split("#", 1)[0].strip()
            if line:
                what, _, size = line.rpartition(" ")
                allowed[what] = int(size)
    return allowed


def main():
    found = offenders()
    kinds = ["file", "struct", "too_many_arguments", "fn"]
    if "--report" in sys.argv:
        for k in kinds:
            items = sorted((v, w) for w, v in found.items() if w.startswith(k + " "))
            print(f"{k}: {len(items)}")
            for v, w in reversed(items):
                print(f"  {v:5} {w.split(' ', 1)[1]}")
        return 0
    if "--write" in sys.argv:
        with open(ALLOW, "w", encoding="utf-8") as f:
            f.write("# What scripts/targets.py still tolerates (issue 39's targets), with each one's size now: the\n")
            f.write("# list may only shrink. `kind path[::item] size`; sizes are lines of code, fields, or lines.\n")
            for w in sorted(found, key=lambda w: (kinds.index(w.split(" ")[0]), w)):
                f.write(f"{w} {found[w]}\n")
        print(f"targets: wrote {len(found)} entries to scripts/targets.allow")
        return 0
    allowed = read_allow()
    bad = []
    for w, v in sorted(found.items()):
        if w not in allowed:
            bad.append(f"new: {w} ({v}; the target is {limit_of(w)})")
        elif v > allowed[w]:
            bad.append(f"grew: {w} {allowed[w]} -> {v}")
    for w, v in sorted(allowed.items()):
        if w not in found:
            bad.append(f"gone (take it off scripts/targets.allow): {w}")
        elif found[w] < v:
            bad.append(f"smaller (lower it in scripts/targets.allow): {w} {v} -> {found[w]}")
    counts = {k: sum(1 for w in found if w.startswith(k + " ")) for k in kinds}
    summary = ", ".join(f"{counts[k]} {k}" for k in kinds)
    if bad:
        print("targets: " + summary)
        print("\n".join("  " + b for b in bad))
        return 1
    print(f"targets: ok (still allowed: {summary})")
    return 0


def limit_of(w):
    kind = w.split(" ")[0]
    return {
        "file": f"{MAX_FILE_LOC} lines of code",
        "struct": f"{MAX_FIELDS} fields",
        "fn": f"{MAX_FN_LINES} lines",
        "too_many_arguments": "none",
    }[kind]


if __name__ == "__main__":
    sys.exit(main())
