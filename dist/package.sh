#!/usr/bin/env bash
# Builds the packages: man pages and completions from the clap definition
# into target/dist, then cargo deb (and cargo generate-rpm when installed).
#   dist/package.sh          # .deb in target/debian/
#   dist/package.sh --rpm    # also the .rpm in target/<triple>/generate-rpm/
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
bin=$(dist/release-dir)/hostknob
rm -rf target/dist
mkdir -p target/dist/completions
"$bin" man --out target/dist/man
"$bin" completions bash > target/dist/completions/hostknob.bash
"$bin" completions zsh > target/dist/completions/_hostknob
"$bin" completions fish > target/dist/completions/hostknob.fish
# Binaries are in target/<triple>/release (.cargo/config.toml): both tools
# read the assets' target/release/ paths from there when given the triple.
triple=$(basename "$(dirname "$(dist/release-dir)")")
cargo deb --locked --no-build --target "$triple"
if [ "${1:-}" = "--rpm" ]; then
  cargo generate-rpm --target "$triple"
fi
