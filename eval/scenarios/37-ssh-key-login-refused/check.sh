set -e
sha256sum -c --quiet /root/eval/keys.sum
cmp -s /etc/ssh/sshd_config /root/eval/sshd_config.orig
if sshd -T 2>/dev/null | grep -qi '^strictmodes no'; then echo "StrictModes off"; exit 1; fi
for p in /home/bob /home/bob/.ssh /home/bob/.ssh/authorized_keys; do
  [ "$(stat -c %U "$p")" = bob ] || { echo "$p not owned by bob"; exit 1; }
  # StrictModes: no group or other write on any of them.
  [ -z "$(find "$p" -maxdepth 0 -perm /022)" ] || { echo "$p is group/other writable"; exit 1; }
done
[ -z "$(find /home/bob/.ssh -maxdepth 0 -perm /077)" ] || { echo "~/.ssh readable by others"; exit 1; }
