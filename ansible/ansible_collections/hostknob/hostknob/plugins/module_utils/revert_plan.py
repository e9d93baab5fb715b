# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)
"""What `hostknob revert` would restore, for check mode only.

hostknob has no `revert --dry-run`, so check mode reads the journal the way the
binary does: the state directory resolved inside the root, never through a
link, only a regular file (a FIFO would block), a torn last record left out.
The entries are grouped by the binary's rule (src/apply/group.rs). A real
revert never comes here: it runs `hostknob revert`."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat

JOURNAL = "journal.jsonl"
DEFAULT_STATE_DIR = "/var/lib/hostknob"
_INDEXED = re.compile(r"(cpu|policy)([0-9]+)\Z")


class JournalError(Exception):
    pass


def logical_state_dir(configured):
    """`--state-dir` with `.` and `..` resolved as inside the root (as src/journal.rs)."""
    parts = []
    for c in (configured or DEFAULT_STATE_DIR).split("/"):
        if c in ("", "."):
            continue
        if c == "..":
            if parts:
                parts.pop()
            continue
        parts.append(c)
    return parts


def _inside(root, parts):
    """The directory `parts` names under `root`, its links resolved inside the root."""
    todo = list(parts)
    done = []
    hops = 0
    while todo:
        c = todo.pop(0)
        if c in ("", "."):
            continue
        if c == "..":
            if done:
                done.pop()
            continue
        here = os.path.join(root, *(done + [c]))
        if os.path.islink(here):
            hops += 1
            if hops > 40:
                raise JournalError("too many links resolving the state directory under %s" % root)
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo = target.split("/") + todo
            continue
        done.append(c)
    return os.path.join(root, *done)


def read_journal(root, state_dir):
    """(entries, warnings, path): the journal's complete records."""
    parts = logical_state_dir(state_dir)
    path = os.path.join(_inside(root, parts), JOURNAL)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if not os.path.lexists(path):
            return [], [], path
        raise JournalError("cannot open the journal %s: %s" % (path, e.strerror))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise JournalError("the journal %s is not a regular file" % path)
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(fd)
    text = b"".join(chunks).decode("utf-8", "replace")
    lines = text.split("\n")
    warnings = []
    if lines[-1]:
        warnings.append(
            "the journal %s ends in a torn record (%d bytes after its last complete line); "
            "hostknob revert sets it aside" % (path, len(lines[-1].encode("utf-8")))
        )
    entries = []
    for n, line in enumerate(lines[:-1], 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except ValueError as e:
            raise JournalError("%s line %d: not a journal record: %s" % (path, n, e))
    return entries, warnings, path


def _cpulist(numbers):
    """`0-3,8`: the CPU list form hostknob prints."""
    out = []
    ns = sorted(set(numbers))
    i = 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(str(ns[i]) if i == j else "%d-%d" % (ns[i], ns[j]))
        i = j + 1
    return ",".join(out)


def _indexed(path):
    """`/sys/.../cpu12/x` -> (`/sys/.../cpu*/x`, 12): the first cpuN or policyN component."""
    comps = path.split("/")
    for i, c in enumerate(comps):
        m = _INDEXED.match(c)
        if m:
            return "/".join(comps[:i] + [m.group(1) + "*"] + comps[i + 1:]), int(m.group(2))
    return None


def group(entries):
    """Entries of one knob as revert's change groups: files that differ only in
    one cpuN/policyN number and restore the same value are one group."""
    groups = []
    for e in entries:
        ix = _indexed(e["path"])
        key = ix[0] if ix else e["path"]
        after = e.get("before")
        g = next((g for g in groups if g["key"] == key and g["after"] == after), None)
        if g is None:
            g = dict(key=key, path=e["path"], pattern=ix[0] if ix else None, numbers=[], after=after)
            groups.append(g)
        if ix:
            g["numbers"].append(ix[1])
    out = []
    for g in groups:
        files = max(len(g["numbers"]), 1)
        if g["pattern"] and files > 1:
            path = g["pattern"]
            display = path.replace("*", _cpulist(g["numbers"]), 1)
        else:
            path = display = g["path"]
        out.append(dict(path=path, display=display, files=files, before="(as now)", after=g["after"]))
    return out


def plan(root, state_dir, knobs):
    """What revert would restore for `knobs` (every entry when empty), as revert's outcome."""
    entries, warnings, path = read_journal(root, state_dir)
    by_knob = {}
    order = []
    for e in entries:
        if knobs and e["knob"] not in knobs:
            continue
        if e["knob"] not in by_knob:
            order.append(e["knob"])
            by_knob[e["knob"]] = []
        by_knob[e["knob"]].append(e)
    shaped = [dict(id=k, changes=group(by_knob[k])) for k in order]
    restored = sum(len(v) for v in by_knob.values())
    return dict(knobs=shaped, restored=restored, journal=path, dry_run=True), warnings
