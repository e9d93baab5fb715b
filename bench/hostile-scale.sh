#!/usr/bin/env bash
# Issue 50 items 6-8: time and peak RSS of the inputs that once blew up, for
# BENCHMARKS.md ("Hostile inputs, round 4"): a CPU list of repeated huge
# ranges as a capture's `online`, one `report` input of 10k-100k knobs (and
# 30 such files), and `import tuned` of very long profiles. Run it with an
# old and a new binary to compare; the tests check only the errors.
# Usage: BIN=path/to/hostknob bench/hostile-scale.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${BIN:-}" ]; then
  cargo build --release --locked -q
  BIN=$(dist/release-dir)/hostknob
fi
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }
echo "# machine: $(nproc) CPUs, kernel $(uname -r), binary $BIN"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
run() { # label, then the hostknob arguments; 3 GB address-space limit, 300 s
  local label=$1; shift
  local rc=0
  /usr/bin/time -o "$tmp/time" -f '%e %M' timeout 300 prlimit --as=3221225472 -- "$BIN" "$@" \
    >/dev/null 2>"$tmp/err" || rc=$?
  read -r secs kb < <(tail -1 "$tmp/time")
  printf '%-46s exit %-3s %7s s %9s kB  %s\n' "$label" "$rc" "$secs" "$kb" \
    "$(grep -v '^$' "$tmp/err" | head -c 110 | tr '\n' ' ')"
}

# 6. CPU lists: 160 KB of `0-65536,` (past NR_CPUS) and of `0-8191,` (in bounds).
mkdir -p "$tmp/vm" && tar xzf "$corpus/fc-virtio-2cpu.tar.gz" -C "$tmp/vm"
online=$tmp/vm/sys/devices/system/cpu/online
cp "$online" "$tmp/online.orig"
python3 -c "import sys; sys.stdout.write('0-65536,' * 20000 + '0')" >"$online"
run "online: 160 KB of 0-65536," --root "$tmp/vm" inventory
python3 -c "import sys; sys.stdout.write('0-8191,' * 23000 + '0')" >"$online"
run "online: 160 KB of 0-8191," --root "$tmp/vm" inventory
cp "$tmp/online.orig" "$online"

# 7. report: one audit of N knobs, and 30 of 100k.
"$BIN" --root "$tmp/vm" --host vm --manifest manifest audit --format json >"$tmp/vm.json" || true
for n in 10000 20000 40000 100000; do
  python3 - "$tmp/vm.json" "$tmp/r$n.json" "$n" <<'PY'
import json, sys
a = json.load(open(sys.argv[1])); n = int(sys.argv[3])
k = a["knobs"][0]
knobs = []
for i in range(n):
    c = dict(k); c["id"] = f"k{i:06d}"; knobs.append(c)
a["knobs"] = knobs
json.dump(a, open(sys.argv[2], "w"))
PY
  run "report: 1 file of $n knobs ($(du -h "$tmp/r$n.json" | cut -f1))" report "$tmp/r$n.json"
done
mkdir "$tmp/fleet"
for i in $(seq 1 30); do
  sed "s/\"host\": *\"vm\"/\"host\":\"vm$i\"/" "$tmp/r100000.json" >"$tmp/fleet/h$i.json"
done
run "report: 30 files of 100000 knobs" report "$tmp/fleet"

# 8. import tuned: 400,000 [sysctl] lines (12 MB) and 20,000 (at the cap).
for n in 400000 19990; do
  mkdir -p "$tmp/from$n/long"
  python3 - "$tmp/from$n/long/tuned.conf" "$n" <<'PY'
import sys
n = int(sys.argv[2])
with open(sys.argv[1], "w") as f:
    f.write("[main]\nsummary=long\n[sysctl]\n")
    for i in range(n):
        f.write(f"kernel.k{i}={i}\n")
PY
  run "import tuned: [sysctl] of $n lines ($(du -h "$tmp/from$n/long/tuned.conf" | cut -f1))" \
    --root "$tmp/vm" import tuned long --from "$tmp/from$n" --out "$tmp/out$n"
done
