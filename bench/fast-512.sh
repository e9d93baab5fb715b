#!/usr/bin/env bash
# Issue 36 in one run: live `inventory` against lscpu (wall and CPU time,
# alternated run by run), `inventory cpu --root` against `lscpu --sysroot` on
# the largest hwloc dumps lscpu reads, medians on gnr0 (512 CPUs) of
# inventory, each section, audit of the shipped catalog and doc, system calls
# per file read (strace -c -f) and peak RSS. No hyperfine needed: a Python
# loop alternates the commands and takes wall time and CPU time (user +
# system, all threads) from wait4; peak RSS from /usr/bin/time (a child of
# Python would report Python's own RSS, which survives exec).
# Usage: bench/fast-512.sh                  (from the repository root)
#        BIN=path/to/hostknob RUNS=30 bench/fast-512.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -q
  BIN=$(dist/release-dir)/hostknob
fi
RUNS=${RUNS:-30}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# A copy, as a package manager writes it (see bench/read-commands.sh).
cp "$BIN" "$tmp/hostknob"
bin=$tmp/hostknob
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
mkdir -p "$tmp/gnr0" && tar xzf "$corpus/gnr0.tar.gz" -C "$tmp/gnr0"
echo "# machine: $(nproc) CPUs, kernel $(uname -r), $(id -un), binary $BIN"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The largest hwloc dumps lscpu --sysroot can read (its exit status and a CPU count).
dumps=()
for t in $(ls tests/corpus/hwloc/*.tar.bz2 | sort -t/ -k4 -n -r); do
  n=$(basename "$t" .tar.bz2)
  mkdir -p "$tmp/hw/$n" && tar xjf "$t" -C "$tmp/hw/$n"
  d=$(find "$tmp/hw/$n" -maxdepth 2 -type d -name sys -printf '%h\n' | head -1)
  if [ -n "$d" ] && lscpu --sysroot "$d" 2>/dev/null | grep -q '^CPU(s):' \
     && "$bin" --root "$d" inventory cpu >/dev/null 2>&1; then
    dumps+=("$d")
  fi
  [ ${#dumps[@]} -ge 3 ] && break
done
python3 - "$bin" "$tmp/gnr0" "$RUNS" "${dumps[@]}" <<'PY'
import os, subprocess, sys, time, statistics as st
bin, gnr0, runs, dumps = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
null = os.open(os.devnull, os.O_WRONLY)

ALL = os.sched_getaffinity(0)

def once(argv):
    # ("one CPU", argv): the child inherits an affinity of CPU 0 alone, so
    # hostknob starts no helper threads; no taskset exec in the timing.
    one = isinstance(argv, tuple)
    if one:
        argv = argv[1]
        os.sched_setaffinity(0, {min(ALL)})
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
        (os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
    if one:
        os.sched_setaffinity(0, ALL)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    return wall * 1e3, (ru.ru_utime + ru.ru_stime) * 1e3

def paired(cmds, n):
    """Each round runs every command once, in turn: the load moves all alike."""
    for c in cmds.values():
        once(c); once(c)
    got = {k: [] for k in cmds}
    for _ in range(n):
        for k, c in cmds.items():
            got[k].append(once(c))
    return {k: (st.median(x[0] for x in v), st.median(x[1] for x in v)) for k, v in got.items()}

def ratio(a, b, what):
    r = paired({"hostknob": a, "lscpu": b}, runs)
    h, l = r["hostknob"], r["lscpu"]
    print(f"{what}: wall {h[0]:.2f} vs {l[0]:.2f} ms = {h[0]/l[0]:.2f}x; "
          f"CPU {h[1]:.2f} vs {l[1]:.2f} ms = {h[1]/max(l[1], 1e-3):.2f}x")

print(f"# paired medians of {runs} rounds (hostknob and lscpu alternated)")
ratio([bin, "inventory"], ["lscpu"], "live inventory vs lscpu (goal <= 1.0x wall, <= 1.2x CPU)")
for d in dumps:
    name = os.path.basename(os.path.dirname(d)) if os.path.basename(d) in ("", ".") else os.path.basename(os.path.dirname(d))
    ratio([bin, "--root", d, "inventory", "cpu"], ["lscpu", "--sysroot", d],
          f"inventory cpu --root vs lscpu --sysroot, {name}")
print(f"# gnr0 (512 CPUs): medians of {runs} runs (wall, CPU); goals 35 / 12 per section / 15 / 45 ms")
g = [bin, "--root", gnr0, "--host", "gnr0"]
cmds = {"inventory": g + ["inventory"]}
for s in ["host", "cpu", "caches", "numa", "memory", "idle", "frequency", "vulnerabilities",
          "network", "pm_qos", "platform", "processes"]:
    cmds[f"inventory {s}"] = g + ["inventory", s]
cmds["audit (shipped catalog, host rpc-1.example)"] = [bin, "--root", gnr0, "--host", "rpc-1.example",
                                                 "--manifest", "manifest", "audit"]
cmds["doc"] = g + ["doc", "--out", os.devnull]
for k, (w, c) in paired(cmds, runs).items():
    print(f"{k:42} wall {w:7.2f} ms  CPU {c:7.2f} ms")
# Item 3: threads pay where the wall time falls by more than the CPU time grows.
print(f"# helper threads (paired medians of {runs}): one CPU (no helpers) vs all {len(ALL)} CPUs")
for k, argv in [("live inventory", [bin, "inventory"]), ("gnr0 inventory", g + ["inventory"]),
                ("gnr0 inventory idle", g + ["inventory", "idle"]),
                ("gnr0 inventory frequency", g + ["inventory", "frequency"]),
                ("gnr0 audit", cmds["audit (shipped catalog, host rpc-1.example)"]),
                ("gnr0 doc", cmds["doc"])]:
    r = paired({"one": ("one", argv), "all": argv}, runs)
    (w1, c1), (wa, ca) = r["one"], r["all"]
    verdict = "pays" if w1 - wa > 0 and (ca - c1) <= (w1 - wa) else "does not pay"
    print(f"{k:28} wall {w1:7.2f} -> {wa:7.2f} ms, CPU {c1:7.2f} -> {ca:7.2f} ms: {verdict}")
PY

echo "# peak RSS (/usr/bin/time; goal for gnr0 inventory <= 12 MB)"
for c in "$bin inventory" "lscpu" "$bin --root $tmp/gnr0 inventory"; do
  /usr/bin/time -f "%M" $c >/dev/null 2>"$tmp/t" || true
  printf '%-40s %6.1f MB\n' "${c//$tmp\//}" "$(tail -1 "$tmp/t" | awk '{ print $1 / 1024 }')"
done
echo "# system calls per file read (strace -c -f; opens, reads, closes and stats over reads;"
echo "# failed opens are files the tree lacks, such as gnr0's cache sizes: each costs one call)"
per_file() {
  strace -f -c -U name,calls,errors -o "$tmp/s" "$@" >/dev/null 2>&1 || true
  awk '$1 ~ /^(openat2|openat|open|read|close|newfstatat|fstat|statx)$/ { n += $2 } $1 == "read" { r = $2 }
       $1 ~ /^(openat2|openat|open)$/ { f += $3 } $1 == "total" { t = $2 }
       END { printf "%6d reads, %6d calls in all: %.3f per file (%d failed opens)\n", r, t, n / r, f }' "$tmp/s"
}
printf '%-32s' "live inventory:"; per_file "$bin" inventory
printf '%-32s' "live lscpu:"; per_file lscpu
printf '%-32s' "gnr0 inventory:"; per_file "$bin" --root "$tmp/gnr0" inventory
printf '%-32s' "gnr0 inventory idle:"; per_file "$bin" --root "$tmp/gnr0" inventory idle
printf '%-32s' "gnr0 inventory frequency:"; per_file "$bin" --root "$tmp/gnr0" inventory frequency
printf '%-32s' "gnr0 audit:"; per_file "$bin" --root "$tmp/gnr0" --host rpc-1.example --manifest manifest audit
printf '%-32s' "gnr0 doc:"; per_file "$bin" --root "$tmp/gnr0" --host gnr0 doc --out /dev/null
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
