#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_ledger_merge
short_description: Merge a host's hostknob ledger into a collected copy, append-only
description:
  - Appends to O(dest) the entries of the ledger O(src) that O(dest) does not hold yet, in O(src)'s order;
    nothing in O(dest) is ever rewritten or removed, so merging the same ledger twice, or an older copy,
    changes nothing.
  - An entry is known by its C(id) field when it has one, otherwise by a hash of its text as hostknob wrote
    it (entries are copied byte for byte, so the same entry has the same text wherever it is).
  - A torn last entry in O(src) (no final newline, or cut before its last field as hostknob's own reader
    judges it; a machine or boot id without C(root), C(root) V(capture) without C(capture), no C(root) after
    entries that had one) is left out with a warning; hostknob repairs it on the host at its next append.
  - An entry whose C(id) O(dest) already holds with another text is not appended and is reported (a warning
    and RV(conflicting)).
  - O(dest) follows hostknob's own rules for files it writes; it is refused, with nothing changed, when it
    is a symbolic link, not a regular file, has more than one hard link, or its directory is a symbolic link.
    It is opened once, then checked, read and appended to through that one descriptor.
  - Run it where O(dest) is (the controller, with C(delegate_to) C(localhost)); C(collect-ledgers.yml) does.
version_added: "0.2.0"
author: hostknob developers (@hostknob)
options:
  src:
    description: The host's ledger, fetched.
    type: path
    required: true
  dest:
    description: The collected ledger (created with its directory when missing).
    type: path
    required: true
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Merge web-001's ledger into the manifest repository
  hostknob.hostknob.hostknob_ledger_merge:
    src: /tmp/fetched/web-001.yaml
    dest: "{{ playbook_dir }}/manifest/ledger/web-001.yaml"
  delegate_to: localhost
"""

RETURN = r"""
appended:
  description: How many entries were appended (in check mode, would be).
  returned: always
  type: int
known:
  description: How many of O(src)'s entries O(dest) already held.
  returned: always
  type: int
conflicting:
  description: The ids of O(src)'s entries that O(dest) holds with another text (not appended).
  returned: always
  type: list
  elements: str
"""

import errno
import hashlib
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule

ITEM_START = re.compile(r"^-( |$)")
ID_LINE = re.compile(r"^  id: *['\"]?([^'\"\s]+)['\"]? *$")
FIELD = re.compile(r"^(?:- |  )([a-z_]+):(?: *(.*?))? *$")
CAP = 64 << 20


def decode(module, data, path, what):
    if len(data) > CAP:
        module.fail_json(msg="%s (%s) is over %d bytes; nothing was changed" % (path, what, CAP))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        module.fail_json(msg="%s (%s) is not UTF-8 text; nothing was changed" % (path, what))


def read_fd(fd):
    chunks, size = [], 0
    while size <= CAP:
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
        size += len(b)
    return b"".join(chunks)


def read(module, path, what):
    if not os.path.lexists(path):
        return ""
    if os.path.islink(path) or not os.path.isfile(path):
        module.fail_json(msg="%s (%s) is not a regular file; nothing was changed" % (path, what))
    with open(path, "rb") as f:
        return decode(module, f.read(CAP + 1), path, what)


def open_dest(module, dest, create):
    """dest opened once (its directory without following a link, itself with
    O_NOFOLLOW) and checked on that descriptor: hostknob's rules for the files
    it writes (root/resolve.rs: never through a link, never a file with other
    hard links). None when it is absent and not to be created."""
    parent = os.path.dirname(os.path.abspath(dest))
    if os.path.islink(parent):
        module.fail_json(msg="%s: its directory %s is a symbolic link; nothing was changed" % (dest, parent))
    if not os.path.isdir(parent):
        if not create:
            return None
        os.makedirs(parent, 0o755)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    try:
        dfd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow)
    except OSError as e:
        module.fail_json(msg="%s: cannot open its directory %s: %s; nothing was changed" % (dest, parent, e))
    try:
        flags = (os.O_RDWR | os.O_APPEND | os.O_CREAT) if create else os.O_RDONLY
        try:
            fd = os.open(os.path.basename(dest), flags | nofollow | getattr(os, "O_NONBLOCK", 0), 0o644, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ENOENT and not create:
                return None
            if e.errno == errno.ELOOP:
                module.fail_json(msg="%s (the collected ledger) is a symbolic link; nothing was changed" % dest)
            module.fail_json(msg="%s (the collected ledger): %s; nothing was changed" % (dest, e))
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        module.fail_json(msg="%s (the collected ledger) is not a regular file; nothing was changed" % dest)
    if st.st_nlink > 1:
        os.close(fd)
        module.fail_json(
            msg="%s (the collected ledger) has %d hard links: appending would change the other names too; "
            "nothing was changed" % (dest, st.st_nlink)
        )
    return fd


def items(text):
    """The ledger's top-level list items, each with its text."""
    out = []
    for line in text.splitlines(True):
        if ITEM_START.match(line):
            out.append(line)
        elif out:
            out[-1] += line
    return out


def fields(item):
    """The item's own fields (name -> value text)."""
    out = {}
    for line in item.splitlines():
        m = FIELD.match(line)
        if m:
            out[m.group(1)] = (m.group(2) or "").strip("'\"")
    return out


def torn(last, earlier):
    """Whether the last item is torn, as hostknob's reader judges it
    (src/manifest/ledger.rs torn_at): cut in a value (no final newline), or
    cut before its last field (identity without `root:`, `root: capture`
    without `capture:`, no `root:` after items that had one)."""
    if not last.endswith("\n"):
        return True
    f = fields(last)
    if "root" not in f:
        return "machine_id" in f or "boot_id" in f or any("root" in fields(i) for i in earlier)
    return f["root"] == "capture" and "capture" not in f


def key(item):
    for line in item.splitlines():
        m = ID_LINE.match(line)
        if m:
            return "id:" + m.group(1)
    return "sha256:" + hashlib.sha256(item.encode("utf-8")).hexdigest()


def main():
    module = AnsibleModule(
        argument_spec=dict(src=dict(type="path", required=True), dest=dict(type="path", required=True)),
        supports_check_mode=True,
    )
    src, dest = module.params["src"], module.params["dest"]
    new = items(read(module, src, "the host's ledger"))
    if new and torn(new[-1], new[:-1]):
        module.warn("%s ends in a torn entry (%d bytes), left out" % (src, len(new[-1])))
        new.pop()
    fd = open_dest(module, dest, create=bool(new) and not module.check_mode)
    try:
        old_text = "" if fd is None else decode(module, read_fd(fd), dest, "the collected ledger")
        known = dict((key(i), i) for i in items(old_text))
        add, conflicting = [], []
        seen = 0
        for i in new:
            k = key(i)
            if k in known:
                if known[k] == i:
                    seen += 1
                else:
                    conflicting.append(k[len("id:"):])
                continue
            known[k] = i
            add.append(i)
        for c in conflicting:
            module.warn(
                "%s: entry id %s is already in %s with another text: not appended (ids are unique; "
                "compare the two)" % (src, c, dest)
            )
        text = "".join(add)
        if add and old_text and not old_text.endswith("\n"):
            text = "\n" + text
        if add and not module.check_mode:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
    finally:
        if fd is not None:
            os.close(fd)
    result = dict(changed=bool(add), appended=len(add), known=seen, conflicting=conflicting)
    if module._diff and add:
        result["diff"] = dict(before_header=dest, after_header=dest, before=old_text, after=old_text + text)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
