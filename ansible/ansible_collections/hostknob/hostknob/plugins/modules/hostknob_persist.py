#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_persist
short_description: Make knobs survive a reboot with C(hostknob persist)
description:
  - O(state=present) runs C(hostknob persist --install) for each knob, writing the file its manifest entry's
    C(persistence) names (a tmpfiles.d C(w) line, a sysctl.d file, a systemd drop-in or unit) under O(root), so
    that C(hostknob audit) reports the knob C(ok) instead of C(unpersisted). O(state=absent) runs
    C(hostknob persist --remove).
  - Knobs the manifest keeps runtime-only (C(persistence) V(runtime)) are left alone by the manifest's decision and
    listed in RV(runtime). Kernel command-line knobs (C(persistence) V(cmdline)) are never written (hostknob never
    edits a boot loader's configuration); they are listed in RV(manual) with the commands that add them, and a
    warning says so.
  - A knob with no file on this host (status C(not-applicable)) has nothing to persist; it is listed in
    RV(not_applicable).
  - Check mode runs C(hostknob persist) without C(--install), which prints the file and where it goes, and
    compares it with the file under O(root); nothing is written.
  - C(changed) is what hostknob wrote (or, in check mode, would write); a second run reports no change.
  - In diff mode each file is shown before and after.
version_added: "0.2.0"
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
      - Knob ids.
      - Checked against the manifest's id rule (lower-case letters, digits and C(-)) and passed after C(--),
        so no id is taken for an option.
    type: list
    elements: str
    required: true
  state:
    description: Whether the knobs' persistence files should be installed or removed.
    type: str
    choices: [present, absent]
    default: present
  wait:
    description: Wait for another hostknob holding the lock instead of failing at once.
    type: bool
    default: false
notes:
  - Supports check mode and diff mode.
"""

EXAMPLES = r"""
- name: Keep the governor after a reboot
  hostknob.hostknob.hostknob_persist:
    knobs: [cpufreq-governor-performance]
  become: true

- name: Stop persisting it
  hostknob.hostknob.hostknob_persist:
    knobs: [cpufreq-governor-performance]
    state: absent
  become: true
"""

RETURN = r"""
files:
  description: Per knob with a file, what C(hostknob persist) did (C(installed), C(unchanged), C(removed),
    C(absent)) or, in check mode, would do.
  returned: always
  type: list
  elements: dict
  sample: [{knob: cpufreq-governor-performance, mechanism: tmpfiles,
            path: /etc/tmpfiles.d/hostknob-10-cpufreq-governor-performance.conf, action: installed}]
changed_knobs:
  description: The knobs whose file this run wrote or removed (or, in check mode, would).
  returned: always
  type: list
  elements: str
runtime:
  description: Knobs left runtime-only by the manifest (C(persistence) V(runtime)); nothing persists them.
  returned: always
  type: list
  elements: str
not_applicable:
  description: Knobs with no file on this host (C(hostknob knobs) says C(not-applicable)); nothing to persist.
  returned: always
  type: list
  elements: str
manual:
  description: Kernel command-line knobs (C(persistence) V(cmdline)), with the arguments and the commands that add them.
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import (
    COMMON_ARGS,
    check_ids,
    run_json,
    warn_stderr,
)

# The most of a file under the root read for a check-mode comparison.
READ_CAP = 1 << 20


def current(root, path):
    """The file's text under `root` for check mode's comparison (None: no file).
    A path that leaves the root through a link, or is not a regular file, is
    an error: the real install would refuse it too."""
    base = os.path.realpath(root)
    full = os.path.join(base, path.lstrip("/"))
    real = os.path.realpath(full)
    if real != base and not real.startswith(base.rstrip("/") + "/"):
        raise ValueError("%s leads outside %s" % (path, root))
    if not os.path.lexists(full):
        return None
    if not os.path.isfile(real):
        raise ValueError("%s is not a regular file" % path)
    with open(real, "rb") as f:
        data = f.read(READ_CAP + 1)
    if len(data) > READ_CAP:
        raise ValueError("%s is larger than %d bytes" % (path, READ_CAP))
    return data.decode("utf-8", "replace")


def listed(module, ids):
    """Each knob's entry from `hostknob knobs` (its persistence and status;
    hostknob refuses an unknown id or a knob for another host in its words)."""
    dummy_rc, out, err = run_json(module, ["knobs"], ids)
    warn_stderr(module, err)
    return dict((k["id"], k) for k in out["knobs"])


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        knobs=dict(type="list", elements="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        wait=dict(type="bool", default=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    if not p["knobs"]:
        module.fail_json(msg="name the knobs to persist")
    check_ids(module, p["knobs"])
    install = p["state"] == "present"
    knobs = listed(module, p["knobs"])
    files, changed_knobs, runtime, manual, diffs, not_applicable = [], [], [], [], [], []
    for knob in p["knobs"]:
        if knobs[knob]["persistence"] == "runtime":
            runtime.append(knob)
            continue
        # No file here takes it (e.g. EPP under acpi-cpufreq): nothing to persist.
        if knobs[knob]["status"] == "not-applicable":
            not_applicable.append(knob)
            continue
        dummy_rc, plan, err = run_json(module, ["persist"], [knob])
        warn_stderr(module, err)
        if plan.get("path") is None:
            manual.append(dict(knob=knob, arguments=plan["content"], commands=plan.get("commands", [])))
            if install:
                module.warn(
                    "%s: persistence %s: hostknob never writes the boot loader's configuration; add `%s` "
                    "(see manual)" % (knob, plan["mechanism"], plan["content"])
                )
            continue
        try:
            before = current(p["root"], plan["path"])
        except (OSError, ValueError) as e:
            module.fail_json(msg="%s: cannot read %s under %s: %s; nothing was changed" % (knob, plan["path"], p["root"], e))
        want = plan["content"] if install else None
        if module.check_mode:
            if before == want:
                action = "unchanged" if install else "absent"
            else:
                action = "installed" if install else "removed"
        else:
            args = ["persist", "--install" if install else "--remove"] + (["--wait"] if p["wait"] else [])
            dummy_rc, outcome, err = run_json(module, args, [knob])
            warn_stderr(module, err)
            action = outcome["action"]
        files.append(dict(knob=knob, mechanism=plan["mechanism"], path=plan["path"], action=action))
        if action in ("installed", "removed"):
            changed_knobs.append(knob)
            diffs.append(
                dict(
                    before_header="%s: %s" % (knob, plan["path"]),
                    after_header="%s: %s" % (knob, plan["path"]),
                    before=before if before is not None else "",
                    after=want if want is not None else "",
                )
            )
    result = dict(
        changed=bool(changed_knobs),
        files=files,
        changed_knobs=changed_knobs,
        runtime=runtime,
        manual=manual,
        not_applicable=not_applicable,
    )
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
