#!/usr/bin/env python3
"""hostknob_ledger_merge follows hostknob's own rules (issue 37 item 8): a dest
with two hard links, a symlinked directory of dest, an item cut before its
last field, duplicate ids with another text. Runs the module as Ansible does
(a JSON arguments file) on real files; exits 1 on the first failed check."""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE = os.path.join(
    HERE, "..", "ansible_collections", "hostknob", "hostknob", "plugins", "modules", "hostknob_ledger_merge.py"
)

ENTRY = (
    "- timestamp: 2026-07-10T09:14:03Z\n  id: {id}\n  host: h\n  knob: {knob}\n  action: applied\n"
    "  machine_id: 3d1219c7c4c5404aaa1f6d2a48adfda4\n  root: live\n"
)


def entry(i, knob="thp"):
    return ENTRY.format(id=i, knob=knob)


def merge(src, dest):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as a:
        json.dump({"ANSIBLE_MODULE_ARGS": {"src": src, "dest": dest}}, a)
    out = subprocess.run([sys.executable, MODULE, a.name], capture_output=True, text=True)
    os.unlink(a.name)
    return json.loads(out.stdout)


def warnings(r):
    """The warnings as text (strings before ansible-core 2.19, objects after)."""
    return json.dumps(r.get("warnings", []))


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok: " + what)


def main():
    d = tempfile.mkdtemp()
    src = os.path.join(d, "src.yaml")

    # Two hard links: appending through one changes the other; refused, both unchanged.
    with open(src, "w") as f:
        f.write(entry("a1") + entry("a2"))
    dest = os.path.join(d, "dest.yaml")
    with open(dest, "w") as f:
        f.write(entry("a1"))
    os.link(dest, os.path.join(d, "other-name.yaml"))
    r = merge(src, dest)
    check(r.get("failed") and "hard links" in r["msg"], "a dest with two hard links is refused: %s" % r.get("msg"))
    check(open(dest).read() == entry("a1"), "the hard-linked dest is unchanged")

    # A symlinked directory of dest: refused, nothing written where it points.
    real = os.path.join(d, "elsewhere")
    os.mkdir(real)
    os.symlink(real, os.path.join(d, "linked"))
    r = merge(src, os.path.join(d, "linked", "h.yaml"))
    check(r.get("failed") and "symbolic link" in r["msg"], "a symlinked parent of dest is refused: %s" % r.get("msg"))
    check(os.listdir(real) == [], "nothing was written through the link")

    # An item cut before its last field (`root:`) is torn, not appended.
    with open(src, "w") as f:
        f.write(entry("b1") + entry("b2").replace("  root: live\n", ""))
    dest = os.path.join(d, "torn.yaml")
    r = merge(src, dest)
    check(r.get("appended") == 1, "only the whole item is appended: %s" % r)
    check("b2" not in open(dest).read(), "the item cut before root: is left out")
    check("torn" in warnings(r), "and a warning says so: %s" % warnings(r))

    # The same id with another text: reported, not dropped silently.
    with open(src, "w") as f:
        f.write(entry("b1", knob="cpufreq-gov"))
    r = merge(src, dest)
    check(r.get("appended") == 0 and r.get("conflicting") == ["b1"], "a duplicate id is reported: %s" % r)
    check("b1" in warnings(r), "with a warning naming the id: %s" % warnings(r))

    # The same entry again: known, nothing appended, no warning.
    with open(src, "w") as f:
        f.write(entry("b1"))
    r = merge(src, dest)
    check(r.get("known") == 1 and r.get("appended") == 0 and not r.get("warnings"), "an entry merged twice is known: %s" % r)

    # dest itself a symbolic link: refused.
    os.symlink(dest, os.path.join(d, "alias.yaml"))
    with open(src, "w") as f:
        f.write(entry("c1"))
    r = merge(src, os.path.join(d, "alias.yaml"))
    check(r.get("failed") and "symbolic link" in r["msg"], "a dest that is a link is refused: %s" % r.get("msg"))
    print("ledger_merge: all checks passed")


if __name__ == "__main__":
    main()
