#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_knob
short_description: Apply or revert knobs with C(hostknob apply) and C(hostknob revert)
description:
  - O(state=applied) runs C(hostknob apply); in check mode C(hostknob apply --dry-run), which plans and
    checks every write and writes nothing.
  - O(state=reverted) runs C(hostknob revert), restoring what the journal recorded before the first apply;
    in check mode the journal is read and nothing is restored.
  - C(changed) is what hostknob actually wrote (or, in check mode, would write); a second run reports no change.
  - In diff mode each knob's files are shown before and after.
version_added: "0.1.0"
author: hostknob developers
options:
  binary:
    description: Path or name of the hostknob binary.
    type: path
    default: hostknob
  root:
    description: Read and write every host path under this directory (C(--root)).
    type: path
    default: /
  manifest:
    description: The knob manifest directory (C(--manifest)).
    type: path
  host:
    description: Host name for the manifest and ledger (C(--host)).
    type: str
  state_dir:
    description: The state directory (C(--state-dir)), resolved under O(root).
    type: str
  knobs:
    description: Knob ids. Required unless O(all=true).
    type: list
    elements: str
    default: []
  all:
    description: Every knob that targets the host (applied), or everything the journal holds (reverted).
    type: bool
    default: false
  state:
    description: Whether the knobs should be applied or reverted.
    type: str
    choices: [applied, reverted]
    default: applied
  wait:
    description: Wait for another hostknob holding the lock instead of failing at once.
    type: bool
    default: false
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Disable the deepest idle state on RPC hosts
  hostknob.hostknob.hostknob_knob:
    knobs: [cpuidle-no-deep-state]
  become: true

- name: Put it back
  hostknob.hostknob.hostknob_knob:
    knobs: [cpuidle-no-deep-state]
    state: reverted
  become: true
"""

RETURN = r"""
outcome:
  description: The output of C(hostknob apply) or C(hostknob revert) with C(--format json)
    (schema 1); in check mode for O(state=reverted), the journal entries.
  returned: always
  type: dict
written:
  description: Files written (applied) or restored (reverted); in check mode, the files that would be.
  returned: always
  type: int
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import (
    COMMON_ARGS,
    changes_diff,
    run_json,
)

JOURNAL = "journal.jsonl"


def choice(p):
    return ["--all"] if p["all"] else list(p["knobs"])


def apply(module):
    p = module.params
    args = ["apply"] + choice(p) + (["--wait"] if p["wait"] else [])
    if module.check_mode:
        args.append("--dry-run")
    dummy_rc, outcome, dummy_err = run_json(module, args)
    for w in outcome.get("warnings", []):
        module.warn(w)
    if module.check_mode:
        written = sum(c["files"] for k in outcome["knobs"] for c in k["changes"])
    else:
        written = outcome["written"]
    return outcome, written, changes_diff(outcome["knobs"], ("as found", "applied"))


def journal_entries(module):
    """What a revert would restore, read from the journal under the root."""
    p = module.params
    state_dir = (p["state_dir"] or "/var/lib/hostknob").lstrip("/")
    path = os.path.join(p["root"], state_dir, JOURNAL)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    if p["all"]:
        return entries
    return [e for e in entries if e["knob"] in p["knobs"]]


def revert(module):
    p = module.params
    if module.check_mode:
        entries = journal_entries(module)
        knobs = {}
        for e in entries:
            knobs.setdefault(e["knob"], []).append(
                dict(path=e["path"], before="(as now)", after=e.get("before"))
            )
        outcome = dict(journal=entries)
        shaped = [dict(id=k, changes=c) for k, c in knobs.items()]
        return outcome, len(entries), changes_diff(shaped, ("now", "reverted"))
    if not journal_entries(module):
        return dict(knobs=[], restored=0), 0, []
    args = ["revert"] + choice(p) + (["--wait"] if p["wait"] else [])
    dummy_rc, outcome, dummy_err = run_json(module, args)
    return outcome, outcome["restored"], changes_diff(outcome["knobs"], ("applied", "reverted"))


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        knobs=dict(type="list", elements="str", default=[]),
        all=dict(type="bool", default=False),
        state=dict(type="str", choices=["applied", "reverted"], default="applied"),
        wait=dict(type="bool", default=False),
    )
    module = AnsibleModule(
        argument_spec=spec,
        supports_check_mode=True,
        mutually_exclusive=[("knobs", "all")],
    )
    if not module.params["knobs"] and not module.params["all"]:
        module.fail_json(msg="name the knobs, or set all: true")
    if module.params["state"] == "applied":
        outcome, written, diff = apply(module)
    else:
        outcome, written, diff = revert(module)
    result = dict(changed=written > 0, outcome=outcome, written=written)
    if module._diff and diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
