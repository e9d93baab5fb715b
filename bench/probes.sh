#!/usr/bin/env bash
# Probe benchmarks behind the "## Probes" section of BENCHMARKS.md.
#
#   bench/probes.sh                 # everything, about 8 minutes
#   bench/probes.sh timer wakeup    # some parts: timer wakeup mechanisms rss
#
# Run as root from anywhere in the repository (cyclictest, SCHED_FIFO and
# /dev/cpu_dma_latency need it). Settings come from the environment:
#   ROUNDS=10 LOOPS=3000 INTERVAL=1000 CPU=<last online> PRIO=80  (timer vs cyclictest)
#   WAKE_ROUNDS=4 WAKE_SAMPLES=200                                 (wakeup with/without PM QoS)
#   RSS_DURATION=35s RSS_MIB=128                                   (rss --self-burst)
#   OUT=<dir for raw files>                                        (default: a new /tmp dir)
#
# Nothing is left changed: the PM QoS requests (hostknob --pmqos-us 0 and
# cyclictest's default) last only while those processes run, and no sysfs file
# is written. The script checks that on exit, however it exits.
set -euo pipefail
cd "$(dirname "$0")/.."

# Many short interleaved rounds: on a shared VM the host's scheduling moves
# the median by tens of percent from one run to the next.
ROUNDS=${ROUNDS:-10}
LOOPS=${LOOPS:-3000}
INTERVAL=${INTERVAL:-1000}
CPU=${CPU:-$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)}
PRIO=${PRIO:-80}
WAKE_ROUNDS=${WAKE_ROUNDS:-4}
WAKE_SAMPLES=${WAKE_SAMPLES:-200}
RSS_DURATION=${RSS_DURATION:-35s}
RSS_MIB=${RSS_MIB:-128}
OUT=${OUT:-$(mktemp -d /tmp/hostknob-probes.XXXXXX)}
PARTS=${*:-timer wakeup mechanisms rss}

need() { # need COMMAND PACKAGE
    command -v "$1" >/dev/null && return
    echo "installing $2 for $1"
    apt-get install -y -qq "$2" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$2" >/dev/null; }
}
need cyclictest rt-tests
need jq jq

check_host() {
    local ok=1
    if grep -qv '^0$' /sys/devices/system/cpu/cpu*/cpuidle/state*/disable 2>/dev/null; then
        echo "WARNING: an idle state is disabled:"; grep -H . /sys/devices/system/cpu/cpu*/cpuidle/state*/disable; ok=0
    fi
    local qos
    qos=$(od -An -td4 /dev/cpu_dma_latency | tr -d ' ')
    if [ "$qos" != 2000000000 ]; then
        echo "WARNING: /dev/cpu_dma_latency reads $qos µs (held by: $(fuser /dev/cpu_dma_latency 2>/dev/null))"; ok=0
    fi
    [ $ok = 1 ] && echo "host check: every idle state enabled, no PM QoS limit in force"
}
trap check_host EXIT

cargo build --release --locked -q
HK=$(dist/release-dir)/hostknob

# Nearest-rank percentile (the rule hostknob uses) of the numbers in a file.
pct() { sort -n "$2" | awk -v p="$1" '{a[NR]=$1} END {x=p*NR/100; r=int(x); if (r<x) r++; if (r<1) r=1; print a[r]}'; }
us() { awk -v n="$1" 'BEGIN {printf "%.1f", n/1000}'; }
# Busy and total jiffies of one CPU from /proc/stat, and the busy % between two
# readings: how much else ran on the measured CPU (a shared host's noise).
jiffies() { awk -v c="cpu$1" '$1 == c {print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
busy() { awk -v a="$1" -v b="$2" 'BEGIN {split(a, x, " "); split(b, y, " "); t = y[2] - x[2];
    printf "%.0f", (t > 0 ? 100 * (y[1] - x[1]) / t : 0)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a/b}'; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(uname -r), $(nproc) CPUs," \
    "cpuidle $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
echo "# hostknob $(git rev-parse --short HEAD 2>/dev/null), $(cyclictest --help 2>&1 | head -1)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg); busiest: $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -3 | awk '{printf "%s %s%%; ", $2, $1}')"
echo "# raw files in $OUT"
echo

timer_setting() { # timer_setting LABEL "HOSTKNOB QOS ARGS" "CYCLICTEST QOS ARGS"
    local label=$1 hk_qos=$2 ct_qos=$3 r t ratios=()
    : > "$OUT/timer-$label-hk.all"; : > "$OUT/timer-$label-ct.all"
    echo "## timer, PM QoS $label: hostknob probe timer --interval $INTERVAL --loops $LOOPS --cpu $CPU --priority $PRIO --mlock $hk_qos"
    echo "##                  vs cyclictest -i $INTERVAL -l $LOOPS -a $CPU -p $PRIO -m $ct_qos"
    printf '%-6s %-18s %-18s %-7s %s\n' round "hostknob p50 µs" "cyclictest p50 µs" ratio "CPU $CPU busy %"
    for r in $(seq 1 "$ROUNDS"); do
        local j0; j0=$(jiffies "$CPU")
        # Interleaved, alternating which runs first.
        if (( r % 2 )); then order="hk ct"; else order="ct hk"; fi
        for t in $order; do
            if [ $t = hk ]; then
                # shellcheck disable=SC2086
                "$HK" probe timer --interval "$INTERVAL" --loops "$LOOPS" --cpu "$CPU" --priority "$PRIO" \
                    --mlock $hk_qos --format json --raw "$OUT/timer-$label-hk-$r.csv" > "$OUT/timer-$label-hk-$r.json"
                tail -n +2 "$OUT/timer-$label-hk-$r.csv" | cut -d, -f2 > "$OUT/timer-$label-hk-$r.ns"
            else
                # -v -N: every sample, in ns ("thread: loop: value").
                # shellcheck disable=SC2086
                cyclictest -q -v -N -i "$INTERVAL" -l "$LOOPS" -a "$CPU" -p "$PRIO" -m $ct_qos 2>/dev/null \
                    | awk -F: 'NF == 3 && $1 + 0 == 0 { gsub(/ /, "", $3); print $3 }' > "$OUT/timer-$label-ct-$r.ns"
            fi
            cat "$OUT/timer-$label-$t-$r.ns" >> "$OUT/timer-$label-$t.all"
        done
        local n_ct; n_ct=$(wc -l < "$OUT/timer-$label-ct-$r.ns")
        [ "$n_ct" = "$LOOPS" ] || { echo "cyclictest gave $n_ct samples, not $LOOPS"; exit 1; }
        local a b; a=$(pct 50 "$OUT/timer-$label-hk-$r.ns"); b=$(pct 50 "$OUT/timer-$label-ct-$r.ns")
        ratios+=("$(ratio "$a" "$b")")
        printf '%-6s %-18s %-18s %-7s %s\n' "$r" "$(us "$a")" "$(us "$b")" "${ratios[-1]}" "$(busy "$j0" "$(jiffies "$CPU")")"
    done
    local a b
    for t in hk ct; do
        printf '%-10s pooled: p50 %s  p95 %s  p99 %s  max %s µs\n' "$([ $t = hk ] && echo hostknob || echo cyclictest)" \
            "$(us "$(pct 50 "$OUT/timer-$label-$t.all")")" "$(us "$(pct 95 "$OUT/timer-$label-$t.all")")" \
            "$(us "$(pct 99 "$OUT/timer-$label-$t.all")")" "$(us "$(pct 100 "$OUT/timer-$label-$t.all")")"
    done
    a=$(pct 50 "$OUT/timer-$label-hk.all"); b=$(pct 50 "$OUT/timer-$label-ct.all")
    printf '%s\n' "${ratios[@]}" > "$OUT/timer-$label.ratios"
    local r_pooled; r_pooled=$(ratio "$a" "$b")
    echo "ratio of pooled medians (hostknob / cyclictest): $r_pooled;" \
        "median of per-round ratios: $(pct 50 "$OUT/timer-$label.ratios")" \
        "-> $(awk -v r="$r_pooled" 'BEGIN {print (r >= 0.85 && r <= 1.15) ? "within 0.85-1.15" : "OUTSIDE 0.85-1.15"}')"
    echo
}

wakeup_part() {
    local r s f
    echo "## wakeup: hostknob probe wakeup --samples $WAKE_SAMPLES (gaps 50..66 ms), without and with --pmqos-us 0, $WAKE_ROUNDS interleaved rounds"
    echo "## (busy %: how much else ran on the sleeper's CPU, from /proc/stat; none: samples whose gap counted no cpuidle entry)"
    local sleeper; sleeper=$(awk -F'[-,]' '{print $NF}' /sys/devices/system/cpu/online)
    printf '%-6s %-6s %-8s %-8s %-8s %-8s %-7s %-6s %s\n' round pmqos "p50 µs" "p95 µs" "p99 µs" "max µs" "busy %" "none" \
        "idle entries per sample (state: n)"
    for s in none 0; do : > "$OUT/wakeup-$s.all"; : > "$OUT/wakeup-$s.p50"; : > "$OUT/wakeup-$s.bystate"; done
    for r in $(seq 1 "$WAKE_ROUNDS"); do
        if (( r % 2 )); then order="none 0"; else order="0 none"; fi
        for s in $order; do
            f="$OUT/wakeup-$s-$r"
            local j0; j0=$(jiffies "$sleeper")
            if [ "$s" = 0 ]; then
                "$HK" probe wakeup --samples "$WAKE_SAMPLES" --pmqos-us 0 --format json --raw "$f.csv" > "$f.json" 2> "$f.err"
            else
                "$HK" probe wakeup --samples "$WAKE_SAMPLES" --format json --raw "$f.csv" > "$f.json" 2> "$f.err"
            fi
            tail -n +2 "$f.csv" | cut -d, -f3 >> "$OUT/wakeup-$s.all"
            # Each sample with the deepest idle state its CPU entered during the gap.
            awk -F, 'NR == 1 { for (k = 4; k <= NF; k++) name[k] = substr($k, 9); next }
                { d = "none"; for (k = 4; k <= NF; k++) if ($k > 0) d = name[k]; print d, $3 }' "$f.csv" >> "$OUT/wakeup-$s.bystate"
            jq .p50_ns "$f.json" >> "$OUT/wakeup-$s.p50"
            printf '%-6s %-6s %-8s %-8s %-8s %-8s %-7s %-6s %s\n' "$r" "$s" \
                "$(us "$(jq .p50_ns "$f.json")")" "$(us "$(jq .p95_ns "$f.json")")" \
                "$(us "$(jq .p99_ns "$f.json")")" "$(us "$(jq .max_ns "$f.json")")" "$(busy "$j0" "$(jiffies "$sleeper")")" \
                "$(jq '[.by_deepest_state[] | select(.state == "none") | .samples] | add // 0' "$f.json")" \
                "$(jq -r '[.idle_states[] | "\(.name): \(.entries_per_sample)"] | join(", ")' "$f.json")"
        done
    done
    for s in none 0; do
        printf 'pmqos %-5s pooled: p50 %s  p95 %s  p99 %s  max %s µs; per-run p50 range %s-%s µs\n' "$s" \
            "$(us "$(pct 50 "$OUT/wakeup-$s.all")")" "$(us "$(pct 95 "$OUT/wakeup-$s.all")")" \
            "$(us "$(pct 99 "$OUT/wakeup-$s.all")")" "$(us "$(pct 100 "$OUT/wakeup-$s.all")")" \
            "$(us "$(pct 0 "$OUT/wakeup-$s.p50")")" "$(us "$(pct 100 "$OUT/wakeup-$s.p50")")"
    done
    echo "by the deepest idle state entered in the gap (pooled):"
    for s in none 0; do
        for st in $(cut -d' ' -f1 "$OUT/wakeup-$s.bystate" | sort -u); do
            awk -v st="$st" '$1 == st { print $2 }' "$OUT/wakeup-$s.bystate" > "$OUT/wakeup-$s-$st.ns"
            printf '  pmqos %-5s %-14s n %-5s p50 %-8s p99 %s µs\n' "$s" "$st" "$(wc -l < "$OUT/wakeup-$s-$st.ns")" \
                "$(us "$(pct 50 "$OUT/wakeup-$s-$st.ns")")" "$(us "$(pct 99 "$OUT/wakeup-$s-$st.ns")")"
        done
    done
    # The difference exceeds run-to-run noise when the per-run medians of the
    # two settings do not overlap.
    awk -v a_lo="$(pct 0 "$OUT/wakeup-none.p50")" -v a_hi="$(pct 100 "$OUT/wakeup-none.p50")" \
        -v b_lo="$(pct 0 "$OUT/wakeup-0.p50")" -v b_hi="$(pct 100 "$OUT/wakeup-0.p50")" \
        -v a="$(pct 50 "$OUT/wakeup-none.all")" -v b="$(pct 50 "$OUT/wakeup-0.all")" 'BEGIN {
        apart = (b_hi < a_lo || a_hi < b_lo)
        printf "pooled p50 without / with PM QoS 0: %.2fx; per-run medians %s -> %s\n", a / b,
            apart ? "do not overlap" : "overlap",
            apart ? "the difference exceeds run-to-run noise" : "no difference beyond run-to-run noise" }'
    echo "probe overhead (first run): $(jq -r '.overhead | "clock read \(.clock_read_ns) ns (min \(.clock_read_min_ns)), per sample \(.per_sample_ns) ns, futex wake call \(.wake_call_ns) ns"' "$OUT/wakeup-none-1.json")"
    echo
}

mechanisms_part() {
    local m f
    echo "## sleeper mechanisms: hostknob probe wakeup --samples 200 --gap-ms 5..21 --mechanism M (PM QoS not held)"
    printf '%-8s %-9s %-9s %-9s %s\n' mechanism "p50 µs" "p99 µs" "min µs" "wake call ns"
    for m in futex eventfd pipe; do
        f="$OUT/mechanism-$m.json"
        "$HK" probe wakeup --samples 200 --gap-ms 5..21 --mechanism "$m" --format json > "$f" 2> "$f.err"
        printf '%-8s %-9s %-9s %-9s %s\n' "$m" "$(us "$(jq .p50_ns "$f")")" "$(us "$(jq .p99_ns "$f")")" \
            "$(us "$(jq .min_ns "$f")")" "$(jq .overhead.wake_call_ns "$f")"
    done
    echo
}

rss_part() {
    local f="$OUT/rss-self-burst.json"
    echo "## rss: hostknob probe rss --self-burst --duration $RSS_DURATION --burst-mib $RSS_MIB"
    "$HK" probe rss --self-burst --duration "$RSS_DURATION" --burst-mib "$RSS_MIB" --format json --raw "$OUT/rss.csv" > "$f"
    jq -r 'def mib: if . == null then "n/a" else (. / 1024 | floor | tostring) + " MiB" end;
        def at(p): if p == null then "n/a" else (p.residual_kb | mib) + " (" + (p.residual_pct_of_growth | tostring) + "%)" end;
        .legs[] | "background_thread \(.background_thread_set) (read back \(.background_thread_read_back)):" +
        " anchor \(.decay.anchor.corrected_kb | mib), peak \(.decay.peak.corrected_kb | mib)," +
        " growth \(.decay.growth_kb | mib); residual +10 s \(at(.decay.at_10s)), +30 s \(at(.decay.at_30s)), end \(at(.decay.end))"' "$f"
    echo "restored background_thread to $(jq .background_thread_restored "$f")"
    echo
}

for part in $PARTS; do
    echo "# load before $part: $(cut -d' ' -f1-3 /proc/loadavg); busiest: $(ps -eo pcpu,comm --sort=-pcpu --no-headers | head -3 | awk '{printf "%s %s%%; ", $2, $1}')"
    case $part in
        timer)
            timer_setting "not-held" "" "--laptop"
            timer_setting "held-0" "--pmqos-us 0" "--latency=0"
            ;;
        wakeup) wakeup_part ;;
        mechanisms) mechanisms_part ;;
        rss) rss_part ;;
        *) echo "unknown part $part (timer wakeup mechanisms rss)"; exit 1 ;;
    esac
done
