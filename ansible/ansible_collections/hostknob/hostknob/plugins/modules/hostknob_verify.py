#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_verify
short_description: A/B a knob with its probe (C(hostknob verify)), as a rollout gate
description:
  - Runs C(hostknob verify KNOB --format json), which applies the knob and leaves it as found in shuffled
    rounds, and records the evidence in the ledger.
  - C(hostknob verify) exits 0, 2 (an expectation not met, or a knob the kernel did not honour) or 3
    (inconclusive) with a full report; the module reads it in each case. Any other exit (a refusal, a host
    not left as found, an interruption) fails the task with hostknob's words.
  - Fails the task when the verdict is in O(fail_on), or when O(require_expectation=true) and not every
    expectation in the manifest's C(verify.expect) was met.
  - The host is left as found; in check mode nothing runs.
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
  knob:
    description: The knob id (checked against the manifest's id rule).
    type: str
    required: true
  rounds:
    description: Rounds (C(--rounds)); each runs both legs.
    type: int
  extra_args:
    description:
      - Further arguments for C(verify) (e.g. C(--settle 1s)), and after C(--) the probe's.
      - The shared options (C(--root), C(--manifest), C(--host), C(--state-dir), C(--format)) are refused here;
        set the module's options instead.
    type: list
    elements: str
    default: []
  fail_on:
    description:
      - Verdicts that fail the task. The verdicts are C(improved), C(regressed), C(no-detectable-effect) and
        C(inconclusive); C(not-honoured) (the kernel did not honour the knob) and C(expectation-not-met) can
        be named here too.
    type: list
    elements: str
    default: [regressed]
  require_expectation:
    description: Fail unless every expectation of the manifest's C(verify.expect) was met (outcome C(met)).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Gate the rollout on the knob's measured effect
  hostknob.hostknob.hostknob_verify:
    knob: cpuidle-no-deep-state
    rounds: 6
    fail_on: [regressed, no-detectable-effect]
  become: true
"""

RETURN = r"""
report:
  description: The output of C(hostknob verify --format json) (schema 1).
  returned: unless check mode
  type: dict
verdict:
  description: C(improved), C(regressed), C(no-detectable-effect) or C(inconclusive).
  returned: unless check mode
  type: str
expectations:
  description: Each expectation of the manifest with its C(outcome) (C(met), C(not-met), C(inconclusive)).
  returned: unless check mode
  type: list
  elements: dict
exit_code:
  description: The exit code of C(hostknob verify) (0, 2 or 3).
  returned: unless check mode
  type: int
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import (
    COMMON_ARGS,
    check_free_args,
    check_ids,
    run_json,
)


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        knob=dict(type="str", required=True),
        rounds=dict(type="int"),
        extra_args=dict(type="list", elements="str", default=[]),
        fail_on=dict(type="list", elements="str", default=["regressed"]),
        require_expectation=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    # The id is checked, not put after `--`: verify's `--` starts the probe's options.
    check_ids(module, [p["knob"]], "knob")
    check_free_args(module, p["extra_args"], "extra_args")
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: verify changes the host while it runs")
    args = ["verify", p["knob"]]
    if p["rounds"]:
        args += ["--rounds", str(p["rounds"])]
    # 2 and 3 come with a full report: an expectation not met or a knob not
    # honoured (2), an inconclusive run (3). The report says which.
    rc, report, dummy_err = run_json(module, args + p["extra_args"], ok_codes=(0, 2, 3))
    verdict = report.get("verdict")
    expectations = report.get("expectations") or []
    result = dict(changed=False, report=report, verdict=verdict, expectations=expectations, exit_code=rc)
    named = [verdict]
    if (report.get("honoured") or {}).get("status") == "not-honoured":
        named.append("not-honoured")
    if any(e.get("outcome") == "not-met" for e in expectations):
        named.append("expectation-not-met")
    hit = [v for v in named if v in p["fail_on"]]
    if hit:
        module.fail_json(msg="verify %s: %s (exit %d)" % (p["knob"], ", ".join(hit), rc), **result)
    if p["require_expectation"]:
        if not expectations:
            module.fail_json(msg="verify %s: the manifest gives no expectation to meet" % p["knob"], **result)
        unmet = [e for e in expectations if e.get("outcome") != "met"]
        if unmet:
            module.fail_json(
                msg="verify %s: expectations not met: %s"
                % (p["knob"], "; ".join("%s: %s" % (e.get("text"), e.get("outcome")) for e in unmet)),
                **result
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
