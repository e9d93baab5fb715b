#!/usr/bin/env bash
# Declares in a built .deb the glibc that a static hostknob needs:
# dpkg-shlibdeps (cargo deb's `$auto`) finds no shared library in a static
# binary and leaves Depends empty, but the binary still loads the host's
# glibc NSS modules at run time (user names beyond /etc/passwd for the
# ledger, host names for `probe rpc --connect`), and those must come from
# the glibc it was built with. A Depends that already names libc6 (a
# dynamically linked build) is left as dpkg-shlibdeps wrote it.
#   dist/deb-depends.sh PACKAGE.deb [GLIBC_VERSION]   # default: this machine's glibc
set -euo pipefail
deb=${1:?usage: dist/deb-depends.sh PACKAGE.deb [GLIBC_VERSION]}
glibc=${2:-$(getconf GNU_LIBC_VERSION 2>/dev/null | sed -n 's/^glibc //p')}
if ! [[ $glibc =~ ^[0-9]+\.[0-9]+ ]]; then
  echo "dist/deb-depends.sh: cannot tell the glibc version this was built with (getconf GNU_LIBC_VERSION: '$glibc'); nothing was changed" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb --raw-extract "$deb" "$work/pkg"
control=$work/pkg/DEBIAN/control
depends=$(sed -n 's/^Depends:[[:space:]]*//p' "$control")
if printf '%s\n' "$depends" | grep -Eq '(^|,)[[:space:]]*libc6([[:space:]:(,]|$)'; then
  echo "$deb: Depends: $depends (names libc6 already)"
  exit 0
fi
depends=${depends:+$depends, }"libc6 (>= $glibc)"
# Depends goes before Description, whose continuation lines end the paragraph.
awk -v line="Depends: $depends" '
  /^Depends:/ { next }
  /^Description:/ && !done { print line; done = 1 }
  { print }
  END { if (!done) print line }' "$control" > "$work/control"
cat "$work/control" > "$control"
dpkg-deb --root-owner-group -Zxz --build "$work/pkg" "$work/new.deb" >/dev/null
mv "$work/new.deb" "$deb"
echo "$deb: Depends: $depends"
