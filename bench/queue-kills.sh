#!/usr/bin/env bash
# Kill sweep of a channel change under --root (issue 50, item 5): an ice NIC
# built into a copy of adl0 (as tests/suite/support/nic.rs builds it, with a
# value of its own in every queue file and byte_queue_limits in every tx
# queue), an apply of an rps knob and a channel change, killed by strace at
# the Nth unlinkat, renameat or mkdirat (every N the whole apply makes), then
# `revert --all`; and the same for a revert killed at its Nth call, then
# `revert --all` again. Counts the runs whose tree (all of it but the state
# directory) is not byte for byte the original (files, modes, directories).
# Not a test: the suite's bounded sweep is tests/suite/hostile_queues.rs.
# Usage: bench/queue-kills.sh [QUEUES] [TO] [HOSTKNOB]   (from the repository root;
# defaults 16 combined channels to 4 and back to 16, and the release build);
# KILL_AT="unlinkat renameat mkdirat" and PHASES="apply revert" choose the sweeps.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace; }
if [ -n "${3:-}" ]; then
  HK=$3
else
  cargo build --release --locked -q
  HK=$(dist/release-dir)/hostknob
fi
export HK
export CORPUS=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
exec python3 - "${1:-16}" "${2:-4}" <<'PY'
import atexit, os, re, shutil, subprocess, sys, tempfile, time

queues, to = int(sys.argv[1]), int(sys.argv[2])
hk, corpus = os.environ["HK"], os.environ["CORPUS"]
tmp = tempfile.mkdtemp(prefix="hk-qkill-")
atexit.register(shutil.rmtree, tmp, True)
pristine = os.path.join(tmp, "pristine")
os.makedirs(pristine)
subprocess.run(["tar", "xzf", os.path.join(corpus, "adl0.tar.gz"), "-C", pristine], check=True)
# As the suite's corpus copies: the name `hostknob capture` would have recorded.
with open(os.path.join(pristine, "hostknob-capture.yaml"), "w") as f:
    f.write("host: adl0\n")
IF, PCI = "ens2f0", "0000:17:00.0"

def w(p, t):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(t)

def build(root, combined):
    dev = os.path.join(root, "sys/devices/pci0000:17/0000:17:00.0", PCI)
    net = os.path.join(dev, "net", IF)
    w(os.path.join(dev, "numa_node"), "0\n")
    os.makedirs(os.path.join(root, "sys/bus/pci/drivers/ice"), exist_ok=True)
    os.symlink("../../../../bus/pci/drivers/ice", os.path.join(dev, "driver"))
    for f, v in [("address", "b4:96:91:17:00:00"), ("mtu", "1500"), ("operstate", "up"),
                 ("speed", "100000"), ("tx_queue_len", "1000"), ("type", "1")]:
        w(os.path.join(net, f), v + "\n")
    os.symlink("../..", os.path.join(net, "device"))
    for q in range(combined):
        rx, tx = os.path.join(net, f"queues/rx-{q}"), os.path.join(net, f"queues/tx-{q}")
        w(os.path.join(rx, "rps_cpus"), "%06x\n" % (q + 1))
        w(os.path.join(rx, "rps_flow_cnt"), "%d\n" % (256 * (q + 1)))
        w(os.path.join(tx, "xps_cpus"), "%06x\n" % (0x800000 >> q))
        w(os.path.join(tx, "xps_rxqs"), "%x\n" % (1 << q))
        w(os.path.join(tx, "tx_timeout"), "0\n")
        os.chmod(os.path.join(tx, "tx_timeout"), 0o444)
        for f, v in [("hold_time", "1000"), ("limit", str(q)), ("limit_max", "1879048192"),
                     ("limit_min", "0"), ("inflight", "0")]:
            w(os.path.join(tx, "byte_queue_limits", f), v + "\n")
    os.makedirs(os.path.join(root, "sys/class/net"), exist_ok=True)
    os.symlink(f"../../devices/pci0000:17/0000:17:00.0/{PCI}/net/{IF}",
               os.path.join(root, "sys/class/net", IF))
    w(os.path.join(root, f"hostknob-capture/ethtool/{IF}.yaml"),
      "driver: ice\nversion: 6.8.0\nfirmware-version: 4.40 0x8001c967 1.3534.0\n"
      "bus-info: '0000:17:00.0'\nchannels:\n  rx:\n    current: 0\n    max: 64\n"
      "  tx:\n    current: 0\n    max: 64\n  other:\n    current: 1\n    max: 1\n"
      f"  combined:\n    current: {combined}\n    max: 64\n")

build(pristine, queues)
man = os.path.join(tmp, "manifest")
os.makedirs(man)
with open(os.path.join(man, "k.yaml"), "w") as f:
    f.write(f"id: steer\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: runtime\nkind: rps\n"
            f"target: {{interfaces: {IF}}}\nset: {{cpus: 2-3}}\n---\n"
            f"id: channels\ntitle: t\nwhy: w\nhosts: \"*\"\npersistence: runtime\n"
            f"kind: nic-channels\ntarget: {{driver: ice}}\nset: {{combined: {to}}}\n")

STATE = "var/lib/hostknob"
def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel == STATE or rel.startswith(STATE + "/"):
            dirs[:] = []
            continue
        for n in dirs + files:
            p = os.path.join(d, n)
            r = os.path.normpath(os.path.join(rel, n))
            if r == STATE:
                continue
            st = os.lstat(p)
            if os.path.islink(p):
                out[r] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[r] = ("dir", st.st_mode & 0o7777)
            else:
                out[r] = ("file", st.st_mode & 0o7777, open(p, "rb").read())
    for parent in ("var/lib", "var"):
        if parent in out and not any(k.startswith(parent + "/") for k in out):
            del out[parent]
    return out

root = os.path.join(tmp, "root")
def fresh():
    if os.path.exists(root):
        shutil.rmtree(root)
    shutil.copytree(pristine, root, symlinks=True)

def hk_run(*args, inject=None):
    cmd = [hk, "--root", root, "--manifest", man] + list(args)
    if inject:
        cmd = ["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=" + inject[0],
               "-e", f"inject={inject[0]}:signal=SIGKILL:when={inject[1]}"] + cmd
    return subprocess.run(cmd, capture_output=True, text=True)

def must(*args):
    r = hk_run(*args)
    assert r.returncode == 0, f"{args}: {r.stderr}"

def calls(syscall, *args):
    """How many `syscall` calls `hostknob ARGS` makes (strace -c)."""
    fd, log = tempfile.mkstemp(dir=tmp)
    os.close(fd)
    subprocess.run(["strace", "-f", "-c", "-U", "calls,name", "-o", log, "-e", "trace=" + syscall,
                    hk, "--root", root, "--manifest", man] + list(args), capture_output=True)
    m = re.search(r"(\d+)\s+" + syscall + r"\b", open(log).read())
    return int(m.group(1)) if m else 0

def differs(context):
    now = tree(root)
    if now == want:
        return None
    diff = [k for k in sorted(set(now) | set(want)) if now.get(k) != want.get(k)]
    return f"{context}: {len(diff)} paths differ, first {diff[:3]}"

# The state file as hostknob writes it (its own YAML), so an exact revert is byte-identical.
state = f"hostknob-capture/ethtool/{IF}.yaml"
fresh()
must("apply", "--all")
must("revert", "--all")
shutil.copy(os.path.join(root, state), os.path.join(pristine, state))
want = tree(pristine)

results = {}
failures = []
t0 = time.monotonic()
for syscall in os.environ.get("KILL_AT", "unlinkat renameat mkdirat").split():
    for phase in os.environ.get("PHASES", "apply revert").split():
        fresh()
        if phase == "revert":
            must("apply", "--all")
        n = calls(syscall, phase, "--all")
        runs = bad = 0
        for i in range(1, n + 1):
            fresh()
            if phase == "revert":
                must("apply", "--all")
            r = hk_run(phase, "--all", inject=(syscall, i))
            runs += 1
            # The first revert may say the journal was torn (exit 1): the second must be clean.
            hk_run("revert", "--all")
            last = hk_run("revert", "--all")
            why = differs(f"{phase} killed at {syscall} {i} (exit {r.returncode})")
            if why is None and last.returncode != 0:
                why = f"{phase} killed at {syscall} {i}: revert --all exit {last.returncode}: {last.stderr.strip()}"
            if why:
                bad += 1
                failures.append(why)
        results[(syscall, phase)] = (runs, bad)
elapsed = time.monotonic() - t0
print(f"# {queues} combined channels -> {to} and back; hostknob {hk}; {elapsed:.0f} s")
print("| killed at | in | runs | restored exactly | differing |")
print("|---|---|---:|---:|---:|")
total = bad_total = 0
for (syscall, phase), (runs, bad) in results.items():
    total += runs; bad_total += bad
    print(f"| {syscall} | {phase} | {runs} | {runs - bad} | {bad} |")
print(f"| all | | {total} | {total - bad_total} | {bad_total} |")
for f in failures[:12]:
    print("  ", f)
PY
