set -e
cp /etc/fstab /root/eval/fstab.orig
