#!/usr/bin/env bash
# Plays back a report recorded from `hostknob verify` (the test-hooks build on
# a copy of fc-haltpoll-2cpu: idle-off-cpu1, --rounds 5 --seed 42), which
# exited 3 (inconclusive: the copy's idle counters never move). The release
# binary refuses verify under --root, so the module's reading of exit 3 is
# tested on this recording. Refuses any command line but a JSON verify.
set -eu
case " $* " in *" --format=json verify "*) ;; *) echo "replay-verify: not a JSON verify: $*" >&2; exit 1 ;; esac
cat "$(dirname "$0")/verify-exit3-inconclusive.json"
exit 3
