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
  - A torn last entry in O(src) (no final newline, a crash or a full disk during an append) is left out with
    a warning; hostknob repairs it on the host at its next append.
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
"""

import hashlib
import os
import re

from ansible.module_utils.basic import AnsibleModule

ITEM_START = re.compile(r"^-( |$)")
ID_LINE = re.compile(r"^  id: *['\"]?([^'\"\s]+)['\"]? *$")
CAP = 64 << 20


def read(module, path, what):
    if not os.path.lexists(path):
        return ""
    if os.path.islink(path) or not os.path.isfile(path):
        module.fail_json(msg="%s (%s) is not a regular file; nothing was changed" % (path, what))
    with open(path, "rb") as f:
        data = f.read(CAP + 1)
    if len(data) > CAP:
        module.fail_json(msg="%s (%s) is over %d bytes; nothing was changed" % (path, what, CAP))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        module.fail_json(msg="%s (%s) is not UTF-8 text; nothing was changed" % (path, what))


def items(text):
    """The ledger's top-level list items, each with its text."""
    out = []
    for line in text.splitlines(True):
        if ITEM_START.match(line):
            out.append(line)
        elif out:
            out[-1] += line
    return out


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
    if new and not new[-1].endswith("\n"):
        module.warn("%s ends in a torn entry (%d bytes), left out" % (src, len(new[-1])))
        new.pop()
    old_text = read(module, dest, "the collected ledger")
    known = set(key(i) for i in items(old_text))
    add = []
    seen = 0
    for i in new:
        k = key(i)
        if k in known:
            seen += 1
            continue
        known.add(k)
        add.append(i)
    text = "".join(add)
    if add and old_text and not old_text.endswith("\n"):
        text = "\n" + text
    if add and not module.check_mode:
        parent = os.path.dirname(dest)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(dest, flags, 0o644)
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
    result = dict(changed=bool(add), appended=len(add), known=seen)
    if module._diff and add:
        result["diff"] = dict(before_header=dest, after_header=dest, before=old_text, after=old_text + text)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
