#!/usr/bin/env bash
# One hash over a host tree: every path, type, mode, link target and file's
# bytes, leaving out hostknob's own state directory (var/lib/hostknob).
set -euo pipefail
cd "$1"
{
  find . -path ./var/lib/hostknob -prune -o -printf '%p %y %m %l\n' | LC_ALL=C sort
  find . -path ./var/lib/hostknob -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
} | grep -v -E '^\./var( |/lib )' | sha256sum | cut -d' ' -f1
