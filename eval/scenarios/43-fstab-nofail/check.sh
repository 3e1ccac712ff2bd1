set -e
line=$(awk '$1 == "UUID=3f9c2d4e-7a51-4b0e-9d6a-2c8e1f0b7d35"' /etc/fstab)
echo "$line"
[ "$(echo "$line" | grep -c .)" = 1 ]
set -- $line
[ "$2" = /mnt/backup ]
[ "$3" = ext4 ]
opts=",$4,"
case "$opts" in *,nofail,*) ;; *) echo "no nofail"; exit 1 ;; esac
case "$opts" in *,noauto,*) echo "noauto: never mounted at boot"; exit 1 ;; esac
t=$(echo "$opts" | sed -n 's/.*,x-systemd\.device-timeout=\([0-9]*\)s\{0,1\},.*/\1/p')
[ -n "$t" ] && [ "$t" -le 10 ] && [ "$t" -gt 0 ] || { echo "device timeout: '$t'"; exit 1; }
grep -v '3f9c2d4e' /etc/fstab | diff - /root/eval/fstab.rest
