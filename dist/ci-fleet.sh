#!/usr/bin/env bash
# CI for operating a fleet (issue 15), after the cargo tests: Prometheus
# metrics through promtool, units through systemd-analyze, the Ansible
# collection on corpus copies, and the Debian package installed, used and
# removed (RPM too when cargo-generate-rpm installs). Runs as root on a
# fresh Debian machine; each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS
step() { echo "== fleet: $* (at $((SECONDS - t0)) s)"; }

step "tools"
need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v man >/dev/null 2>&1 || need+=(man-db)
[ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
command -v file >/dev/null 2>&1 || need+=(file)
# Debian's package checker, run on the built .deb.
command -v lintian >/dev/null 2>&1 || need+=(lintian)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$HOME/.local/bin:$PATH"
if ! command -v ansible-playbook >/dev/null 2>&1 || ! command -v ansible-lint >/dev/null 2>&1; then
  python3 -m pip --version >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null; }
  # A distribution's own python refuses pip installs (PEP 668) unless told.
  python3 -m pip install -q ansible-core ansible-lint \
    || python3 -m pip install -q --break-system-packages ansible-core ansible-lint
fi
cargo build --release --locked
bin=$(dist/release-dir)/hostknob
# Corpus copies on a tmpfs where there is one (dist/fast-tmp says why).
work=$(mktemp -d -p "$(dist/fast-tmp)")
trap 'rm -rf "$work"' EXIT

corpus=${HOSTKNOB_CORPUS:-}
if [ -z "$corpus" ]; then
  if [ -d tests/corpus/hosts ]; then corpus=tests/corpus/hosts; else corpus=../shared/corpus/hosts; fi
fi
export HOSTKNOB_CORPUS=$(realpath "$corpus")
unpack() { mkdir -p "$work/$1" && tar -xzf "$HOSTKNOB_CORPUS/$1.tar.gz" -C "$work/$1"; }

step "promtool check metrics: a drifting host (adl0) and a clean one (fc-haltpoll-2cpu)"
unpack adl0
unpack fc-haltpoll-2cpu
# Clean: the guest tuned as the catalog's baseline asks (its one finding as
# captured is vm-swappiness-low, 60 where the baseline wants 10).
echo 10 > "$work/fc-haltpoll-2cpu/proc/sys/vm/swappiness"
for h in adl0 fc-haltpoll-2cpu; do
  set +e
  "$bin" --root "$work/$h" --manifest manifest --host "$h" audit --format prometheus > "$work/$h.prom"
  rc=$?
  set -e
  case "$h:$rc" in adl0:2 | fc-haltpoll-2cpu:0) ;; *) echo "$h: audit exited $rc"; exit 1 ;; esac
  promtool check metrics < "$work/$h.prom"
  mkdir -p "$work/textfile-$h"
  "$bin" --root "$work/$h" --manifest manifest --host "$h" audit --textfile "$work/textfile-$h" > /dev/null || [ $? -eq 2 ]
  promtool check metrics < "$work/textfile-$h/hostknob.prom"
  [ "$(ls -A "$work/textfile-$h")" = "hostknob.prom" ] || { echo "--textfile left other files"; exit 1; }
  # The textfile holds the same series as stdout (apart from the audit's time).
  diff <(grep -v audit_timestamp "$work/$h.prom") <(grep -v audit_timestamp "$work/textfile-$h/hostknob.prom")
done
grep -q '^hostknob_knob_status{knob="cpufreq-governor-performance",kind="cpufreq-governor",status="drift"} 1$' "$work/adl0.prom"
grep -q '^hostknob_audit_failing 1$' "$work/adl0.prom"
grep -q '^hostknob_audit_failing 0$' "$work/fc-haltpoll-2cpu.prom"
grep -q '^hostknob_build_info{host="adl0",' "$work/adl0.prom"

step "systemd-analyze verify (ExecStart pointed at the built binary)"
mkdir -p "$work/units"
for u in dist/systemd/*; do
  sed "s#/usr/bin/hostknob#$bin#g" "$u" > "$work/units/$(basename "$u")"
done
(cd "$work/units" && systemd-analyze verify --man=no ./*.service ./*.timer)

step "ansible collection (ansible/tests/run.sh; .ci/run ran ansible-test sanity while hostknob compiled)"
HOSTKNOB_BIN=$bin HOSTKNOB_SANITY=${HOSTKNOB_SANITY:-0} bash ansible/tests/run.sh

step "cargo-deb"
if ! command -v cargo-deb >/dev/null 2>&1; then
  s=$SECONDS
  cargo install cargo-deb --locked -q
  echo "cargo install cargo-deb: $((SECONDS - s)) s"
fi
bash dist/package.sh
# Absolute: the md5sums check below reads it from inside the unpacked tree.
deb=$PWD/$(ls -t target/debian/hostknob_*.deb | head -1)
dpkg-deb -c "$deb"
# The static binary needs no C library of the host (no NSS lookup: the
# suite's packaging test checks its symbols): the package depends on nothing.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
[ -z "$depends" ] || { echo "the .deb depends on '$depends'; a static hostknob needs nothing"; exit 1; }
pkg=$work/pkg
dpkg-deb -x "$deb" "$pkg"
for b in hostknob hostknob-jemalloc; do
  file "$pkg/usr/bin/$b"
  file "$pkg/usr/bin/$b" | grep 'static-pie linked, .*stripped$' >/dev/null || { echo "$b is not a stripped static-pie"; exit 1; }
  if readelf -ld "$pkg/usr/bin/$b" | grep -E 'INTERP|\(NEEDED\)'; then echo "$b needs a loader or a library"; exit 1; fi
  # Stripped: it is the build the suite's packaging test checked for NSS
  # lookups (nm), as its build ID says.
  id() { readelf -n "$1" | sed -n 's/.*Build ID: //p'; }
  [ "$(id "$pkg/usr/bin/$b")" = "$(id "$(dist/release-dir)/$b")" ] || { echo "$b is not the checked build"; exit 1; }
  if nm "$(dist/release-dir)/$b" | awk '$2 ~ /^[TtWi]$/ { sub(/^__new_/, "", $3); sub(/^_+/, "", $3); print $3 }' \
    | grep -xE 'getpw(nam|uid)(_r)?|getgr(nam|gid)_r|getgrouplist|initgroups|getaddrinfo|getnameinfo|gethostby(name2?|addr)(_r)?|nss_next2|nss_lookup_function'; then
    echo "$b makes NSS lookups: it would load the host's libnss modules"; exit 1
  fi
done
# Listed once: `grep -q` quitting early made tar die of SIGPIPE, and pipefail
# turned a found member into "no postinst".
control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -t | sort)
echo $control
for s in postinst prerm postrm md5sums; do grep -qx "./$s" <<<"$control" || { echo "no $s"; exit 1; }; done
# md5sums names every file of the payload, each with its sum.
(cd "$pkg" && dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./md5sums | md5sum -c --quiet)
[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./md5sums | wc -l)" = "$(find "$pkg" -type f | wc -l)" ] || { echo "md5sums does not name every file"; exit 1; }
# lintian: errors fail; the overrides it honours are shipped, each with its reason.
lintian --fail-on error --info "$deb"
dpkg -i "$deb"
timer_link=/etc/systemd/system/timers.target.wants/hostknob-audit.timer
trap 'dpkg --purge hostknob >/dev/null 2>&1 || true; rm -f "$timer_link"; rm -rf "$work"' EXIT
[ "$(command -v hostknob)" = /usr/bin/hostknob ]
hostknob --version | grep -q "^hostknob $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)$"
man -w hostknob-audit | grep -q hostknob-audit.1
man -w hostknob-jemalloc | grep -q hostknob-jemalloc.1
[ "$(zcat /usr/share/doc/hostknob/changelog.Debian.gz | head -1 | sed 's/^hostknob (\(.*\)-1) .*/\1/')" = "$(hostknob --version | cut -d' ' -f2)" ]
MANPAGER=cat MANWIDTH=100 man hostknob-audit 2>/dev/null | grep -- "--textfile" >/dev/null
for u in hostknob-audit.service hostknob-audit.timer hostknob-apply.service; do
  [ -f "/usr/lib/systemd/system/$u" ] || { echo "$u not installed"; exit 1; }
done
systemd-analyze verify /usr/lib/systemd/system/hostknob-audit.service \
  /usr/lib/systemd/system/hostknob-audit.timer /usr/lib/systemd/system/hostknob-apply.service
[ -f /usr/share/hostknob/manifest/cpuidle-no-deep-state.yaml ]
[ -d /etc/hostknob/manifest ]
[ -f /usr/share/doc/hostknob/LICENSE-MIT ] && [ -f /usr/share/doc/hostknob/LICENSE-APACHE ]
hostknob --root "$work/adl0" --manifest /usr/share/hostknob/manifest --host adl0 knobs > /dev/null
completions=$(bash -c '
  source /usr/share/bash-completion/bash_completion
  source /usr/share/bash-completion/completions/hostknob
  complete -p hostknob >&2
  COMP_WORDS=(hostknob au); COMP_CWORD=1; COMP_LINE="hostknob au"; COMP_POINT=${#COMP_LINE}
  _hostknob hostknob au hostknob
  printf "%s\n" "${COMPREPLY[@]}"')
echo "bash completes \"hostknob au\" to: $completions"
[ "$completions" = audit ]
# The install role enables the timer; removing the package masks it and
# keeps its link, so a reinstall finds it enabled; purge removes both
# (deb-systemd-helper in the maintainer scripts).
mask=/etc/systemd/system/hostknob-audit.timer
systemctl enable hostknob-audit.timer
[ -L "$timer_link" ]
dpkg -r hostknob
[ ! -e /usr/bin/hostknob ] || { echo "dpkg -r left the binary"; exit 1; }
[ "$(readlink "$mask")" = /dev/null ] || { echo "dpkg -r did not mask hostknob-audit.timer"; exit 1; }
dpkg -i "$deb"
[ -L "$timer_link" ] && [ ! -e "$mask" ] || { echo "a reinstall lost the timer's enabled state"; exit 1; }
dpkg -r hostknob
dpkg --purge hostknob
[ ! -L "$timer_link" ] && [ ! -L "$mask" ] || { echo "dpkg --purge left the timer's link or mask"; exit 1; }
trap 'rm -rf "$work"' EXIT

step "cargo-generate-rpm"
# Installing it takes minutes of CI's budget: only when asked (HOSTKNOB_CI_RPM=1)
# or already installed on this machine.
if ! command -v cargo-generate-rpm >/dev/null 2>&1 && [ "${HOSTKNOB_CI_RPM:-0}" = 1 ]; then
  s=$SECONDS
  cargo install cargo-generate-rpm --locked -q || echo "cargo-generate-rpm does not install here"
  echo "cargo install cargo-generate-rpm: $((SECONDS - s)) s"
fi
if command -v cargo-generate-rpm >/dev/null 2>&1; then
  bash dist/package.sh --rpm
  # With a target named, the RPM is in target/<triple>/generate-rpm.
  rpm=$(ls -t target/*/generate-rpm/hostknob-*.rpm | head -1)
  echo "built $rpm ($(stat -c %s "$rpm") bytes)"
  if command -v rpm >/dev/null 2>&1; then
    rpm -qp --requires "$rpm"
    if rpm -qp --requires "$rpm" | grep -Ei 'glibc|libc\.so'; then echo "the RPM requires a C library"; exit 1; fi
    rpm -qp --scripts "$rpm" | grep 'systemctl --system disable' >/dev/null || { echo "the RPM's %preun does not disable the units"; exit 1; }
  fi
else
  echo "cargo-generate-rpm not installed: the RPM is not built (HOSTKNOB_CI_RPM=1 installs it)"
fi

step "all passed"
