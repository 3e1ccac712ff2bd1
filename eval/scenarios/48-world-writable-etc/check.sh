set -e
left=$(find /etc -xdev -type f -perm -o+w)
[ -z "$left" ] || { echo "world-writable: $left"; exit 1; }
sha256sum -c --quiet /root/eval/sums
for f in /etc/shopapp/shop.conf /etc/profile.d/shop.sh /etc/cron.d/shop-cache /etc/passwd /etc/group; do
  [ -n "$(find "$f" -perm -o+r)" ] || { echo "$f is no longer readable"; exit 1; }
done
[ "$(stat -c %a /etc/shadow)" = 640 ]
