#!/usr/bin/env bash
# The fleet play (tests/tests/fleet.rs: install, configure, the refused
# policy, run, fetch, aggregate, a second play, an approval, verify) against
# 10 and then 25 booted hosts, with the wall time of each phase and the
# aggregator's table. Not part of CI. As root:
#   sudo bash scripts/fleet/bench.sh            # 10 and 25 hosts
#   sudo bash scripts/fleet/bench.sh 10         # only 10
# SYSWARD_DEB=path reuses a built .deb; SYSWARD_FLEET_BOOT_PARALLEL (default
# 4) hosts boot at a time. Output: target/fleet-bench-N.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" -eq 0 ] || { echo "bench.sh: run as root" >&2; exit 1; }
bash scripts/fleet/setup.sh >/dev/null
bash scripts/hosts/base.sh
export SYSWARD_REQUIRE_HOSTS=1
if [ -z "${SYSWARD_DEB:-}" ]; then
  SYSWARD_DEB=$(bash packaging/build-deb.sh | tail -n 1)
  export SYSWARD_DEB
fi
sizes=("$@")
[ "${#sizes[@]}" -gt 0 ] || sizes=(10 25)
cargo build -q -p sysward-tests --tests
for n in "${sizes[@]}"; do
  log="target/fleet-bench-$n.log"
  echo "== $n hosts (log: $log); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  t0=$(date +%s)
  SYSWARD_FLEET_HOSTS=$n cargo test -q -p sysward-tests --test fleet -- \
    --ignored --exact fleet_bench --nocapture --test-threads=1 >"$log" 2>&1 || {
    tail -60 "$log"; echo "bench with $n hosts failed (log: $log)" >&2; exit 1; }
  sed -n '/^== site: install/,/^teardown/p' "$log" | grep -v '^audit: '
  echo "== $n hosts: $(( $(date +%s) - t0 )) s in all; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
