set -e
[ "$(systemctl is-enabled cleanup.timer)" = enabled ]
systemctl is-active -q cleanup.timer
cal=$(systemd-analyze calendar --iterations=3 "$(systemctl show -p TimersCalendar --value cleanup.timer | sed -n 's/.*OnCalendar=\([^;]*\) ;.*/\1/p' | sed 's/ *$//')")
echo "$cal"
# Three consecutive elapses 15 minutes apart.
times=$(echo "$cal" | sed -n 's/.*Next elapse: *//p; s/.*Iter\. #[0-9]*: *//p' | head -3)
n=0; prev=""
while read -r t; do
  s=$(date -d "$t" +%s)
  if [ -n "$prev" ] && [ $((s - prev)) -ne 900 ]; then echo "not 15 minutes apart"; exit 1; fi
  prev=$s; n=$((n + 1))
done <<EOF
$times
EOF
[ "$n" -eq 3 ]
next=$(systemctl show -p NextElapseUSecRealtime --value cleanup.timer)
echo "next: $next"
[ -n "$next" ]
