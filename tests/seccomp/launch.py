#!/usr/bin/env python3
"""Runs a command under a Docker-format seccomp profile, as a container runtime would, using libseccomp
(the C library containerd and runc use, through ctypes: no extra package). For this machine's architecture:
the default action, every allowed name the kernel knows, argument conditions, errnoRet, `includes.arches`
and `includes.minKernel`; groups that need a capability (`includes.caps`) are left out and `excludes.caps`
groups kept, as for an unprivileged container.

    launch.py PROFILE.json [--without NAME,...] -- COMMAND [ARGS...]

`--without` drops those names from the profile first (a negative control)."""

import ctypes
import ctypes.util
import json
import os
import platform
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
OPS = {"SCMP_CMP_NE": 1, "SCMP_CMP_LT": 2, "SCMP_CMP_LE": 3, "SCMP_CMP_EQ": 4, "SCMP_CMP_GE": 5,
       "SCMP_CMP_GT": 6, "SCMP_CMP_MASKED_EQ": 7}
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def errno_action(code):
    return 0x00050000 | (code & 0xFFFF)


def action(name, errno_ret):
    if name == "SCMP_ACT_ALLOW":
        return SCMP_ACT_ALLOW
    if name == "SCMP_ACT_ERRNO":
        return errno_action(errno_ret)
    raise SystemExit(f"launch.py: action {name} is not supported here")


def main():
    args = sys.argv[1:]
    if "--" not in args:
        raise SystemExit(__doc__)
    split = args.index("--")
    opts, command = args[:split], args[split + 1:]
    profile_path, without = opts[0], set()
    if len(opts) == 3 and opts[1] == "--without":
        without = set(opts[2].split(","))
    profile = json.load(open(profile_path))

    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(ArgCmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]

    default = action(profile["defaultAction"], profile.get("defaultErrnoRet", 1))
    ctx = lib.seccomp_init(default)
    if not ctx:
        raise SystemExit("launch.py: seccomp_init failed")
    added = 0
    for group in profile["syscalls"]:
        inc, exc = group.get("includes", {}), group.get("excludes", {})
        if inc.get("caps") or (inc.get("arches") and ARCH not in inc["arches"]):
            continue
        if exc.get("arches") and ARCH in exc["arches"]:
            continue
        act = action(group["action"], group.get("errnoRet", 1))
        conds = group.get("args") or []
        array = (ArgCmp * max(len(conds), 1))()
        for i, c in enumerate(conds):
            array[i] = ArgCmp(c["index"], OPS[c["op"]], c["value"], c.get("valueTwo", 0))
        for name in group["names"]:
            if name in without:
                continue
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue  # not a syscall on this architecture
            rc = lib.seccomp_rule_add_array(ctx, act, nr, len(conds), array)
            if rc != 0:
                raise SystemExit(f"launch.py: cannot add a rule for {name}: {rc}")
            added += 1
    if lib.seccomp_load(ctx) != 0:
        raise SystemExit("launch.py: seccomp_load failed")
    print(f"launch.py: {added} rules loaded from {profile_path}", file=sys.stderr, flush=True)
    os.execv(command[0], command)


main()
