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
# Corpus copies on a tmpfs where there is one (dist/fast-tmp says why).
work=$(mktemp -d -p "$(dist/fast-tmp)")
trap 'rm -rf "$work"' EXIT
export ANSIBLE_COLLECTIONS_PATH="$repo/ansible"
export ANSIBLE_NOCOWS=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_STDOUT_CALLBACK=default
# Modules run from stdin, not copied into a temporary directory first.
export ANSIBLE_PIPELINING=1
export ANSIBLE_LOCAL_TEMP="$work/ansible-tmp" ANSIBLE_REMOTE_TEMP="$work/ansible-tmp"
python=$(command -v python3)

# Five hosts that drift (different CPUs and cpufreq drivers) and one that does not.
drifting=(adl0 spr1 genoa0 icx2s0 dell-9360-kbl)
clean=(fc-haltpoll-2cpu)
cp -r manifest "$work/manifest"
rm -rf "$work/manifest/ledger"
# A knob the manifest keeps runtime-only: hostknob_persist leaves it alone.
cp -r "$work/manifest" "$work/persist-manifest"
sed -e 's/^id: cpufreq-governor-performance$/id: governor-runtime/' -e 's/^persistence: .*/persistence: runtime/' \
  manifest/cpufreq-governor-performance.yaml > "$work/persist-manifest/governor-runtime.yaml"
# The reviewed manifest as the install role gets it, with collected history beside it.
cp -r "$work/manifest" "$work/install-manifest"
mkdir -p "$work/install-manifest/ledger"
printf -- '- timestamp: 2026-07-10T09:14:03Z\n  host: controller-host\n' > "$work/install-manifest/ledger/controller-host.yaml"
# Another manifest with a knob named `evil`: what `--manifest=` injection reached.
mkdir "$work/elsewhere"
sed 's/^id: cpufreq-governor-performance$/id: evil/' manifest/cpufreq-governor-performance.yaml \
  > "$work/elsewhere/evil.yaml"
{
  echo "[fleet]"
  for h in "${drifting[@]}" "${clean[@]}"; do
    mkdir -p "$work/hosts/$h" "$work/pristine/$h"
    tar -xzf "$corpus/$h.tar.gz" -C "$work/hosts/$h"
    tar -xzf "$corpus/$h.tar.gz" -C "$work/pristine/$h"
    # The clean host is the guest tuned as the catalog's baseline asks: its one
    # finding as captured (vm-swappiness-low: 60, should be 10) set.
    if [[ " ${clean[*]} " == *" $h "* ]]; then
      for d in hosts pristine; do echo 10 > "$work/$d/$h/proc/sys/vm/swappiness"; done
    fi
    expect=false
    [[ " ${drifting[*]} " == *" $h "* ]] && expect=true
    echo "$h hostknob_root=$work/hosts/$h hostknob_host=$h expect_drift=$expect"
  done
  echo "[guards]"
  mkdir -p "$work/hosts/guard0" "$work/pristine/guard0"
  tar -xzf "$corpus/icx2s0.tar.gz" -C "$work/hosts/guard0"
  tar -xzf "$corpus/icx2s0.tar.gz" -C "$work/pristine/guard0"
  # hostknob's default manifest under the root: a module run without `manifest`
  # reads it, and an injected --manifest= would have replaced it.
  for d in hosts pristine; do
    mkdir -p "$work/$d/guard0/etc/hostknob" && cp -r manifest "$work/$d/guard0/etc/hostknob/manifest"
    rm -rf "$work/$d/guard0/etc/hostknob/manifest/ledger"
  done
  mkdir "$work/injected-textfile"
  echo "guard0 hostknob_root=$work/hosts/guard0 hostknob_host=icx2s0 pristine=$work/pristine/guard0"
  echo "[persist]"
  mkdir -p "$work/hosts/persist0"
  tar -xzf "$corpus/adl0.tar.gz" -C "$work/hosts/persist0"
  echo "persist0 hostknob_root=$work/hosts/persist0 hostknob_host=adl0"
  echo "[install]"
  # A host with a manifest, its history in it, and a state directory already.
  mkdir -p "$work/hosts/install0"
  tar -xzf "$corpus/icx2s0.tar.gz" -C "$work/hosts/install0"
  mkdir -p "$work/hosts/install0/etc/hostknob/manifest/ledger" "$work/hosts/install0/var/lib/hostknob"
  printf 'id: old-knob\n' > "$work/hosts/install0/etc/hostknob/manifest/old-knob.yaml"
  printf -- '- timestamp: 2026-07-10T09:14:03Z\n  host: icx2s0\n' > "$work/hosts/install0/etc/hostknob/manifest/ledger/icx2s0.yaml"
  printf '{}\n' > "$work/hosts/install0/var/lib/hostknob/installed.json"
  echo "install0 hostknob_root=$work/hosts/install0 hostknob_host=icx2s0 reviewed_manifest=$work/install-manifest"
  echo "[persist:vars]"
  echo "persist_manifest=$work/persist-manifest"
  echo "elsewhere=$work/elsewhere"
  echo "[guards:vars]"
  echo "elsewhere=$work/elsewhere"
  echo "textfile_dir=$work/injected-textfile"
  echo "[all:vars]"
  echo "ansible_connection=local"
  echo "ansible_python_interpreter=$python"
  echo "hostknob_binary=$bin"
  echo "hostknob_manifest=$work/manifest"
  echo "tests_dir=$tests"
} > "$work/inventory.ini"

echo "== ansible: audit.yml over ${#drifting[@]}+${#clean[@]} corpus copies"
ansible-playbook -i "$work/inventory.ini" --forks 6 --limit fleet ansible/playbooks/audit.yml \
  -e hostknob_report_dir="$work/audits"
n=$(ls "$work/audits"/*.json | wc -l)
[ "$n" -eq 6 ] || { echo "audit.yml wrote $n files, not 6"; exit 1; }
# Every task of a rerun with no drift that moved reports changed=0 on every host.
recap_unchanged() {
  local moved
  moved=$(grep -E '^[^ ]+ +: ok=' "$1" | grep -v ' changed=0 ' || true)
  [ -z "$moved" ] || { cat "$1"; echo "$2 reported changes on a rerun: $moved"; exit 1; }
  grep -qE '^[^ ]+ +: ok=' "$1" || { cat "$1"; echo "$2: no recap"; exit 1; }
}
ansible-playbook -i "$work/inventory.ini" --forks 6 --limit fleet ansible/playbooks/audit.yml \
  -e hostknob_report_dir="$work/audits" > "$work/audit-again.log" 2>&1
recap_unchanged "$work/audit-again.log" "audit.yml"
echo "audit.yml again: changed=0 on every host"

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

echo "== ansible: hostknob.hostknob.rollout --check --diff on the drifting hosts writes nothing"
for h in "${drifting[@]}"; do "$tests/tree-hash.sh" --all "$work/hosts/$h"; done > "$work/check-before"
"$tests/tree-hash.sh" --all "$work/manifest" >> "$work/check-before"
ansible-playbook -i "$work/inventory.ini" hostknob.hostknob.rollout --check --diff \
  --limit "$(IFS=,; echo "${drifting[*]}")" \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-governor-performance", "cpufreq-epp-performance"]}' \
  > "$work/rollout-check.log" 2>&1 || { cat "$work/rollout-check.log"; echo "rollout --check failed"; exit 1; }
for h in "${drifting[@]}"; do "$tests/tree-hash.sh" --all "$work/hosts/$h"; done > "$work/check-after"
"$tests/tree-hash.sh" --all "$work/manifest" >> "$work/check-after"
cmp -s "$work/check-before" "$work/check-after" || { echo "rollout --check wrote to a host or the manifest"; exit 1; }
# Every drifting host showed its governor diff, and was warned (not failed) by the audit.
n=$(grep -c "scaling_governor: performance" "$work/rollout-check.log" || true)
[ "$n" -ge "${#drifting[@]}" ] || { cat "$work/rollout-check.log"; echo "rollout --check --diff showed $n governor diffs"; exit 1; }
grep -q "failed=0" "$work/rollout-check.log" || { echo "rollout --check failed a host"; exit 1; }
# serial [1, 5, "10%"] by default: one host, then the other four; a variable changes it.
batches=$(grep -c '^PLAY \[Roll out hostknob knobs\]' "$work/rollout-check.log" || true)
[ "$batches" -eq 2 ] || { echo "rollout --check ran in $batches batches, not 2 (serial [1, 5, \"10%\"])"; exit 1; }
ansible-playbook -i "$work/inventory.ini" hostknob.hostknob.rollout --check \
  --limit "$(IFS=,; echo "${drifting[*]}")" \
  -e '{"hostknob_become": false, "hostknob_rollout_serial": 2, "knob_rollout_knobs": ["cpufreq-governor-performance"]}' \
  > "$work/rollout-serial.log" 2>&1 || { cat "$work/rollout-serial.log"; echo "rollout --check with serial 2 failed"; exit 1; }
batches=$(grep -c '^PLAY \[Roll out hostknob knobs\]' "$work/rollout-serial.log" || true)
[ "$batches" -eq 3 ] || { echo "hostknob_rollout_serial=2 ran $batches batches, not 3"; exit 1; }
echo "rollout --check --diff: ${#drifting[@]} hosts, $n governor diffs, nothing written"

echo "== ansible: fleet.yml (audit, check mode, apply, audit, apply again, revert), forks 6"
ansible-playbook -i "$work/inventory.ini" --forks 6 "$tests/fleet.yml"
for h in "${drifting[@]}" "${clean[@]}"; do
  # Byte-identical apart from hostknob's own state directory.
  extra=$(diff -r --no-dereference -x hostknob "$work/pristine/$h" "$work/hosts/$h" \
    | grep -v -E "^Only in $work/hosts/$h(/var(/lib)?)?: (var|lib)$" || true)
  [ -z "$extra" ] || { echo "$h differs after revert:"; echo "$extra"; exit 1; }
  echo "$h: identical after revert ($("$tests/tree-hash.sh" "$work/hosts/$h"))"
done

echo "== ansible: hostknob_ledger_merge on hostile files (hard links, linked directory, torn item, id clash)"
"$python" "$tests/ledger_merge.py"

echo "== ansible: collect-ledgers.yml: every host's ledger into a repository, append-only, by id or text"
repo=$work/repo
mkdir -p "$repo"
cp manifest/*.yaml "$repo/"
collect() {
  ansible-playbook -i "$work/inventory.ini" --limit fleet ansible/playbooks/collect-ledgers.yml \
    -e hostknob_ledger_repo="$repo" > "$work/collect.log" 2>&1 || { cat "$work/collect.log"; echo "collect-ledgers failed"; exit 1; }
}
entries() { grep -c '^- ' "$1" || true; }
# hostknob writes each host's ledger in its state directory, never in the manifest.
ledger_of() { echo "$work/hosts/$1/var/lib/hostknob/ledger.yaml"; }
[ ! -e "$work/manifest/ledger" ] || { echo "apply or revert wrote into the manifest directory"; exit 1; }
collect
n=0
for h in "${drifting[@]}" "${clean[@]}"; do
  f=$(ledger_of "$h")
  [ -f "$f" ] || continue
  cmp -s "$f" "$repo/ledger/$h.yaml" || { echo "collected $h.yaml differs from the host's"; exit 1; }
  n=$((n + 1))
done
[ "$n" -ge 5 ] || { echo "only $n ledgers collected"; exit 1; }
collected=$("$tests/tree-hash.sh" --all "$repo")
collect
recap_unchanged "$work/collect.log" "collect-ledgers.yml"
[ "$("$tests/tree-hash.sh" --all "$repo")" = "$collected" ] || { echo "collecting twice changed the repository"; exit 1; }
grep -q "adl0: 0 new entries, $(entries "$repo/ledger/adl0.yaml") already collected" "$work/collect.log" \
  || { cat "$work/collect.log"; echo "the second collection did not say it had everything"; exit 1; }
# The host writes on; its last entry torn (a crash during an append).
kept=$(cat "$repo/ledger/adl0.yaml")
g=(--root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0)
"$bin" "${g[@]}" apply cpufreq-governor-performance > /dev/null
"$bin" "${g[@]}" revert cpufreq-governor-performance > /dev/null
printf -- '- timestamp: 2026-12-01T00:00:00Z\n  host: adl0\n  knob: cpufreq-gov' >> "$(ledger_of adl0)"
on_host=$(entries "$(ledger_of adl0)")
collect
grep -q "torn entry" "$work/collect.log" || { echo "the torn entry was not said"; exit 1; }
[ "$(head -c ${#kept} "$repo/ledger/adl0.yaml")" = "$kept" ] || { echo "the collected ledger was rewritten, not appended to"; exit 1; }
[ "$(entries "$repo/ledger/adl0.yaml")" -eq $((on_host - 1)) ] || { echo "collected $(entries "$repo/ledger/adl0.yaml") entries of $on_host (one torn)"; exit 1; }
# Distributing the repository with delete (what synchronize delete=yes does)
# loses nothing: the hosts' ledgers are in their state directories.
per_host() { for h in "${drifting[@]}" "${clean[@]}"; do f=$(ledger_of "$h"); if [ -f "$f" ]; then echo "$h $(entries "$f")"; fi; done; }
before=$(per_host)
rm -rf "$work/manifest" && cp -r "$repo" "$work/manifest"
after=$(per_host)
echo "ledger entries per host before the distribution (adl0's torn one included): $(echo $before)"
echo "ledger entries per host after it: $(echo $after)"
[ "$before" = "$after" ] || { echo "the distribution lost history"; exit 1; }
# The host's view merges its own ledger with the collected one, each entry once.
"$bin" "${g[@]}" audit cpufreq-governor-performance > /dev/null 2>&1 || [ $? -eq 2 ]
"$bin" "${g[@]}" apply cpufreq-governor-performance > /dev/null
"$bin" "${g[@]}" revert cpufreq-governor-performance > /dev/null
[ "$("$tests/tree-hash.sh" --all "$work/manifest")" = "$("$tests/tree-hash.sh" --all "$repo")" ] \
  || { echo "apply or revert wrote into the distributed manifest"; exit 1; }

echo "== hostknob takes knob ids after --, and an option there is an unknown id"
g=(--root "$work/hosts/guard0" --manifest "$work/manifest" --host icx2s0)
"$bin" "${g[@]}" apply --dry-run -- cpufreq-governor-performance > /dev/null
"$bin" "${g[@]}" audit -- cpufreq-governor-performance > /dev/null || [ $? -eq 2 ]
before_guard=$("$tests/tree-hash.sh" --all "$work/hosts/guard0")
for args in "apply -- --all" "apply -- cpufreq-governor-performance --state-dir=/x" \
  "audit -- --textfile=$work/injected-textfile" "revert -- --all"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" "${g[@]}" $args > "$work/dashdash.out" 2>&1
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || { cat "$work/dashdash.out"; echo "hostknob $args exited $rc, not 1"; exit 1; }
done
[ "$("$tests/tree-hash.sh" --all "$work/hosts/guard0")" = "$before_guard" ] || { echo "an option after -- changed the host"; exit 1; }
[ -z "$(ls -A "$work/injected-textfile")" ] || { echo "audit -- --textfile= wrote metrics"; exit 1; }

# Three playbooks on three hosts of their own (guard0, persist0, install0):
# run side by side, each a single host that keeps one core busy at most.
echo "== ansible: guards.yml (option injection, revert through hostknob, module_defaults)," \
  "persist.yml (hostknob_persist: check, diff, install, idempotence, ids, remove)," \
  "install.yml (the install role under a root: check mode, files, modes, history kept, timer, idempotence), side by side"
s=$SECONDS
declare -A side
for t in guards persist install; do
  ansible-playbook -i "$work/inventory.ini" "$tests/$t.yml" > "$work/$t.log" 2>&1 &
  side[$t]=$!
done
failed=0
for t in guards persist install; do
  rc=0
  wait "${side[$t]}" || rc=$?
  echo "== ansible: $t.yml (exit $rc)"
  cat "$work/$t.log"
  [ "$rc" -eq 0 ] || failed=1
done
[ "$failed" -eq 0 ] || { echo "a side-by-side playbook failed"; exit 1; }
echo "guards, persist, install: $((SECONDS - s)) s"

echo "== ansible: rollout.yml gate (serial 1) on a host where the knob is already in effect"
# verify measures the machine it runs on, so on a copy of another host it
# refuses (exit 1): the gate must treat that as a failure like a bad verdict,
# and leave alone a knob that this run did not change.
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 apply cpufreq-epp-performance > /dev/null
before_spr1=$("$tests/tree-hash.sh" "$work/hosts/spr1")
before_adl0=$("$tests/tree-hash.sh" "$work/hosts/adl0")
reverted_before=$(cat "$work"/hosts/*/var/lib/hostknob/ledger.yaml 2>/dev/null | grep -c "action: reverted" || true)
set +e
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit adl0,spr1 \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-epp-performance"],
       "knob_rollout_verify_rounds": 5,
       "knob_rollout_verify_args": ["--settle", "10ms", "--", "--samples", "20", "--gap-us", "200..600"]}' > "$work/rollout.log" 2>&1
rc=$?
set -e
cat "$work/rollout.log"
[ "$rc" -ne 0 ] || { echo "rollout passed a gate whose verify failed"; exit 1; }
gate=$(grep "failed the gate" "$work/rollout.log" | grep -v '^ *"msg"' | head -1 || true)
[ -n "$gate" ] || gate=$(grep "failed the gate" "$work/rollout.log" | head -1 || true)
echo "gate message: $gate"
[ -n "$gate" ] || { echo "rollout did not fail at the gate"; exit 1; }
case "$gate" in
  *"verify measures this machine, not the tree at --root"*) ;;
  *) echo "the gate's message does not give verify's refusal as the cause"; exit 1 ;;
esac
case "$gate" in *"One or more items failed"*) echo "the gate's message hides the cause"; exit 1 ;; esac
case "$gate" in *"nothing was reverted"*) ;; *) echo "the gate's message does not say nothing was reverted"; exit 1 ;; esac
grep -q "spr1" "$work/rollout.log" && { echo "rollout went on to the second batch"; exit 1; }
[ "$("$tests/tree-hash.sh" "$work/hosts/adl0")" = "$before_adl0" ] || { echo "adl0 changed by a gate that failed before the apply"; exit 1; }
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 audit cpufreq-epp-performance >/dev/null \
  || { echo "adl0: the knob in effect before the rollout was undone"; exit 1; }
reverted_after=$(cat "$work"/hosts/*/var/lib/hostknob/ledger.yaml 2>/dev/null | grep -c "action: reverted" || true)
[ "$reverted_after" = "$reverted_before" ] || { echo "the failed gate recorded a revert"; exit 1; }
[ "$("$tests/tree-hash.sh" "$work/hosts/spr1")" = "$before_spr1" ] || { echo "spr1 changed"; exit 1; }
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 revert cpufreq-epp-performance > /dev/null

echo "== ansible: a gate failing after the apply reverts only what this run changed"
# The post-apply audit fails for a real reason: a deep idle state disabled
# under the haltpoll cpuidle governor is not honoured by the kernel. thp-madvise
# is in effect there already: this run does not change it, so it stays.
cp -r "$work/manifest" "$work/gate-manifest"
rm -rf "$work/gate-manifest/ledger"
sed -e 's/^id: cpuidle-no-deep-state$/id: haltpoll-no-deep-state/' \
  -e 's/min_exit_latency_us: 300/min_exit_latency_us: 1/' -e 's/^hosts: .*/hosts: "*"/' \
  manifest/cpuidle-no-deep-state.yaml > "$work/gate-manifest/haltpoll-no-deep-state.yaml"
h=fc-haltpoll-2cpu
before_h=$("$tests/tree-hash.sh" "$work/hosts/$h")
set +e
ansible-playbook -i "$work/inventory.ini" hostknob.hostknob.rollout --limit "$h" \
  -e "{\"hostknob_become\": false, \"hostknob_manifest\": \"$work/gate-manifest\", \"knob_rollout_verify\": false,
       \"knob_rollout_knobs\": [\"thp-madvise\", \"haltpoll-no-deep-state\"]}" > "$work/rollout-after.log" 2>&1
rc=$?
set -e
cat "$work/rollout-after.log"
[ "$rc" -ne 0 ] || { echo "rollout passed a post-apply audit that fails"; exit 1; }
gate=$(grep "failed the gate" "$work/rollout-after.log" | head -1 || true)
case "$gate" in *"not-honoured"*"reverted haltpoll-no-deep-state"*) ;;
  *) echo "the gate's message does not give the audit's cause and what was reverted: $gate"; exit 1 ;; esac
case "$gate" in *"thp-madvise"*"reverted"* | *"reverted"*"thp-madvise"*) echo "reverted a knob this run did not change"; exit 1 ;; esac
[ "$("$tests/tree-hash.sh" "$work/hosts/$h")" = "$before_h" ] || { echo "$h not as found after the revert"; exit 1; }

echo "== ansible: rollout.yml with a passing gate (verify skipped: its verdict on a copy is noise)"
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit adl0,spr1 \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-epp-performance"], "knob_rollout_verify": false}'
for h in adl0 spr1; do
  "$bin" --root "$work/hosts/$h" --manifest "$work/manifest" --host "$h" audit cpufreq-epp-performance >/dev/null \
    || { echo "$h: knob not in effect after the rollout"; exit 1; }
done

echo "== ansible: rollout.yml where verify passes (a recorded improved verdict), then apply"
# verify measures the machine it runs on, so on a copy the verdict is a
# recording (files/verify-exit0-improved.json, checked against the verify
# schema by the suite); every other command is the real binary.
cat > "$work/verify-passes.sh" <<WRAPPER
#!/usr/bin/env bash
case " \$* " in *" --format=json verify "*) cat "$tests/files/verify-exit0-improved.json"; exit 0 ;; esac
exec "$bin" "\$@"
WRAPPER
chmod +x "$work/verify-passes.sh"
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit genoa0 \
  -e "{\"hostknob_become\": false, \"hostknob_binary\": \"$work/verify-passes.sh\",
       \"knob_rollout_knobs\": [\"cpufreq-governor-performance\"]}" > "$work/rollout-verified.log" 2>&1 \
  || { cat "$work/rollout-verified.log"; echo "rollout with a passing verify failed"; exit 1; }
grep -q "ok: \[genoa0\] => (item=cpufreq-governor-performance)" "$work/rollout-verified.log" \
  || { cat "$work/rollout-verified.log"; echo "the verify gate did not run and pass"; exit 1; }
"$bin" --root "$work/hosts/genoa0" --manifest "$work/manifest" --host genoa0 audit cpufreq-governor-performance >/dev/null \
  || { echo "genoa0: knob not in effect after a verify that passed"; exit 1; }

echo "== ansible: rollout.yml persists: after it, audit says ok (not unpersisted) on six hosts"
rolled=("${drifting[@]}" persist0)
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit "$(IFS=,; echo "${rolled[*]}")" \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-governor-performance", "cpufreq-epp-performance"],
       "knob_rollout_verify": false}' > "$work/rollout-persist.log" 2>&1 \
  || { cat "$work/rollout-persist.log"; echo "rollout with persistence failed"; exit 1; }
for h in "${rolled[@]}"; do
  root=$work/hosts/$h name=$h
  [ "$h" = persist0 ] && name=adl0
  set +e
  "$bin" --root "$root" --manifest "$work/manifest" --host "$name" audit --format json \
    -- cpufreq-governor-performance cpufreq-epp-performance > "$work/persisted-$h.json"
  set -e
  "$python" - "$work/persisted-$h.json" "$h" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
st = {k["id"]: k["status"] for k in a["knobs"]}
assert st["cpufreq-governor-performance"] == "ok", (sys.argv[2], st)
# EPP: ok where the driver has it (pinned by the performance governor or set), never unpersisted.
assert st["cpufreq-epp-performance"] in ("ok", "not-applicable"), (sys.argv[2], st)
print("%s: after the rollout %s" % (sys.argv[2], st))
PY
  ls "$root"/etc/tmpfiles.d/hostknob-*.conf > /dev/null
done
# The runtime-only opt-out: knob_rollout_persist false leaves the knob unpersisted.
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 persist --remove -- cpufreq-governor-performance > /dev/null
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 revert cpufreq-governor-performance > /dev/null
ansible-playbook -i "$work/inventory.ini" ansible/playbooks/rollout.yml --limit adl0 \
  -e '{"hostknob_become": false, "knob_rollout_knobs": ["cpufreq-governor-performance"],
       "knob_rollout_verify": false, "knob_rollout_persist": false}' > "$work/rollout-nopersist.log" 2>&1 \
  || { cat "$work/rollout-nopersist.log"; echo "rollout without persistence failed"; exit 1; }
"$bin" --root "$work/hosts/adl0" --manifest "$work/manifest" --host adl0 audit --format json \
  -- cpufreq-governor-performance | grep -q '"status": "unpersisted"' \
  || { echo "knob_rollout_persist: false still persisted"; exit 1; }

echo "== ansible: read-only audit of this machine"
cp -r manifest "$work/live-manifest"
rm -rf "$work/live-manifest/ledger"
printf '[live]\nthis-machine ansible_connection=local ansible_python_interpreter=%s hostknob_binary=%s hostknob_manifest=%s\n' \
  "$python" "$bin" "$work/live-manifest" > "$work/live.ini"
ansible-playbook -i "$work/live.ini" ansible/playbooks/audit.yml -e hostknob_report_dir="$work/live-audit"
"$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["schema"]==1; print("live:", d["host"], d["summary"])' \
  "$work/live-audit/this-machine.json"
[ ! -e "$work/live-manifest/ledger" ] || { echo "the live audit wrote a ledger"; exit 1; }

echo "== ansible-galaxy collection build: licences and playbooks in the artifact"
coll=ansible/ansible_collections/hostknob/hostknob
for f in LICENSE-MIT LICENSE-APACHE; do
  cmp -s "$f" "$coll/$f" || { echo "$coll/$f differs from the repository's $f"; exit 1; }
done
# The install role's copies of the units (for a bare binary) are dist/systemd's.
for u in dist/systemd/*; do
  cmp -s "$u" "$coll/roles/install/files/$(basename "$u")" \
    || { echo "$coll/roles/install/files/$(basename "$u") differs from $u: copy it"; exit 1; }
done
ansible-galaxy collection build "$coll" --output-path "$work/dist" > /dev/null
tarball=$(ls "$work"/dist/hostknob-hostknob-*.tar.gz)
tar -tzf "$tarball" > "$work/artifact.txt"
for f in LICENSE-MIT LICENSE-APACHE playbooks/audit.yml playbooks/rollout.yml meta/runtime.yml \
  plugins/module_utils/revert_plan.py plugins/modules/hostknob_persist.py roles/install/tasks/main.yml \
  roles/install/files/hostknob-audit.timer playbooks/collect_ledgers.yml plugins/modules/hostknob_ledger_merge.py; do
  grep -qx "$f" "$work/artifact.txt" || { echo "$f is not in $tarball"; exit 1; }
done
grep -q '^tests/output' "$work/artifact.txt" && { echo "tests/output is in the artifact"; exit 1; }
echo "$(basename "$tarball"): $(wc -l < "$work/artifact.txt") entries, licences and playbooks in"

# ansible-lint and ansible-test sanity are ansible/tests/sanity.sh: .ci/run
# starts it while hostknob compiles (minutes, much of it waiting on pip).
if [ "${HOSTKNOB_SANITY:-1}" = 1 ]; then
  bash "$tests/sanity.sh"
fi
echo "== ansible: all passed ($SECONDS s)"
