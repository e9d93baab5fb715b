# -*- coding: utf-8 -*-
# Copyright: hostknob developers
# MIT OR Apache-2.0 (see LICENSE-MIT, LICENSE-APACHE)
"""Runs the hostknob binary and reads its JSON; shared by the modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

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

# The manifest's id rule (src/manifest/read.rs, check_id): an id never starts
# with `-`, so none can be taken for an option.
KNOB_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,63}\Z")

# The shared options each subcommand takes (hostknob refuses the others).
TAKES = dict(
    inventory=("root", "host"),
    knobs=("root", "host", "manifest"),
    audit=("root", "host", "manifest"),
    apply=("root", "host", "manifest", "state_dir"),
    revert=("root", "host", "manifest", "state_dir"),
    verify=("root", "host", "manifest", "state_dir"),
)

# The options the modules set themselves: refused in free-form arguments.
SHARED_OPTIONS = ("--root", "--manifest", "--host", "--state-dir", "--format")


def check_ids(module, ids, option="knobs"):
    """Fails the task, before anything runs, on a value that is not a knob id."""
    bad = [i for i in ids if not KNOB_ID.match(i)]
    if bad:
        module.fail_json(
            msg="%s: %s %s not a knob id (lower-case letters, digits and '-', at most 64, "
            "not starting with '-'); nothing was run"
            % (option, ", ".join(json.dumps(i) for i in bad), "is" if len(bad) == 1 else "are")
        )


def check_free_args(module, args, option):
    """Fails the task on a shared option in free-form arguments: the module's own options set those."""
    for a in args:
        if a == "--":
            return
        name = a.split("=", 1)[0]
        if name in SHARED_OPTIONS:
            module.fail_json(
                msg="%s: %s is set by the module's own options (root, manifest, host, state_dir), "
                "not here; nothing was run" % (option, json.dumps(a))
            )


def base_command(module, subcommand):
    p = module.params
    binary = module.get_bin_path(p["binary"], required=True) if "/" not in p["binary"] else p["binary"]
    takes = TAKES.get(subcommand, ("root", "host", "manifest", "state_dir"))
    # `--opt=VALUE`: a value that starts with `-` stays a value.
    cmd = [binary, "--root=" + p["root"]]
    if p.get("manifest") and "manifest" in takes:
        cmd.append("--manifest=" + p["manifest"])
    if p.get("host") and "host" in takes:
        cmd.append("--host=" + p["host"])
    if p.get("state_dir") and "state_dir" in takes:
        cmd.append("--state-dir=" + p["state_dir"])
    return cmd


def run_json(module, args, ids=None, ok_codes=(0,), report_codes=()):
    """Runs hostknob with --format json, knob ids after `--`; fails the task on
    any other exit code, with hostknob's own words. An exit in `report_codes`
    that printed a JSON report returns it (the caller decides)."""
    cmd = base_command(module, args[0]) + ["--format=json"] + list(args)
    if ids:
        cmd += ["--"] + list(ids)
    rc, out, err = module.run_command(cmd, environ_update={"LC_ALL": "C"})
    if rc in report_codes:
        try:
            return rc, json.loads(out), err
        except ValueError:
            pass
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


def warn_stderr(module, err):
    """hostknob's warnings (stderr lines `hostknob: warning: ...`) as task warnings."""
    for line in err.splitlines():
        if line.startswith("hostknob: warning: "):
            module.warn(line[len("hostknob: warning: "):])


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
