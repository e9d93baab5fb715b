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


def _read(root, logical):
    """A file's text under the root, links resolved inside it; None when it
    cannot be read as text (as src/apply/write.rs `content(..).ok().flatten()`)."""
    path = _inside(root, [c for c in logical.split("/") if c])
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            chunks.append(b)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        return None


def boot_id(root):
    """The running boot's id under the root (src/journal.rs `boot_id`)."""
    t = _read(root, "/proc/sys/kernel/random/boot_id")
    t = t.strip() if t is not None else ""
    return t if t and len(t) <= 128 else None


def _mode(e):
    return e.get("mode") or "attribute"


def stale(e, now_boot):
    """A kernel value written in another boot (src/journal.rs `Entry::stale`)."""
    b = e.get("boot")
    return _mode(e) == "attribute" and b is not None and now_boot is not None and b != now_boot


def _same_words(now, written):
    if " ".join(now.split()) == " ".join(written.split()):
        return True
    sel = next((w[1:-1] for w in now.split() if w.startswith("[") and w.endswith("]")), None)
    return sel is not None and sel == written.strip()


def holds_ours(e, now):
    """Whether the file's content `now` is what hostknob left there
    (src/journal.rs `Entry::holds_ours`; old entries without `seen` and
    `written` always do)."""
    mode = _mode(e)
    found, seen, written = e.get("found"), e.get("seen"), e.get("written")
    if mode == "file":
        as_before = now == e.get("before")
    else:
        as_before = now is not None and found is not None and now.strip() == found.strip()
    in_flight = seen is None and now == ""
    if as_before or in_flight or (mode == "attribute" and now is None):
        return True
    if seen is not None:
        if mode == "file":
            return now == seen
        return now is not None and now.strip() == seen.strip()
    if written is None:
        return True
    if mode == "file":
        return now == written
    if now is None:
        return False
    return _same_words(now, written)


def _holds_found(e, now):
    """Whether the file holds its value as found (src/journal.rs `Entry::holds_found`)."""
    if _mode(e) == "file":
        return now == e.get("before")
    found = e.get("found")
    return now is not None and found is not None and now.strip() == found.strip()


def restored_text(e):
    """What a restored file reads after revert, as the binary reports it."""
    if _mode(e) == "file":
        return e.get("before")
    f = e.get("found")
    return f.strip() if f is not None else None


def group(restored):
    """(entry, text before) pairs of one knob as revert's change groups: files
    that differ only in one cpuN/policyN number and read and restore the same
    values are one group."""
    groups = []
    for e, was in restored:
        ix = _indexed(e["path"])
        key = ix[0] if ix else e["path"]
        before = was.strip() if was is not None else None
        after = restored_text(e)
        g = next((g for g in groups if g["key"] == key and g["after"] == after and g["before"] == before), None)
        if g is None:
            g = dict(key=key, path=e["path"], pattern=ix[0] if ix else None, numbers=[], before=before, after=after)
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
        out.append(dict(path=path, display=display, files=files, before=g["before"], after=g["after"]))
    return out


def _left_alone(e, was, by):
    """A file revert leaves alone, shaped as the binary's `left_alone` items."""
    wrote = e.get("seen") if e.get("seen") is not None else e.get("written")
    return dict(
        knob=e["knob"],
        path=e["path"],
        wrote=wrote.strip() if wrote is not None else None,
        now=was.strip() if was is not None else None,
        by=by,
    )


def plan(root, state_dir, knobs):
    """What revert would do for `knobs` (every entry when empty), as revert's
    outcome: the files it restores, those it leaves alone (someone else
    changed them: the real revert exits 1) and the stale entries it drops.
    Entries are taken newest first, as revert does, so two knobs on one file
    see each other's restore."""
    entries, warnings, path = read_journal(root, state_dir)
    chosen = [e for e in entries if not knobs or e["knob"] in knobs]
    now_boot = boot_id(root)
    sim = {}
    restored, left_alone, stale_out = [], [], []
    chosen_ids = {id(e) for e in chosen}
    position = {id(e): i for i, e in enumerate(entries)}
    for e in reversed(chosen):
        was = sim[e["path"]] if e["path"] in sim else _read(root, e["path"])
        # From another boot: dropped only when the reboot reset the file to its
        # value as found; holding ours it is restored, a third value left alone.
        if stale(e, now_boot) and _holds_found(e, was):
            stale_out.append(e)
            continue
        # A later knob on the same file, not reverted now: left alone (src/apply/revert.rs).
        later = next(
            (x for x in entries[position[id(e)] + 1:] if x["path"] == e["path"] and id(x) not in chosen_ids),
            None,
        )
        if later is not None:
            by = "changed by knob %s, applied after %s and still applied" % (later["knob"], e["knob"])
            left_alone.append(_left_alone(e, was, by))
            continue
        if not holds_ours(e, was):
            left_alone.append(_left_alone(e, was, None))
            continue
        restored.append((e, was))
        after = e.get("found") if _mode(e) != "file" and e.get("found") is not None else e.get("before")
        sim[e["path"]] = after
    order = {id(e): i for i, e in enumerate(chosen)}
    restored.sort(key=lambda r: order[id(r[0])])
    stale_out.sort(key=lambda e: order[id(e)])
    ids = []
    for e, dummy in restored:
        if e["knob"] not in ids:
            ids.append(e["knob"])
    shaped = [dict(id=k, changes=group([r for r in restored if r[0]["knob"] == k])) for k in ids]
    stale_shaped = [dict(knob=e["knob"], path=e["path"], boot=e.get("boot") or "") for e in stale_out]
    outcome = dict(
        knobs=shaped,
        restored=len(restored),
        left_alone=left_alone,
        stale=stale_shaped,
        journal=path,
        dry_run=True,
    )
    return outcome, warnings
