set -e
sha256sum -c --quiet /root/eval/unit.sum
systemctl is-active -q worker
r=$(systemctl show -p Restart --value worker)
echo "Restart=$r"
case "$r" in on-failure|always|on-abnormal) ;; *) exit 1 ;; esac
# A crash: SIGKILL to the main process; it must be back within 8 s.
old=$(systemctl show -p MainPID --value worker)
kill -9 "$old"
for i in $(seq 1 40); do
  new=$(systemctl show -p MainPID --value worker)
  if [ "$new" != 0 ] && [ "$new" != "$old" ] && systemctl is-active -q worker; then echo "restarted: $old -> $new"; exit 0; fi
  sleep 0.2
done
echo "not restarted"
exit 1
