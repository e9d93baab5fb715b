#!/usr/bin/env bash
# Every command on every captured host (read commands, a dry-run apply, and an
# apply + revert on a copy): the slowest wall time and the largest peak RSS of
# each command over the corpus. Targets: < 10 s and < 100 MB everywhere.
# The no-panic part is the test hostile::every_command_on_every_corpus_tree_is_bounded.
# Usage: bench/all-commands.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
bin=$(dist/release-dir)/hostknob
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
man=$PWD/manifest
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '%s\n' 'id: idle' 'title: idle' 'why: w' 'hosts: "*"' 'persistence: runtime' \
  'kind: cpuidle-state' 'target:' '  states: {min_exit_latency_us: 0}' 'set: disabled' > "$tmp/k.yaml"
mkdir "$tmp/m" && mv "$tmp/k.yaml" "$tmp/m/"
: > "$tmp/results"
for tb in "$corpus"/*.tar.gz; do
  h=$(basename "$tb" .tar.gz)
  mkdir -p "$tmp/$h" && tar xzf "$tb" -C "$tmp/$h"
  for cmd in "inventory" "knobs" "audit" "doc --out /dev/null" "apply --all --dry-run" \
             "@apply idle" "@revert --all"; do
    m=$man; c=$cmd
    [[ $c == @* ]] && { m=$tmp/m; c=${c#@}; }
    # The manifest by variable: inventory takes no --manifest.
    HOSTKNOB_MANIFEST=$m /usr/bin/time -f "%e %M" -o "$tmp/t" "$bin" --root "$tmp/$h" --host "$h" $c \
      >/dev/null 2>"$tmp/err" || true
    grep -q panicked "$tmp/err" && echo "PANIC: $h $c" >&2
    read -r secs kb < <(tail -1 "$tmp/t")
    echo "$c|$h|$secs|$kb" >> "$tmp/results"
  done
  rm -rf "${tmp:?}/$h"
done
python3 - "$tmp/results" <<'PY'
import sys, collections
worst = collections.OrderedDict()
for line in open(sys.argv[1]):
    cmd, host, secs, kb = line.strip().split("|")
    w = worst.setdefault(cmd, [0.0, "", 0, ""])
    if float(secs) >= w[0]: w[0], w[1] = float(secs), host
    if int(kb) >= w[2]: w[2], w[3] = int(kb), host
print(f"{'command':<24} {'slowest':>9} {'(host)':<14} {'peak RSS':>10} {'(host)':<14}")
for cmd, (s, sh, kb, kh) in worst.items():
    print(f"{cmd:<24} {s:>8.2f}s {sh:<14} {kb/1024:>8.1f}MB {kh:<14}")
PY
