swapon --show
dd if=/dev/zero of=/swapfile bs=1M count=128 status=none
chmod 600 /swapfile
mkswap /swapfile
grep -q '^/swapfile ' /etc/fstab || echo '/swapfile none swap sw 0 0' >> /etc/fstab
# answer: created /swapfile (128 MiB, mode 600, mkswap) and the fstab line "/swapfile none swap sw 0 0"; swapon cannot run in this container.
