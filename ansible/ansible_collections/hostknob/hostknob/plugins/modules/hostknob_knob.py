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
  - O(state=reverted) runs C(hostknob revert), restoring what the journal recorded before the first apply,
    and reports what it restored. hostknob has no C(revert --dry-run), so check mode reads the journal as
    the binary does (inside O(root), a regular file only, a torn last record left out) and restores nothing.
  - Check mode for O(state=reverted) applies revert's rules. A file that no longer holds what hostknob wrote is
    left alone and fails the task (the real revert exits 1); an entry from another boot whose file no longer
    holds hostknob's value is stale, dropped without a change.
  - C(changed) is what hostknob actually wrote (or, in check mode, would write); a second run reports no change.
  - In diff mode each knob's files are shown before and after.
version_added: "0.1.0"
author: hostknob developers (@hostknob)
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
    description:
      - Knob ids. Required unless O(all=true).
      - Checked against the manifest's id rule (lower-case letters, digits and C(-)) and passed after C(--),
        so no id is taken for an option.
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
    (schema 1); in check mode for O(state=reverted), the same shape for what would be restored.
  returned: always
  type: dict
written:
  description: Files written (applied) or restored (reverted); in check mode, the files that would be.
  returned: always
  type: int
changed_knobs:
  description: The knobs this run changed (or, in check mode, would change); what a failed gate reverts.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import (
    COMMON_ARGS,
    changes_diff,
    check_ids,
    run_json,
    warn_stderr,
)
from ansible_collections.hostknob.hostknob.plugins.module_utils.revert_plan import JournalError, plan


def choice(p):
    """(options, ids): `--all`, or the knob ids that go after `--`."""
    return (["--all"], []) if p["all"] else ([], list(p["knobs"]))


def changed_knobs(outcome):
    return [k["id"] for k in outcome.get("knobs", []) if k.get("changes")]


def apply(module):
    p = module.params
    opts, ids = choice(p)
    args = ["apply"] + opts + (["--wait"] if p["wait"] else [])
    if module.check_mode:
        args.append("--dry-run")
    dummy_rc, outcome, err = run_json(module, args, ids)
    for w in outcome.get("warnings", []):
        module.warn(w)
    warn_stderr(module, err)
    if module.check_mode:
        written = sum(c["files"] for k in outcome["knobs"] for c in k["changes"])
    else:
        written = outcome["written"]
    return outcome, written, changes_diff(outcome["knobs"], ("as found", "applied"))


def _show(v):
    return "no file" if v is None else '"%s"' % v


def revert(module):
    p = module.params
    if module.check_mode:
        try:
            outcome, warnings = plan(p["root"], p["state_dir"], p["knobs"])
        except JournalError as e:
            module.fail_json(msg="check mode: %s; nothing was changed" % e)
        for w in warnings:
            module.warn(w)
        if outcome["left_alone"]:
            # The real revert restores the rest, then exits 1 for these.
            module.fail_json(
                msg="check mode: hostknob revert would leave alone %d files that no longer hold what "
                "hostknob wrote (%s) and exit 1; `hostknob revert --force` restores them anyway; "
                "nothing was changed"
                % (
                    len(outcome["left_alone"]),
                    "; ".join(
                        "%s: %s reads %s, hostknob left %s" % (la["knob"], la["path"], _show(la["now"]), _show(la["wrote"]))
                        for la in outcome["left_alone"]
                    ),
                ),
                outcome=outcome,
            )
        return outcome, outcome["restored"], changes_diff(outcome["knobs"], ("now", "reverted"))
    opts, ids = choice(p)
    args = ["revert"] + opts + (["--wait"] if p["wait"] else [])
    # Exit 1 with a report: files someone else changed were left alone (the
    # rest is restored); the task fails with hostknob's words and the report.
    rc, outcome, err = run_json(module, args, ids, report_codes=(1,))
    warn_stderr(module, err)
    if rc != 0:
        module.fail_json(
            msg="hostknob exited %d: %s" % (rc, err.strip()),
            rc=rc,
            outcome=outcome,
            written=outcome.get("restored", 0),
            changed=outcome.get("restored", 0) > 0,
        )
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
    check_ids(module, module.params["knobs"])
    if module.params["state"] == "applied":
        outcome, written, diff = apply(module)
    else:
        outcome, written, diff = revert(module)
    result = dict(changed=written > 0, outcome=outcome, written=written, changed_knobs=changed_knobs(outcome))
    if module._diff and diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
