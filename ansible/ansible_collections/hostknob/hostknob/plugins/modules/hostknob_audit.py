#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_audit
short_description: Check a host's knobs against the manifest with C(hostknob audit)
description:
  - Runs C(hostknob audit --format json) and returns each knob's status as facts.
  - Drift (C(drift), C(unsupported), C(lost-on-reboot) or C(not-honoured)) fails the task, warns, or is only reported, per O(on_drift).
  - Read-only; never changes the host.
version_added: "0.1.0"
author: hostknob developers (@hostknob)
options:
  binary:
    description: Path or name of the hostknob binary.
    type: path
    default: hostknob
  root:
    description: Read every host path under this directory (C(--root)).
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
      - Only these knob ids; default every knob that targets the host.
      - Checked against the manifest's id rule and passed after C(--), so no id is taken for an option.
    type: list
    elements: str
    default: []
  on_drift:
    description: What a drifting knob does to the task.
    type: str
    choices: [fail, warn, ignore]
    default: fail
"""

EXAMPLES = r"""
- name: Audit, failing on drift
  hostknob.hostknob.hostknob_audit:
    manifest: /etc/hostknob/manifest

- name: Audit a captured tree, only warn
  hostknob.hostknob.hostknob_audit:
    root: /srv/captures/web-7
    host: web-7
    on_drift: warn
  register: audit
"""

RETURN = r"""
audit:
  description: The full output of C(hostknob audit --format json) (schema 1).
  returned: always
  type: dict
statuses:
  description: Knob id to its audit status.
  returned: always
  type: dict
  sample: {"thp-madvise": "ok", "cpufreq-governor-performance": "drift"}
exit_code:
  description: hostknob's exit code, 0 or 2 (drift); C(rc) is not used because Ansible fails any task with a non-zero C(rc).
  returned: always
  type: int
drifting:
  description: Knobs whose status makes the audit exit 2.
  returned: always
  type: list
  elements: str
ansible_facts:
  description: C(hostknob_audit) (the audit) and C(hostknob_knob_status) (the statuses).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import COMMON_ARGS, DRIFT, check_ids, run_json

FAILING = ("drift", "unsupported", "lost-on-reboot", "not-honoured")


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        knobs=dict(type="list", elements="str", default=[]),
        on_drift=dict(type="str", choices=["fail", "warn", "ignore"], default="fail"),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    check_ids(module, module.params["knobs"])
    rc, audit, dummy_err = run_json(module, ["audit"], module.params["knobs"], ok_codes=(0, DRIFT))
    statuses = dict((k["id"], k["status"]) for k in audit["knobs"])
    drifting = sorted(k for k, s in statuses.items() if s in FAILING)
    result = dict(
        changed=False,
        exit_code=rc,
        audit=audit,
        statuses=statuses,
        drifting=drifting,
        ansible_facts=dict(hostknob_audit=audit, hostknob_knob_status=statuses),
    )
    if drifting:
        msg = "%s: %s" % (
            audit["host"],
            ", ".join("%s %s" % (k, statuses[k]) for k in drifting),
        )
        if module.params["on_drift"] == "fail":
            module.fail_json(msg="drift: " + msg, **result)
        if module.params["on_drift"] == "warn":
            module.warn("drift: " + msg)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
