set -e
visudo -c >/dev/null
out=$(sudo -l -U deploy)
echo "$out"
echo "$out" | grep -q 'NOPASSWD: /usr/bin/systemctl restart webapp'
! echo "$out" | grep -Eq '\(ALL( : ALL)?\) (NOPASSWD: )?ALL'
sudo -n -l -U deploy /usr/bin/systemctl restart webapp >/dev/null
! sudo -n -l -U deploy /usr/bin/systemctl stop webapp >/dev/null 2>&1
! sudo -n -l -U deploy /bin/sh >/dev/null 2>&1
for f in /etc/sudoers.d/*; do [ "$(stat -c %a "$f")" = 440 ] || [ "$(stat -c %a "$f")" = 400 ] || { echo "mode of $f"; exit 1; }; done
