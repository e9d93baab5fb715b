#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: hostknob_facts
short_description: Hardware and kernel facts from C(hostknob inventory)
description:
  - Runs C(hostknob inventory --format json) and sets the result as the fact C(hostknob_inventory).
  - Read-only; never changes the host.
version_added: "0.1.0"
author: hostknob developers (@hostknob)
options:
  binary:
    description: Path or name of the hostknob binary.
    type: path
    default: hostknob
  root:
    description: Read every host path under this directory (C(--root)); a captured tree or C(/).
    type: path
    default: /
  manifest:
    description: The knob manifest directory (C(--manifest)).
    type: path
  host:
    description: Host name for the manifest and ledger (C(--host)); default the host's hostname.
    type: str
  state_dir:
    description: The state directory (C(--state-dir)), resolved under O(root).
    type: str
"""

EXAMPLES = r"""
- name: Gather hostknob facts
  hostknob.hostknob.hostknob_facts:

- name: Idle states of CPU 0
  ansible.builtin.debug:
    var: hostknob_inventory.idle
"""

RETURN = r"""
ansible_facts:
  description: The inventory, as C(hostknob_inventory).
  returned: success
  type: dict
  contains:
    hostknob_inventory:
      description: The output of C(hostknob inventory --format json) (schema 1).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.hostknob.hostknob.plugins.module_utils.hostknob import COMMON_ARGS, run_json


def main():
    module = AnsibleModule(argument_spec=dict(COMMON_ARGS), supports_check_mode=True)
    dummy, inventory, dummy_err = run_json(module, ["inventory"])
    module.exit_json(changed=False, ansible_facts=dict(hostknob_inventory=inventory))


if __name__ == "__main__":
    main()
