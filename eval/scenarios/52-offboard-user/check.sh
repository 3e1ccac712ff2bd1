set -e
getent passwd eve >/dev/null
[ -f /home/eve/notes.txt ]
[ "$(passwd -S eve | awk '{print $2}')" = L ]
exp=$(getent shadow eve | cut -d: -f8)
today=$(( $(date +%s) / 86400 ))
[ -n "$exp" ] && [ "$exp" -le "$today" ] || { echo "account not expired ($exp)"; exit 1; }
if id -nG eve | tr ' ' '\n' | grep -qx sudo; then echo "still in sudo"; exit 1; fi
if sudo -l -U eve 2>/dev/null | grep -q 'may run'; then sudo -l -U eve; exit 1; fi
visudo -c >/dev/null
if [ -s /home/eve/.ssh/authorized_keys ]; then echo "keys left"; exit 1; fi
if pgrep -u eve >/dev/null; then ps -u eve; exit 1; fi
