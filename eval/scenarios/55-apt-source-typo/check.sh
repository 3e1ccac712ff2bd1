set -e
out=$(apt-get update 2>&1)
echo "$out" | tail -n 5
if echo "$out" | grep -Eq '^(E|W|Err):'; then exit 1; fi
# The security suite of this release is among the sources apt uses.
apt-get indextargets --format '$(SITE) $(RELEASE)' | grep -q 'debian-security bookworm-security'
