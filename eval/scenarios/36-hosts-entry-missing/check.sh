set -e
got=$(getent ahostsv4 db.internal | awk 'NR==1{print $1}')
echo "db.internal -> $got"
[ "$got" = 10.20.0.15 ]
[ "$(getent ahostsv4 localhost | awk 'NR==1{print $1}')" = 127.0.0.1 ]
# Every line that was there is still there.
while IFS= read -r line; do
  [ -z "$line" ] && continue
  grep -qxF -- "$line" /etc/hosts || { echo "lost: $line"; exit 1; }
done < /root/eval/hosts.orig
