#!/usr/bin/env bash
# Builds the packages: man pages and completions from the clap definition
# into target/dist, then cargo deb (and cargo generate-rpm when installed).
#   dist/package.sh          # .deb in target/debian/
#   dist/package.sh --rpm    # also the .rpm in target/generate-rpm/
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
bin=target/release/hostknob
rm -rf target/dist
mkdir -p target/dist/completions
"$bin" man --out target/dist/man
"$bin" completions bash > target/dist/completions/hostknob.bash
"$bin" completions zsh > target/dist/completions/_hostknob
"$bin" completions fish > target/dist/completions/hostknob.fish
cargo deb --locked --no-build
if [ "${1:-}" = "--rpm" ]; then
  cargo generate-rpm
fi
