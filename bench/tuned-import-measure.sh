#!/usr/bin/env bash
# The import measure (issue 46 item 6): every tuned profile of /usr/lib/tuned
# imported onto copies of the spr1, genoa0 and VM captures, as
# tests/suite/import_tuned.rs drives it (the profiles copied into the tree,
# the partitioning profiles' variables given in /etc/tuned). Prints, per
# profile and per capture, the option lines imported or used against those
# not imported, the latter grouped by reason class and by reason:
#   principle  refused on principle (scripts, ${f:exec}, initrd building,
#              services, tuned's own plugin order)
#   hardware   a unit condition, a device or a kernel file the host does
#              not have (a scheduler tunable its kernel release lacks)
#   override   a later line or profile sets the same option
#   no-kind    hostknob has no form for it (yet)
#   other      anything else (a value tuned would refuse too, ...)
# Not a test: the figures go in BENCHMARKS.md.
# Usage: bench/tuned-import-measure.sh [HOSTKNOB_BINARY] [CAPTURE...]
#        (from the repository root; default captures spr1 genoa0 fc-haltpoll-2cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then
  HK=$(realpath "$1"); shift
else
  cargo build --release --locked -q
  HK=$(realpath "$(dist/release-dir)/hostknob")
fi
hosts=("$@")
[ ${#hosts[@]} -gt 0 ] || hosts=(spr1 genoa0 fc-haltpoll-2cpu)
tuned=${TUNED_DIR:-/usr/lib/tuned}
[ -f "$tuned/latency-performance/tuned.conf" ] || {
  echo "no tuned profiles in $tuned (install Debian's tuned package, or set TUNED_DIR)" >&2; exit 1; }
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "# binary $HK ($("$HK" --version 2>/dev/null | head -1)); profiles $tuned; $(date -u +%F\ %H:%M) UTC"
for host in "${hosts[@]}"; do
  root=$tmp/$host/root
  mkdir -p "$root"
  tar -xzf "$corpus/$host.tar.gz" -C "$root"
  mkdir -p "$root/usr/lib" "$root/etc/tuned"
  cp -a "$tuned" "$root/usr/lib/tuned"
  # As the suite gives them: CPU 1 isolated on the 2-CPU VM, 4-11 elsewhere.
  iso=4-11; [ "$host" = fc-haltpoll-2cpu ] && iso=1
  for p in cpu-partitioning cpu-partitioning-powersave realtime realtime-virtual-guest realtime-virtual-host; do
    printf 'isolated_cores=%s\nisolate_managed_irq=Y\nmax_power_state=cstate.name:C1|10\n' "$iso" \
      >"$root/etc/tuned/$p-variables.conf"
  done
  for d in "$root"/usr/lib/tuned/*/; do
    p=$(basename "$d")
    [ -f "$d/tuned.conf" ] || continue
    if ! "$HK" --root "$root" --host "$host" import tuned "$p" --out "$tmp/$host/out/$p" \
        >/dev/null 2>"$tmp/$host/$p.err"; then
      echo "$host $p: import failed: $(tail -1 "$tmp/$host/$p.err")" >&2
    fi
  done
done
python3 - "$tmp" "${hosts[@]}" <<'PY'
import collections, os, re, sys
tmp, hosts = sys.argv[1], sys.argv[2:]
# First match wins; the reason texts are src/peers/tuned's.
CLASSES = [
    ("override", r"^overridden"),
    ("principle", r"shell script|never runs|runs a program|\$\{f:exec|initrd|not a knob|plugin order"),
    ("hardware", r"this host's does not|on this host|here:? no |is not loaded here|hardware|host's kernel \(.*\) has no such file"),
    ("no-kind", r"no hostknob kind|no hostknob form|hostknob cannot match|only when it raises"),
]
def klass(reason):
    for name, rx in CLASSES:
        if re.search(rx, reason):
            return name
    return "other"
def rows(path):
    if not os.path.exists(path):
        return []
    out = []
    for l in open(path):
        if l.startswith("| /"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", l)[1:-1]]
            out.append(cells)
    return out
# A reason's shape: values, numbers and line numbers left out.
def shape(r):
    r = re.sub(r"`[^`]*`", "`..`", r)
    r = re.sub(r"\([^()]*tuned\.conf:\d+\)", "(LINE)", r)
    r = re.sub(r"\b\d[\d,.-]*\b", "N", r)
    return r[:150]
for host in hosts:
    outdir = os.path.join(tmp, host, "out")
    total = collections.Counter()
    reasons = collections.Counter()
    print(f"\n## {host}\n")
    print(f"{'profile':32} {'lines':>5} {'imp/used':>8} {'not':>4}  not imported by class")
    for p in sorted(os.listdir(outdir)):
        imp = rows(os.path.join(outdir, p, "IMPORTED.md"))
        nots = rows(os.path.join(outdir, p, "NOT-IMPORTED.md"))
        by = collections.Counter(klass(r[2]) for r in nots)
        for r in nots:
            reasons[(klass(r[2]), r[1], shape(r[2]))] += 1
        total["lines"] += len(imp) + len(nots)
        total["imported or used"] += len(imp)
        total["not"] += len(nots)
        total.update({f"not: {k}": v for k, v in by.items()})
        cls = ", ".join(f"{k} {v}" for k, v in sorted(by.items()))
        print(f"{p:32} {len(imp)+len(nots):5} {len(imp):8} {len(nots):4}  {cls}")
    print(f"\n{host} total: {total['lines']} option lines, {total['imported or used']} imported or used, {total['not']} not imported")
    for k in ("principle", "hardware", "override", "no-kind", "other"):
        print(f"  {k:10} {total['not: ' + k]:4}")
    # What is still without a kind, by the item of issue 46 that brings it.
    items = collections.Counter()
    for (k, opt, r), n in reasons.items():
        if k != "no-kind":
            continue
        if re.search(r"block device|devices=|limited to devices", r):
            items["item 1 (block devices)"] += n
        elif "only when it raises" in r:
            items["item 2 (at-least/at-most)"] += n
        elif "group." in opt:
            items["item 3 (thread policy)"] += n
        elif opt.startswith("`sched_") or opt.startswith("`numa_balancing_"):
            items["item 4 (scheduler tunables)"] += n
        else:
            items[f"other: {opt}"] += n
    print(f"  no-kind by issue 46 item: " + "; ".join(f"{k} {v}" for k, v in sorted(items.items())))
    print(f"\n{host}: not imported, by reason (class, option, reason):")
    for (k, opt, r), n in sorted(reasons.items(), key=lambda x: (x[0][0], -x[1], x[0][1])):
        print(f"  {n:4}  {k:9} {opt:34} {r}")
PY
