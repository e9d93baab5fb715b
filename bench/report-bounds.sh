#!/usr/bin/env bash
# `report` on inputs a red team plants (issue 20 item 19): a sparse file just
# under and one far over the 64 MiB input cap, a FIFO, and a real audit
# output made large, each timed with its peak RSS (GNU time). The figures go
# to BENCHMARKS.md ("report's input bounds"); the tests only check the errors.
# Usage: bench/report-bounds.sh   (from the repository root)
#        BIN=path/to/hostknob bench/report-bounds.sh
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

run() { # label, then the report arguments
  local label=$1; shift
  local rc=0
  /usr/bin/time -o "$tmp/time" -f '%e %M' timeout 120 "$BIN" report "$@" >/dev/null 2>"$tmp/err" || rc=$?
  read -r secs kb < <(tail -1 "$tmp/time")
  printf '%-44s exit %-3s %6s s  %8s kB peak RSS  %s\n' "$label" "$rc" "$secs" "$kb" \
    "$(head -c 100 "$tmp/err" | tr '\n' ' ')"
}

# Sparse files: no disk used, the size is what a reader sees.
truncate -s 1G "$tmp/sparse-1g.json"
truncate -s 6G "$tmp/sparse-6g.json"
truncate -s $(( (64 << 20) - 1 )) "$tmp/sparse-under-cap.json"
mkfifo "$tmp/fifo.json"
run "sparse 1 GiB .json" "$tmp/sparse-1g.json"
run "sparse 6 GiB .json" "$tmp/sparse-6g.json"
run "sparse 64 MiB - 1 (read, then not JSON)" "$tmp/sparse-under-cap.json"
run "FIFO as an argument" "$tmp/fifo.json"
mkdir "$tmp/dir" && cp --sparse=always "$tmp/sparse-1g.json" "$tmp/dir/a.json"
run "directory holding a sparse 1 GiB .json" "$tmp/dir"

# A real audit output (spr1, the shipped manifest) padded to ~60 MiB with
# unknown fields: the largest input report reads.
mkdir -p "$tmp/spr1" && tar xzf "$corpus/spr1.tar.gz" -C "$tmp/spr1"
"$BIN" --root "$tmp/spr1" --host spr1 --manifest manifest audit --format json \
  >"$tmp/spr1.json" || true
python3 - "$tmp/spr1.json" "$tmp/big.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
pad = "x" * 1024
a["padding"] = [pad] * (60 * 1024)
json.dump(a, open(sys.argv[2], "w"))
PY
run "spr1 audit JSON ($(du -h "$tmp/spr1.json" | cut -f1))" "$tmp/spr1.json"
run "spr1 audit JSON padded to $(du -h "$tmp/big.json" | cut -f1)" "$tmp/big.json"
