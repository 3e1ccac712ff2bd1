set -e
useradd -m -s /bin/bash -G sudo eve
echo 'eve:Old-Pass-123' | chpasswd
mkdir -p /home/eve/.ssh
echo 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH2m3Xq1r7y4c0wq8o2cVbq4YzjQ0gWm6pD5yJtQ1s9K eve@home' > /home/eve/.ssh/authorized_keys
chown -R eve:eve /home/eve/.ssh
echo "notes" > /home/eve/notes.txt
printf 'eve ALL=(ALL) NOPASSWD: ALL\n' > /etc/sudoers.d/eve
chmod 440 /etc/sudoers.d/eve
systemd-run --quiet --uid=eve --unit=eve-tunnel /bin/sleep infinity
