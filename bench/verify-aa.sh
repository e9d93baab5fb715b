#!/bin/sh
# A/A and A/B of verify's verdict rule on this live host (root; changes /sys
# and restores it after every run). Every run holds /work/helpers/live.lock
# (or $LIVE_LOCK) so it never overlaps another live test, and every cpuidle
# disable and resume-latency limit is checked to read 0 after each run.
#
#   bench/verify-aa.sh [N_AA] [N_NA] [MAX_ROUNDS]      (default 40 20 24)
#
# A/A: knobs that cannot affect the wakeup probe, seeds 1..N_AA alternating
# between THP defrag madvise -> defer+madvise and a 1000 µs resume-latency
# limit on CPU 0 (the waker; the deepest state here exits in 1 µs), the
# sleeper on CPU 1 (--force: outside that knob's target, on purpose).
# A/B: resume latency n/a on the sleeper (CPU 1), seeds 1..N_NA.
# Output: one line per run (kind, seed, verdict, decision, rounds, ratio,
# interval) and the counts; the ledgers go to a temporary manifest.
set -eu
N_AA=${1:-40}
N_NA=${2:-20}
MAX=${3:-24}
BIN=${HOSTKNOB:-$("$(dirname "$0")"/../dist/release-dir)/hostknob}
LOCK=${LIVE_LOCK:-/work/helpers/live.lock}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/m" "$T/state"
cat > "$T/m/k.yaml" <<'K'
id: aa-thp-defrag
title: THP defrag defer+madvise (cannot affect the probe)
kind: thp
target: {setting: defrag}
set: defer+madvise
hosts: "*"
persistence: runtime
why: A/A
verify: {probe: wakeup}
---
id: aa-resume-1000-waker
title: 1000 µs resume limit on the waker CPU (cannot affect the probe)
kind: pm-qos-resume-latency
target: {cpus: "0"}
set: 1000
hosts: "*"
persistence: runtime
why: A/A
verify: {probe: wakeup}
---
id: ab-resume-na-sleeper
title: resume latency n/a on the sleeper CPU
kind: pm-qos-resume-latency
target: {cpus: "1"}
set: n/a
hosts: "*"
persistence: runtime
why: A/B
verify: {probe: wakeup}
K
check() {
  for f in /sys/devices/system/cpu/cpu*/cpuidle/state*/disable /sys/devices/system/cpu/cpu*/power/pm_qos_resume_latency_us; do
    [ "$(cat "$f")" = 0 ] || { echo "NOT RESTORED: $f = $(cat "$f")" >&2; exit 1; }
  done
  [ "$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/defrag)" = "$DEFRAG" ] || { echo "NOT RESTORED: THP defrag" >&2; exit 1; }
}
DEFRAG=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/defrag)
one() { # kind knob seed [extra verify args] [extra probe args]
  kind=$1 knob=$2 seed=$3 vx=${4:-} px=${5:-}
  # The restore check runs under the same lock as the run, so another live
  # user's knob is never mistaken for one this run left behind.
  (
    flock 9
    # shellcheck disable=SC2086
    "$BIN" --manifest "$T/m" --state-dir "$T/state" --host bench --format json \
      verify "$knob" --rounds 6 --max-rounds "$MAX" --settle 200ms --seed "$seed" $vx \
      -- --samples 100 --gap-us 2000..4000 $px > "$T/out.json" 2> "$T/err" || true
    check
  ) 9>"$LOCK" || exit 1
  python3 - "$kind" "$knob" "$seed" "$T/out.json" "$T/err" <<'P'
import json, sys
kind, knob, seed, out, err = sys.argv[1:]
try:
    v = json.load(open(out))
except Exception:
    print(f"{kind} {knob} seed {seed}: ERROR {open(err).read().strip()[-200:]}")
    sys.exit(0)
a = v["analysis"]
print(f"{kind} {knob} seed {seed}: {v['verdict']} {v['decision']} rounds {v['rounds']} "
      f"ratio {a['ratio']:.3f} interval {a['interval'][0]:.3f}-{a['interval'][1]:.3f} "
      f"p50 {a['baseline']['p50_ns']/1e3:.1f}->{a['applied']['p50_ns']/1e3:.1f} us "
      # Idle entries on the sleeper per leg: 0 means its CPU never idled (busy host).
      f"sleeper idle entries {sum(c['entries'] for c in v['idle'][0] if c['cpu'] == v['placement']['sleeper'])}"
      f"->{sum(c['entries'] for c in v['idle'][1] if c['cpu'] == v['placement']['sleeper'])}")
P
}
echo "# $(date -u +%FT%TZ) $(uptime)"
echo "# verify --rounds 6 --max-rounds $MAX --settle 200ms -- --samples 100 --gap-us 2000..4000"
i=1
while [ $i -le "$N_AA" ]; do
  if [ $((i % 2)) = 1 ]; then
    one AA aa-thp-defrag $i
  else
    one AA aa-resume-1000-waker $i --force "--sleeper-cpu 1"
  fi
  i=$((i + 1))
done | tee "$T/aa.txt"
i=1
while [ $i -le "$N_NA" ]; do one AB ab-resume-na-sleeper $i; i=$((i + 1)); done | tee "$T/ab.txt"
echo "# $(date -u +%FT%TZ) $(uptime)"
echo "A/A: $(grep -c ': no-detectable-effect' "$T/aa.txt" || true) of $(grep -c . "$T/aa.txt") say no detectable effect"
echo "A/B: $(grep -c ': improved' "$T/ab.txt" || true) of $(grep -c . "$T/ab.txt") say improved"
