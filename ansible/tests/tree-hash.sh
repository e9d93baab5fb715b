#!/usr/bin/env bash
# One hash over a host tree: every path, type, mode, link target and file's
# bytes, leaving out hostknob's own state directory (var/lib/hostknob);
# with --all, leaving out nothing.
set -euo pipefail
all=false
if [ "${1:-}" = --all ]; then all=true; shift; fi
cd "$1"
if $all; then
  {
    find . -printf '%p %y %m %l\n' | LC_ALL=C sort
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
  } | sha256sum | cut -d' ' -f1
  exit 0
fi
{
  find . -path ./var/lib/hostknob -prune -o -printf '%p %y %m %l\n' | LC_ALL=C sort
  find . -path ./var/lib/hostknob -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
} | grep -v -E '^\./var( |/lib )' | sha256sum | cut -d' ' -f1
