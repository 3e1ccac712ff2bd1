#!/usr/bin/env bash
# Builds the Debian package: release binaries (the `sysward` console from
# console/, the root `sysward-broker` and the helpers), man pages and shell
# completions generated from the console's CLI definition (`sysward
# generate`), then cargo-deb (the package metadata lives in broker/Cargo.toml). Prints the path of the .deb on the last line.
#   bash packaging/build-deb.sh            (installs cargo-deb if missing)
# Honours CARGO_TARGET_DIR.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
target=${CARGO_TARGET_DIR:-$repo/target}
export PATH="$HOME/.cargo/bin:$PATH"

if ! command -v cargo >/dev/null 2>&1; then
  echo "build-deb.sh: cargo is missing; install Rust with rustup (https://rustup.rs)" >&2
  exit 1
fi
if ! cargo deb --version >/dev/null 2>&1; then
  echo "== installing cargo-deb (cargo install --locked cargo-deb, about a minute)" >&2
  cargo install --locked --quiet cargo-deb
fi

echo "== release build" >&2
cargo build --release --quiet --bins -p sysward -p sysward-console -p sysward-agent -p sysward-exec -p sysward-gateway -p sysward-net -p sysward-classify -p sysward-eval
rel="$target/release"

echo "== man pages and completions" >&2
rm -rf "$rel/man" "$rel/completions"
"$rel/sysward" generate man "$rel/man"
cp packaging/man/*.5 "$rel/man/"
gzip -9n -f "$rel"/man/*.8 "$rel"/man/*.5     # Debian policy: compressed man pages
"$rel/sysward" generate completions "$rel/completions"

echo "== cargo deb" >&2
deb=$(cargo deb -p sysward --no-build 2>/dev/null | tail -n 1)
if [ ! -f "$deb" ]; then
  cargo deb -p sysward --no-build >&2
  exit 1
fi
echo "$deb"
