#!/usr/bin/env bash
# Manifest loading against hostile and large inputs (issue 20 item 18): time
# and peak RSS of `hostknob knobs` on a manifest holding
#   flow-200k     one knob whose `why:` opens 100,000 `[` (200 KB)
#   dashes-4m     `- ` repeated to just under 4 MiB (the file cap) on one line (2M levels)
#   stairs-4m     a key per line, each indented one more than the last (4 MiB, 2,900 levels)
#   knobs-160k    160,000 valid knobs in 8 files (for other hosts)
# Not a test: the figures go in BENCHMARKS.md. Each run is cut at TIMEOUT.
# Usage: bench/manifest-load.sh [HOSTKNOB_BINARY] [TIMEOUT_S]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then
  HK=$1
else
  cargo build --release --locked -q
  HK=$(dist/release-dir)/hostknob
fi
limit=${2:-120}
corpus="${HOSTKNOB_CORPUS:-tests/corpus/hosts}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/root"
tar -xzf "$corpus/fc-haltpoll-2cpu.tar.gz" -C "$tmp/root"
python3 - "$tmp" <<'PY'
import os, sys
t = sys.argv[1]
knob = "id: k{}\ntitle: t\nkind: thp\ntarget: {{setting: enabled}}\nset: madvise\nhosts: [elsewhere]\npersistence: runtime\nwhy: w\n"
def write(case, name, text):
    os.makedirs(f"{t}/{case}", exist_ok=True)
    with open(f"{t}/{case}/{name}", "w") as f:
        f.write(text)
write("flow-200k", "k.yaml", knob.format(0).replace("why: w\n", "why: " + "[" * 100_000 + "\n"))
cap = (4 << 20) - 4096  # just under the 4 MiB a manifest file may hold
write("dashes-4m", "k.yaml", "- " * (cap // 2) + "x\n")
lines, size, i = [], 0, 0
while size < cap - 8192:
    line = " " * i + f"k{i}:\n"
    lines.append(line); size += len(line); i += 1
    if i > 4000: i = 0  # a stair down and up again
write("stairs-4m", "k.yaml", "".join(lines))
for f in range(8):
    write("knobs-160k", f"f{f}.yaml", "---\n".join(knob.format(f * 20_000 + j) for j in range(20_000)))
PY
printf '%-12s %8s %10s %5s  %s\n' case seconds "peak RSS" exit "first line of stderr"
for case in flow-200k dashes-4m stairs-4m knobs-160k; do
  set +e
  /usr/bin/time -f '%e %M' -o "$tmp/time" timeout "$limit" \
    "$HK" --root "$tmp/root" --manifest "$tmp/$case" knobs >/dev/null 2>"$tmp/err"
  code=$?
  set -e
  read -r secs kb < <(tail -n 1 "$tmp/time")
  [ "$code" = 124 ] && secs=">$limit"
  printf '%-12s %8s %7d MB %5s  %s\n' "$case" "$secs" $((kb / 1024)) "$code" \
    "$(grep -v '^Command\|^hostknob: manifest:' "$tmp/err" | head -n 1 | cut -c1-90)"
done
