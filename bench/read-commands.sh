#!/usr/bin/env bash
# Read commands' speed and memory: inventory beside lscpu on this machine, and
# inventory, audit and doc on the largest captures (cwf0: 576 CPUs, gnr0: 512
# CPUs). Prints medians and ratios, then counts that do not depend on the load
# of a shared machine: system calls (strace -c -f), instructions in user space
# (valgrind callgrind), CPU time and page faults (perf stat).
# Usage: bench/read-commands.sh   (from the repository root; installs hyperfine)
#        BIN=path/to/hostknob bench/read-commands.sh   (measure another build)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -q
  BIN=$(dist/release-dir)/hostknob
fi
echo "# machine: $(nproc) CPUs, kernel $(uname -r), binary $BIN"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# The binaries measured are copies, written as a package manager writes an
# installed one: as the linker left it (written through a mapping), the
# kernel's page cache holds it in small pieces, and every run maps and unmaps
# it page by page (0.3 ms more per live inventory on the development VM).
cp "$BIN" "$tmp/hostknob"
bin=$tmp/hostknob
if [ -n "${BEFORE:-}" ]; then
  cp "$BEFORE" "$tmp/hostknob-before"
  BEFORE=$tmp/hostknob-before
fi
# build.rs has the linker put these functions first (dist/hot-symbols.sh).
hot=$(grep -cv '^#' dist/hot-symbols.txt || true)
have=$({ grep -v '^#' dist/hot-symbols.txt || true; } | sort | comm -12 - <(nm "$bin" | awk '{ print $NF }' | sort -u) | wc -l)
echo "# hot functions placed first: $have of the $hot in dist/hot-symbols.txt (rerun dist/hot-symbols.sh when few are left)"

for h in gnr0 cwf0; do
  mkdir -p "$tmp/$h" && tar xzf "$corpus/$h.tar.gz" -C "$tmp/$h"
done

median() {
  python3 - "$1" <<'PY'
import json, sys
for x in json.load(open(sys.argv[1]))["results"]:
    t = sorted(x["times"])
    print("%-60s median %.2f ms  (min %.2f)" % (x["command"], t[len(t) // 2] * 1000, t[0] * 1000))
PY
}

echo "# live: hostknob inventory vs lscpu (same run, alternating is not possible in hyperfine; warmed up)"
hyperfine --style none -N -w 10 -r 100 --export-json "$tmp/live.json" "$bin inventory" "lscpu" >/dev/null
median "$tmp/live.json"
python3 - "$tmp/live.json" <<'PY'
import json,sys
r={("lscpu" if x["command"]=="lscpu" else "hostknob"):sorted(x["times"])[len(x["times"])//2] for x in json.load(open(sys.argv[1]))["results"]}
print(f"ratio hostknob/lscpu (medians): {r['hostknob']/r['lscpu']:.2f}  (target <= 1.2)")
PY

# hyperfine runs all of one command, then all of the next: under a changing
# load, alternating run by run compares more fairly. BEFORE=<binary> adds
# another build to the comparison.
echo "# live, alternated run by run (150 rounds; median, first quartile, min)"
python3 - 150 "$bin inventory" ${BEFORE:+"$BEFORE inventory"} lscpu <<'PY'
import os, statistics, subprocess, sys, time
n, cmds = int(sys.argv[1]), sys.argv[2:]
res = [[] for _ in cmds]
with open(os.devnull, "w") as null:
    for i in range(n):
        for j in (range(len(cmds)) if i % 2 == 0 else reversed(range(len(cmds)))):
            t = time.perf_counter()
            subprocess.run(cmds[j].split(), stdout=null, stderr=null)
            res[j].append(time.perf_counter() - t)
for c, r in zip(cmds, res):
    r.sort()
    print(f"{c:50s} median {statistics.median(r)*1e3:6.2f} ms  p25 {r[len(r)//4]*1e3:6.2f}  min {r[0]*1e3:6.2f}")
PY

echo "# largest captures"
hyperfine --style none -N -w 5 -r 50 --export-json "$tmp/big.json" "$bin --root $tmp/gnr0 inventory" "$bin --root $tmp/cwf0 inventory" >/dev/null
median "$tmp/big.json" | sed "s#$tmp/##"

echo "# audit on the largest captures (target < 50 ms)"
hyperfine --style none -N -w 5 -r 30 -i --export-json "$tmp/audit.json" "$bin --root $tmp/gnr0 --host gnr0 --manifest manifest audit" "$bin --root $tmp/cwf0 --host cwf0 --manifest manifest audit" >/dev/null
median "$tmp/audit.json" | sed "s#$tmp/##"

echo "# host document on the largest captures (target < 50 ms)"
hyperfine --style none -N -w 5 -r 30 --export-json "$tmp/doc.json" "$bin --root $tmp/gnr0 --host gnr0 doc --out /dev/null" "$bin --root $tmp/cwf0 --host cwf0 doc --out /dev/null" >/dev/null
median "$tmp/doc.json" | sed "s#$tmp/##"

echo "# peak RSS (KiB)"
for args in "inventory" "--root $tmp/gnr0 inventory" "--root $tmp/cwf0 inventory"; do
  /usr/bin/time -f "%M KiB  hostknob $args" $bin $args >/dev/null 2>"$tmp/t" || true
  tail -1 "$tmp/t" | sed "s#$tmp/##"
done
/usr/bin/time -f "%M KiB  lscpu" lscpu >/dev/null 2>"$tmp/t"; tail -1 "$tmp/t"

# Counts, repeatable under load.
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace; }
syscalls() { strace -f -c -o "$tmp/s" "$@" >/dev/null 2>&1 || true; awk '/total/ {print $4}' "$tmp/s"; }
echo "# system calls (strace -c -f)"
echo "lscpu: $(syscalls lscpu)"
for args in "inventory" "--root $tmp/gnr0 inventory" "--root $tmp/gnr0 --host gnr0 --manifest manifest audit" "--root $tmp/gnr0 --host gnr0 doc --out /dev/null"; do
  echo "hostknob $args: $(syscalls $bin $args)" | sed "s#$tmp/##"
done
if command -v valgrind >/dev/null; then
  echo "# instructions in user space (valgrind --tool=callgrind; live only: valgrind lacks openat2)"
  for cmd in "lscpu" "$bin --version" "$bin inventory"; do
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" $cmd >/dev/null 2>"$tmp/v" || true
    echo "$cmd: $(awk '/Collected/ {print $4}' "$tmp/v") instructions"
  done
fi
if perf stat -e task-clock true 2>/dev/null; then
  echo "# CPU time and page faults (perf stat, 40 runs each; CPU time is summed over threads)"
  for cmd in "lscpu" "$bin --version" "$bin inventory" "$bin --root $tmp/gnr0 inventory"; do
    perf stat -x, -e task-clock,page-faults -r 40 $cmd 2>"$tmp/p" >/dev/null || true
    echo "$cmd: $(awk -F, '{printf "%s %s; ", $1, $3}' "$tmp/p")" | sed "s#$tmp/##"
  done
fi
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
