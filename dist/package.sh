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
# md5sums in the control archive (debsums and `dpkg --verify` read it;
# lintian's no-md5sums-control-file): added where cargo-deb wrote none.
deb=$(ls -t target/debian/hostknob_*.deb | head -1)
if ! dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -qx './md5sums'; then
  tree=$(mktemp -d)
  dpkg-deb -R "$deb" "$tree"
  (cd "$tree" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$tree/DEBIAN/md5sums"
  chmod 0644 "$tree/DEBIAN/md5sums"
  dpkg-deb --root-owner-group -Zxz -b "$tree" "$deb" >/dev/null
  rm -rf "$tree"
fi
if [ "${1:-}" = "--rpm" ]; then
  cargo generate-rpm --target "$triple"
fi
