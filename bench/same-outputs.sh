#!/usr/bin/env bash
# Whether two builds print the same thing on the corpus: inventory, knobs,
# audit (JSON and table) and doc on every capture with the shipped catalog;
# audit of the VM capture beside an active tuned profile; and `import tuned`
# of every Debian profile (/usr/lib/tuned) onto spr1. For a change that must
# change no output (issue 45): run it with the old and the new binary.
# Usage: bench/same-outputs.sh OLD_BIN NEW_BIN   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2
corpus=${HOSTKNOB_CORPUS:-tests/corpus/hosts}
man=$PWD/manifest
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run_all() { # BIN OUTDIR
  local bin=$1 out=$2 h tb p
  mkdir -p "$out"
  for tb in "$corpus"/*.tar.gz; do
    h=$(basename "$tb" .tar.gz)
    for c in "inventory" "inventory --format json" "knobs" "audit" "audit --format json"; do
      HOSTKNOB_MANIFEST=$man "$bin" --root "$tmp/trees/$h" --host "$h" $c \
        >"$out/$h.${c// /_}" 2>&1 || echo "exit $?" >>"$out/$h.${c// /_}"
    done
    HOSTKNOB_MANIFEST=$man "$bin" --root "$tmp/trees/$h" --host "$h" doc --out "$out/$h.doc" \
      >/dev/null 2>&1 || echo "exit $?" >>"$out/$h.doc.exit"
  done
  HOSTKNOB_MANIFEST=$man "$bin" --root "$tmp/trees/tuned-vm" --host vm audit --format json \
    >"$out/tuned-vm.audit" 2>&1 || echo "exit $?" >>"$out/tuned-vm.audit"
  for p in /usr/lib/tuned/*/tuned.conf; do
    p=$(basename "$(dirname "$p")")
    "$bin" --root "$tmp/trees/spr1" --host spr1 import tuned "$p" --out "$out/import-$p" \
      >"$out/import-$p.out" 2>&1 || echo "exit $?" >>"$out/import-$p.out"
  done
}
mkdir -p "$tmp/trees"
for tb in "$corpus"/*.tar.gz; do
  h=$(basename "$tb" .tar.gz)
  mkdir -p "$tmp/trees/$h" && tar xzf "$tb" -C "$tmp/trees/$h"
done
vm=$(ls "$corpus" | grep -m1 '^fc-.*virtio.*\.tar\.gz$' || ls "$corpus" | grep -m1 '^fc-.*\.tar\.gz$')
mkdir -p "$tmp/trees/tuned-vm" && tar xzf "$corpus/$vm" -C "$tmp/trees/tuned-vm"
if [ -d /usr/lib/tuned ]; then
  mkdir -p "$tmp/trees/tuned-vm/usr/lib" "$tmp/trees/tuned-vm/etc/tuned" \
    "$tmp/trees/tuned-vm/etc/systemd/system/multi-user.target.wants"
  cp -r /usr/lib/tuned "$tmp/trees/tuned-vm/usr/lib/"
  echo latency-performance >"$tmp/trees/tuned-vm/etc/tuned/active_profile"
  ln -s /usr/lib/systemd/system/tuned.service "$tmp/trees/tuned-vm/etc/systemd/system/multi-user.target.wants/tuned.service"
fi
run_all "$old" "$tmp/old"
run_all "$new" "$tmp/new"
# The import notes carry today's date either way; nothing else may differ.
n=$(find "$tmp/old" -type f | wc -l)
if diff -r "$tmp/old" "$tmp/new" >"$tmp/diff"; then
  echo "same: $n outputs byte-identical ($(ls "$corpus"/*.tar.gz | wc -l) captures, $(ls -d /usr/lib/tuned/*/ 2>/dev/null | wc -l) tuned profiles)"
else
  head -50 "$tmp/diff"; echo "DIFFERENT ($n outputs)"; exit 1
fi
