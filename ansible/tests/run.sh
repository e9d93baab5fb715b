#!/usr/bin/env bash
# The Ansible collection's test, on copies of corpus hosts (connection: local,
# one --root each) and a read-only audit of this machine. Needs ansible-core
# and ansible-lint (pip), the built binary, and the corpus tarballs.
#   HOSTKNOB_BIN      the binary (default: hostknob in dist/release-dir)
#   HOSTKNOB_CORPUS   the corpus tarballs (default tests/corpus/hosts, else ../shared/corpus/hosts)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
bin=$(realpath "${HOSTKNOB_BIN:-$(dist/release-dir)/hostknob}")
corpus=${HOSTKNOB_CORPUS:-}
if [ -z "$corpus" ]; then
  if [ -d tests/corpus/hosts ]; then corpus=tests/corpus/hosts; else corpus=../shared/corpus/hosts; fi
fi
corpus=$(realpath "$corpus")
tests="$repo/ansible/tests"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ANSIBLE_COLLECTIONS_PATH="$repo/ansible"
export ANSIBLE_NOCOWS=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_STDOUT_CALLBACK=default
export ANSIBLE_LOCAL_TEMP="$work/ansible-tmp" ANSIBLE_REMOTE_TEMP="$work/ansible-tmp"
python=$(command -v python3)

# Five hosts that drift (different CPUs and cpufreq drivers) and one that does not.
drifting=(adl0 spr1 genoa0 icx2s0 dell-9360-kbl)
clean=(fc-haltpoll-2cpu)
cp -r manifest "$work/manifest"
rm -rf "$work/manifest/ledger"
{
  echo "[fleet]"
  for h in "${drifting[@]}" "${clean[@]}"; do
    mkdir -p "$work/hosts/$h" "$work/pristine/$h"
    tar -xzf "$corpus/$h.tar.gz" -C "$work/hosts/$h"
    tar -xzf "$corpus/$h.tar.gz" -C "$work/pristine/$h"
    expect=false
    [[ " ${drifting[*]} " == *" $h "* ]] && expect=true
    echo "$h hostknob_root=$work/hosts/$h hostknob_host=$h expect_drift=$expect"
  done
  echo "[fleet:vars]"
  echo "ansible_connection=local"
  echo "ansible_python_interpreter=$python"
  echo "hostknob_binary=$bin"
  echo "hostknob_manifest=$work/manifest"
  echo "tests_dir=$tests"
} > "$work/inventory.ini"

echo "== ansible: audit.yml over ${#drifting[@]}+${#clean[@]} corpus copies"
ansible-playbook -i "$work/inventory.ini" --forks 6 ansible/playbooks/audit.yml \
  -e hostknob_report_dir="$work/audits"
n=$(ls "$work/audits"/*.json | wc -l)
[ "$n" -eq 6 ] || { echo "audit.yml wrote $n files, not 6"; exit 1; }

echo "== hostknob report over the fetched audits"
set +e
"$bin" report "$work/audits" > "$work/report.txt"
rc=$?
set -e
cat "$work/report.txt"
[ "$rc" -eq 2 ] || { echo "report exited $rc on drifting hosts, not 2"; exit 1; }
grep -q "drifting: adl0, dell-9360-kbl, genoa0, icx2s0, spr1$" "$work/report.txt" \
  || { echo "report does not name the drifting hosts"; exit 1; }
# adl0 and dell-9360-kbl drift alike (intel_pstate, powersave, balance_performance).
grep -E "│ *cpufreq-governor-performance *│ drift .*adl0, dell-9360-kbl" "$work/report.txt" >/dev/null \
  || { echo "report does not group adl0 with dell-9360-kbl"; exit 1; }
"$bin" report --format json "$work/audits" > "$work/report.json" || true
"$python" - "$work/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == 1, r["schema"]
gov = next(k for k in r["knobs"] if k["id"] == "cpufreq-governor-performance")
assert gov["drifting"] == ["adl0", "dell-9360-kbl", "genoa0", "icx2s0", "spr1"], gov["drifting"]
thp = next(k for k in r["knobs"] if k["id"] == "thp-madvise")
assert thp["unpersisted"] == ["fc-haltpoll-2cpu"], thp["unpersisted"]
PY

echo "== ansible: fleet.yml (audit, check mode, apply, audit, apply again, revert), forks 6"
ansible-playbook -i "$work/inventory.ini" --forks 6 "$tests/fleet.yml"
for h in "${drifting[@]}" "${clean[@]}"; do
  # Byte-identical apart from hostknob's own state directory.
  extra=$(diff -r --no-dereference -x hostknob "$work/pristine/$h" "$work/hosts/$h" \
    | grep -v -E "^Only in $work/hosts/$h(/var(/lib)?)?: (var|lib)$" || true)
  [ -z "$extra" ] || { echo "$h differs after revert:"; echo "$extra"; exit 1; }
  echo "$h: identical after revert ($("$tests/tree-hash.sh" "$work/hosts/$h"))"
done

echo "== ansible: rollout.yml gate (serial 1): a failing verify stops the rollout and reverts"
# verify measures the machine it runs on, so on a copy of another host it
# refuses (exit 1): the gate must treat that as a failure like a bad verdict.
before_spr1=$("$tests/tree-hash.sh" "$work/hosts/spr1")
before_adl0=$("$tests/tree-hash.sh" "$work/hosts/adl0")
set +e
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit adl0,spr1 \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-epp-performance"],
       "knob_rollout_verify_rounds": 5,
       "knob_rollout_verify_args": ["--settle", "10ms", "--", "--samples", "20", "--gap-us", "200..600"]}' > "$work/rollout.log" 2>&1
rc=$?
set -e
cat "$work/rollout.log"
[ "$rc" -ne 0 ] || { echo "rollout passed a gate whose verify failed"; exit 1; }
grep -q "failed the gate" "$work/rollout.log" || { echo "rollout did not fail at the gate"; exit 1; }
grep -q "verify measures this machine, not the tree at --root" "$work/rollout.log" \
  || { echo "the gate failed for another reason than verify's refusal of a copy"; exit 1; }
grep -q "spr1" "$work/rollout.log" && { echo "rollout went on to the second batch"; exit 1; }
[ "$("$tests/tree-hash.sh" "$work/hosts/adl0")" = "$before_adl0" ] || { echo "adl0 not reverted after the gate"; exit 1; }
[ "$("$tests/tree-hash.sh" "$work/hosts/spr1")" = "$before_spr1" ] || { echo "spr1 changed"; exit 1; }

echo "== ansible: rollout.yml with a passing gate (verify skipped: its verdict on a copy is noise)"
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit adl0,spr1 \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-epp-performance"], "knob_rollout_verify": false}'
for h in adl0 spr1; do
  "$bin" --root "$work/hosts/$h" --manifest "$work/manifest" --host "$h" audit cpufreq-epp-performance >/dev/null \
    || { echo "$h: knob not in effect after the rollout"; exit 1; }
done

echo "== ansible: read-only audit of this machine"
cp -r manifest "$work/live-manifest"
rm -rf "$work/live-manifest/ledger"
printf '[live]\nthis-machine ansible_connection=local ansible_python_interpreter=%s hostknob_binary=%s hostknob_manifest=%s\n' \
  "$python" "$bin" "$work/live-manifest" > "$work/live.ini"
ansible-playbook -i "$work/live.ini" ansible/playbooks/audit.yml -e hostknob_report_dir="$work/live-audit"
"$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema"]==1; print("live:", d["host"], d["summary"])' \
  "$work/live-audit/this-machine.json"
[ ! -e "$work/live-manifest/ledger" ] || { echo "the live audit wrote a ledger"; exit 1; }

echo "== ansible-lint on the collection and playbooks"
(cd ansible && ansible-lint --offline -q ansible_collections/hostknob/hostknob playbooks)
echo "== ansible: all passed"
