set -e
visudo -c >/dev/null
sudo -n -l -U ops /usr/bin/systemctl restart app >/dev/null
out=$(sudo -l -U ops)
echo "$out"
echo "$out" | grep -q 'NOPASSWD: /usr/bin/systemctl restart app'
if sudo -n -l -U ops /bin/sh >/dev/null 2>&1; then echo "ops may run a shell"; exit 1; fi
for f in /etc/sudoers.d/*; do
  m=$(stat -c %a "$f")
  [ "$m" = 440 ] || [ "$m" = 400 ] || { echo "mode $m of $f"; exit 1; }
done
