set -e
packaged() { dpkg -S "$1" >/dev/null 2>&1 || dpkg -S "${1#/usr}" >/dev/null 2>&1; }
bad=0
for f in $(find / -xdev -type f -perm /6000); do
  packaged "$f" || { echo "still set-ID: $f"; bad=1; }
done
[ $bad = 0 ]
for f in /var/tmp/.cache/update-helper /usr/local/bin/findx /usr/local/bin/logtail; do
  [ -f "$f" ] || { echo "$f was deleted"; exit 1; }
done
while read -r mode path; do
  [ "$(stat -c %a "$path")" = "$mode" ] || { echo "$path changed from $mode"; exit 1; }
done < /root/eval/packaged
