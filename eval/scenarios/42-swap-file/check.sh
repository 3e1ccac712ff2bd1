set -e
f=/swapfile
[ -f $f ]
[ "$(stat -c '%s %U %a' $f)" = "134217728 root 600" ] || { stat -c '%s %U %a' $f; exit 1; }
# mkswap's signature at the end of the first page.
[ "$(dd if=$f bs=1 skip=4086 count=10 2>/dev/null)" = SWAPSPACE2 ]
awk '$1 == "/swapfile" && $3 == "swap" { found = 1 } END { exit !found }' /etc/fstab
# The rest of fstab is intact.
while IFS= read -r line; do
  grep -qxF -- "$line" /etc/fstab || { echo "lost: $line"; exit 1; }
done < /root/eval/fstab.orig
