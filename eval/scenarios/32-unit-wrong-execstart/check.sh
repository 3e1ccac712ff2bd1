set -e
sha256sum -c --quiet /root/eval/bin.sum
# Not copied or linked into the old place.
if [ -e /usr/local/bin/reportd ] || [ -L /usr/local/bin/reportd ]; then echo "/usr/local/bin/reportd exists"; exit 1; fi
systemctl show -p ExecStart reportd | grep -q 'path=/opt/reportd/bin/reportd'
[ "$(systemctl is-enabled reportd)" = enabled ]
sleep 1
systemctl is-active -q reportd
