#!/usr/bin/env bash
# `hostknob probe noise` against oslat (Debian's rt-tests) on the same CPU,
# run in alternation: per run the lost time (µs per second), the gaps above
# 1 µs and the largest gap, side by side, then each tool's median and range.
# oslat's figures come from its --json histogram (1 µs buckets, 1024 of
# them): bucket N holds loops of (N-1, N] µs, so its gaps above 1 µs are
# buckets 2 and up and its lost time is their count times N - 0.5 µs (a
# midpoint estimate) up to its last bucket, which holds every loop of 1024 µs
# and more: so both tools' lost time is compared over gaps below 1024 µs,
# and the gaps of 1024 µs and more are counted apart ("long"). The max is
# exact in both. rtla osnoise is not compared where
# the kernel lacks the osnoise tracer (CONFIG_OSNOISE_TRACER), as on the CI VM.
# Usage: bench/noise-vs-oslat.sh [CPU] [SECONDS] [RUNS]   (root; from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
cpu=${1:-1}; secs=${2:-5}; runs=${3:-5}
command -v oslat >/dev/null || { echo "oslat missing: apt-get install -y rt-tests" >&2; exit 1; }
[ -n "${HOSTKNOB_BIN:-}" ] || cargo build --release --locked -q
bin=${HOSTKNOB_BIN:-$(dist/release-dir)/hostknob}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ -e /sys/kernel/tracing/available_tracers ] && grep -qw osnoise /sys/kernel/tracing/available_tracers; then
  echo "note: this kernel has the osnoise tracer: compare with 'rtla osnoise top -c $cpu -d ${secs}s' too"
else
  echo "note: no osnoise tracer here (CONFIG_OSNOISE_TRACER off, or tracefs not mounted): rtla osnoise cannot run"
fi
echo "CPU $cpu, $secs s per run, $runs runs each, alternating; kernel $(uname -r)"
printf '%-4s %-9s %14s %8s %6s %10s\n' run tool "lost<1ms µs/s" gaps long "max µs"
: > "$tmp/h"; : > "$tmp/o"
for i in $(seq 1 "$runs"); do
  "$bin" --format json probe noise --cpus "$cpu" --duration "${secs}s" --attribution counts --raw "$tmp/gaps.csv" > "$tmp/h.json"
  python3 - "$tmp/h.json" "$tmp/gaps.csv" >> "$tmp/h" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["cpus"][0]
gaps = [int(l.split(",")[2]) / 1000 for l in list(open(sys.argv[2]))[1:]]
short = [g for g in gaps if g < 1024]
secs = c["measured_ns"] / 1e9
print(round(sum(short) / secs, 1), len(gaps), len(gaps) - len(short), c["max_gap_ns"] / 1000)
PY
  oslat -q -c "$cpu" -D "$secs" -b 1024 --json="$tmp/o.json" > /dev/null
  python3 - "$tmp/o.json" >> "$tmp/o" <<'PY'
import json, sys
t = list(json.load(open(sys.argv[1]))["thread"].values())[0]
h = {int(k): v for k, v in t["histogram"].items()}
top = max(h)
gaps = sum(v for k, v in h.items() if k >= 2)
lost = sum(v * (k - 0.5) for k, v in h.items() if 2 <= k < top)
print(round(lost / t["duration"], 1), gaps, h.get(top, 0) if top >= 1024 else 0, t["max"])
PY
  read -r hl hg hb hm < <(tail -1 "$tmp/h"); read -r ol og ob om < <(tail -1 "$tmp/o")
  printf '%-4s %-9s %14s %8s %6s %10s\n' "$i" hostknob "$hl" "$hg" "$hb" "$hm" "$i" oslat "$ol" "$og" "$ob" "$om"
done
python3 - "$tmp/h" "$tmp/o" <<'PY'
import statistics, sys
for name, f in (("hostknob", sys.argv[1]), ("oslat", sys.argv[2])):
    rows = [list(map(float, l.split())) for l in open(f) if l.strip()]
    cols = list(zip(*rows))
    fmt = lambda v: f"{statistics.median(v):.1f} [{min(v):.1f}..{max(v):.1f}]"
    print(f"{name:9} median [range]: lost<1ms {fmt(cols[0])} µs/s, gaps {fmt(cols[1])}, long {fmt(cols[2])}, max {fmt(cols[3])} µs")
PY
