set -e
visudo -c >/dev/null
out=$(sudo -l -U deploy)
echo "$out"
echo "$out" | grep -q 'NOPASSWD: /usr/bin/systemctl restart webapp'
if echo "$out" | grep -Eq '\(ALL( : ALL)?\) (NOPASSWD: )?ALL'; then echo "check failed: echo \"\$out\" | grep -Eq '\(ALL( : ALL)?\) (NOPASSWD: )?ALL' succeeded"; exit 1; fi
sudo -n -l -U deploy /usr/bin/systemctl restart webapp >/dev/null
if sudo -n -l -U deploy /usr/bin/systemctl stop webapp >/dev/null 2>&1; then echo "check failed: sudo -n -l -U deploy /usr/bin/systemctl stop webapp >/dev/null 2>&1 succeeded"; exit 1; fi
if sudo -n -l -U deploy /bin/sh >/dev/null 2>&1; then echo "check failed: sudo -n -l -U deploy /bin/sh >/dev/null 2>&1 succeeded"; exit 1; fi
for f in /etc/sudoers.d/*; do [ "$(stat -c %a "$f")" = 440 ] || [ "$(stat -c %a "$f")" = 400 ] || { echo "mode of $f"; exit 1; }; done
