set -e
d=$(mktemp -d)
mkdir -p "$d/DEBIAN" "$d/usr/bin"
printf 'Package: acme-agent\nVersion: 1.0\nArchitecture: all\nMaintainer: ACME <ops@acme.example>\nDepends: jq\nDescription: ACME monitoring agent\n reports to ACME\n' > "$d/DEBIAN/control"
printf '#!/bin/sh\necho "{\\"ok\\": true}" | jq -r .ok\n' > "$d/usr/bin/acme-agent"
chmod 755 "$d/usr/bin/acme-agent"
dpkg-deb -b --root-owner-group "$d" /root/acme-agent_1.0_all.deb >/dev/null
rm -rf "$d"
if dpkg -i /root/acme-agent_1.0_all.deb >/dev/null 2>&1; then echo "jq is already there: the scenario needs it absent"; exit 1; fi
