# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)
"""Runs the hostknob binary and reads its JSON; shared by the modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

# Options every module takes: where the binary is and which host tree it reads.
COMMON_ARGS = dict(
    binary=dict(type="path", default="hostknob"),
    root=dict(type="path", default="/"),
    manifest=dict(type="path"),
    host=dict(type="str"),
    state_dir=dict(type="str"),
)

# Exit 2 means drift (audit, report), not an error.
DRIFT = 2


# The shared options each subcommand takes (hostknob refuses the others).
TAKES = dict(
    inventory=("root", "host"),
    knobs=("root", "host", "manifest"),
    audit=("root", "host", "manifest"),
    apply=("root", "host", "manifest", "state_dir"),
    revert=("root", "host", "manifest", "state_dir"),
    verify=("root", "host", "manifest", "state_dir"),
)


def base_command(module, subcommand):
    p = module.params
    binary = module.get_bin_path(p["binary"], required=True) if "/" not in p["binary"] else p["binary"]
    takes = TAKES.get(subcommand, ("root", "host", "manifest", "state_dir"))
    cmd = [binary, "--root", p["root"]]
    if p.get("manifest") and "manifest" in takes:
        cmd += ["--manifest", p["manifest"]]
    if p.get("host") and "host" in takes:
        cmd += ["--host", p["host"]]
    if p.get("state_dir") and "state_dir" in takes:
        cmd += ["--state-dir", p["state_dir"]]
    return cmd


def run_json(module, args, ok_codes=(0,)):
    """Runs hostknob with --format json; fails the task on any other exit code."""
    cmd = base_command(module, args[0]) + ["--format", "json"] + list(args)
    rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
    if rc not in ok_codes:
        module.fail_json(
            msg="hostknob exited %d: %s" % (rc, err.strip() or out.strip()),
            cmd=cmd,
            rc=rc,
            stdout=out,
            stderr=err,
        )
    try:
        data = json.loads(out)
    except ValueError as e:
        module.fail_json(msg="hostknob printed no JSON: %s" % e, cmd=cmd, stdout=out, stderr=err)
    return rc, data, err


def changes_diff(knobs, header):
    """Ansible's diff (one before/after pair per knob) from apply/revert change groups."""
    diffs = []
    for k in knobs:
        before = []
        after = []
        for c in k.get("changes", []):
            name = c.get("display") or c["path"]
            before.append("%s: %s" % (name, _value(c.get("before"))))
            after.append("%s: %s" % (name, _value(c.get("after"))))
        if before:
            diffs.append(
                dict(
                    before_header="%s (%s)" % (k["id"], header[0]),
                    after_header="%s (%s)" % (k["id"], header[1]),
                    before="\n".join(before) + "\n",
                    after="\n".join(after) + "\n",
                )
            )
    return diffs


def _value(v):
    return "(absent)" if v is None else v
