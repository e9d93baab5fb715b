#!/usr/bin/env bash
# Fault injection: SIGKILL apply and revert at random points on a copy of spr1
# (320 CPUs: the biggest write set, 1,280 idle-state files), including kills
# while the journal grows followed by a re-apply, then `revert --all`.
# Counts stranded files (differing from the capture after the final revert)
# and revert failures. Not a test: a benchmark whose figures go in BENCHMARKS.md.
# Usage: bench/fault-injection.sh [TRIALS] [SEED]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
HK=$(dist/release-dir)/hostknob
export HK
export CORPUS=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
exec python3 - "${1:-240}" "${2:-$RANDOM}" <<'PY'
import hashlib, json, os, random, shutil, signal, subprocess, sys, tempfile, time

trials, seed = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
hk, corpus = os.environ["HK"], os.environ["CORPUS"]
tmp = tempfile.mkdtemp(prefix="hk-fault-")
root = os.path.join(tmp, "spr1")
os.makedirs(root)
subprocess.run(["tar", "xzf", os.path.join(corpus, "spr1.tar.gz"), "-C", root], check=True)
man = os.path.join(tmp, "manifest")
os.makedirs(man)
with open(os.path.join(man, "k.yaml"), "w") as f:
    f.write("id: idle\ntitle: idle\nwhy: w\nhosts: \"*\"\npersistence: runtime\n"
            "kind: cpuidle-state\ntarget:\n  states: {min_exit_latency_us: 0}\nset: disabled\n"
            "---\nid: thp\ntitle: thp\nwhy: w\nhosts: \"*\"\npersistence: runtime\n"
            "kind: thp\ntarget: {setting: enabled}\nset: never\n")
state = os.path.join(root, "var/lib/hostknob")
journal = os.path.join(state, "journal.jsonl")
base = [hk, "--root", root, "--manifest", man]

def run(*args):
    return subprocess.run(base + list(args), capture_output=True, text=True)

# The write set, from a scratch apply's journal; the files as captured.
r = run("apply", "--all")
assert r.returncode == 0, r.stderr
paths = [json.loads(l)["path"] for l in open(journal)]
r = run("revert", "--all")
assert r.returncode == 0, r.stderr
def digest(p):
    try:
        return hashlib.sha1(open(os.path.join(root, p.lstrip("/")), "rb").read()).hexdigest()
    except OSError as e:
        return "missing"
captured = {p: digest(p) for p in paths}

def timed(args):
    t = time.monotonic(); subprocess.run(base + args, capture_output=True); return time.monotonic() - t
t_apply = timed(["apply", "--all"]); t_revert = timed(["revert", "--all"])

def kill_at(args, delay):
    p = subprocess.Popen(base + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    p.send_signal(signal.SIGKILL); p.wait()
    return p.returncode == -signal.SIGKILL

def kill_in_journal_growth():
    """Kills apply as soon as the journal starts growing past what it held."""
    before = os.path.getsize(journal) if os.path.exists(journal) else 0
    p = subprocess.Popen(base + ["apply", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while p.poll() is None and time.monotonic() < deadline:
        try:
            if os.path.getsize(journal) > before:
                break
        except OSError:
            pass
    p.send_signal(signal.SIGKILL); p.wait()
    now = open(journal, "rb").read() if os.path.exists(journal) else b""
    return p.returncode == -signal.SIGKILL, len(now) > 0 and not now.endswith(b"\n")

stats = dict(trials=0, killed=0, apply_kills=0, revert_kills=0, journal_kills=0, torn_seen=0,
             reapplies=0, reapply_failures=0, loud_torn_reverts=0, revert_failures=0,
             stranded_files=0, leftover_temp_files=0)
for i in range(trials):
    kind = ("apply", "revert", "journal")[i % 3]
    stats["trials"] += 1
    if kind == "apply":
        stats["killed"] += kill_at(["apply", "--all"], rng.uniform(0, t_apply * 1.1)); stats["apply_kills"] += 1
    elif kind == "revert":
        run("apply", "--all")
        stats["killed"] += kill_at(["revert", "--all"], rng.uniform(0, t_revert * 1.1)); stats["revert_kills"] += 1
    else:
        killed, torn = kill_in_journal_growth()
        stats["killed"] += killed; stats["journal_kills"] += 1; stats["torn_seen"] += torn
    if kind != "revert" and rng.random() < 0.5:
        stats["reapplies"] += 1
        r = run("apply", "--all")
        stats["reapply_failures"] += r.returncode != 0
    r = run("revert", "--all")
    if r.returncode != 0 and "torn record" in r.stderr:
        stats["loud_torn_reverts"] += 1
        r = run("revert", "--all")
    if r.returncode != 0:
        stats["revert_failures"] += 1
        print(f"trial {i}: revert failed: {r.stderr.strip()}", file=sys.stderr)
    stranded = [p for p in paths if digest(p) != captured[p]]
    stats["stranded_files"] += len(stranded)
    for d, _, files in os.walk(os.path.join(root, "sys/devices/system/cpu/cpu0")):
        stats["leftover_temp_files"] += sum(f.endswith(".hostknob-new") for f in files)

print(f"seed {seed}; spr1, {len(paths)} files per apply; apply {t_apply*1000:.0f} ms, revert {t_revert*1000:.0f} ms")
for k, v in stats.items():
    print(f"{k:>20}: {v}")
shutil.rmtree(tmp)
sys.exit(1 if stats["revert_failures"] or stats["stranded_files"] else 0)
PY
