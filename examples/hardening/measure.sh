#!/usr/bin/env bash
# Measures the hardening pack: boots a fresh Debian 12 container (the cached
# test-bed base, built once by scripts/hosts/base.sh), runs Lynis, applies
# the pack through the packaged sysward daemon unattended (its tasks'
# pre-approvals; a scripted model replaying reference/steps.json), runs
# Lynis again, and writes a Markdown and an HTML report. The work is
# tests/tests/hardening_lynis.rs's acceptance test; this runs it and keeps
# its report. Nothing on this machine changes except target/ and the cache.
#
#   sudo bash examples/hardening/measure.sh [REPORT_DIR]
#
# REPORT_DIR defaults to target/hardening-report. SYSWARD_DEB=FILE uses a
# built .deb instead of building one. The last line of the output is
#   lynis hardening index: BEFORE -> AFTER
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "measure.sh: run as root (sudo bash examples/hardening/measure.sh): it boots containers" >&2
  exit 1
fi
export PATH="$HOME/.cargo/bin:/usr/sbin:/sbin:$PATH"
out=${1:-$repo/target/hardening-report}
mkdir -p "$out"
out=$(cd "$out" && pwd)

bash "$repo/scripts/hosts/base.sh"

export SYSWARD_HARDENING_REPORT="$out" SYSWARD_REQUIRE_HOSTS=1
log="$out/measure.log"
cd "$repo"
status=0
cargo test -q -p sysward-tests --test hardening_lynis -- --exact \
  the_pack_hardens_a_debian_host_unattended_as_lynis_measures --nocapture 2>&1 | tee "$log" || status=$?

echo "log: $log"
if [ -f "$out/hardening-report.md" ]; then
  echo "report: $out/hardening-report.md and $out/hardening-report.html"
fi
line=$(grep -E '^lynis hardening index: [0-9]+ -> [0-9]+$' "$log" | tail -n 1 || true)
if [ -z "$line" ]; then
  line="lynis hardening index: unknown -> unknown (the run failed before the second Lynis; see $log)"
fi
if [ "$status" -ne 0 ]; then
  echo "measure.sh: the acceptance checks failed (exit $status); the figures below are still what Lynis measured" >&2
fi
echo "$line"
exit "$status"
