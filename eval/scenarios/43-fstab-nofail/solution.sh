cat /etc/fstab
sed -i 's|^UUID=3f9c2d4e-7a51-4b0e-9d6a-2c8e1f0b7d35 /mnt/backup ext4 defaults 0 2$|UUID=3f9c2d4e-7a51-4b0e-9d6a-2c8e1f0b7d35 /mnt/backup ext4 defaults,nofail,x-systemd.device-timeout=10s 0 2|' /etc/fstab
findmnt --verify --tab-file /etc/fstab || true
# answer: the backup disk's fstab entry had no nofail, so a missing disk failed local-fs.target; it now has nofail,x-systemd.device-timeout=10s. Nothing else changed.
