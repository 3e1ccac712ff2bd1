#!/usr/bin/env bash
# The whole test suite, as CI runs it: `sudo bash scripts/test.sh`.
# Installs what the tests need, checks formatting and lints, builds every
# binary, then runs every test — the root-only ones included (they create the
# sysward users and group, run the real broker/agent/gateway/executor tree and
# attack the kernel confinement for real).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: run as root (sudo bash scripts/test.sh): the end-to-end tests create users and run the real broker" >&2
  exit 1
fi

echo "== system packages"
export DEBIAN_FRONTEND=noninteractive
if command -v apt-get >/dev/null 2>&1; then
  apt-get update -q
  # iproute2: ip; passwd: useradd/groupadd; util-linux: setpriv; procps: ps/pkill;
  # python3 + curl + iputils-ping + netcat: programs the attack tests try;
  # nftables + attr: programs the attack tests try (nft add table, setfattr);
  # bubblewrap: the executor benchmark's comparison; strace: debugging aid;
  # lintian: the package test checks the .deb.
  # debootstrap + systemd-container: the throwaway Debian hosts (nspawn) the
  # systemd tests boot; openssh-client + python3-venv: the Ansible controller
  # of the fleet test (ssh, ssh-keygen; the venv of scripts/fleet/setup.sh).
  apt-get install -y -q --no-install-recommends \
    openssh-client python3-venv \
    iproute2 passwd util-linux procps python3 curl iputils-ping netcat-openbsd \
    nftables attr e2fsprogs \
    bubblewrap ca-certificates coreutils findutils gawk tmux strace \
    debootstrap systemd-container lintian >/dev/null
fi

export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== build"
cargo build --workspace --bins
echo "== real model server (llama-cpp-python + SmolLM2, built once and cached)"
bash scripts/real-model/setup.sh
# The real-server tests fail instead of skipping when the server is missing.
export SYSWARD_REQUIRE_REAL_MODEL=1
echo "== Debian host base (debootstrap, built once and cached)"
bash scripts/hosts/base.sh
echo "== Ansible controller for the fleet test (pinned ansible-core + ansible-lint venv, cached)"
bash scripts/fleet/setup.sh >/dev/null
# The host tests (debian_hosts, systemd_service, fleet) fail instead of skipping when
# the base or nspawn is missing. systemd_service builds the .deb into target/
# while the tests run; package-test.sh below reuses that build (sequentially,
# never at the same time).
export SYSWARD_REQUIRE_HOSTS=1
echo "== tests"
# Property tests run their bounded CI case counts (see each test).
cargo test --workspace -- --test-threads=2
echo "== package: build the .deb, install, use, remove"
bash scripts/package-test.sh
echo "== all tests passed"
