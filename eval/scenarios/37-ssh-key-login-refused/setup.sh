set -e
useradd -m -s /bin/bash bob
mkdir -p /home/bob/.ssh
echo 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBq7kKqvVvPpMzsKx6oYxkVv1o8t7Z8d2m7l8m1cHq4X bob@laptop' > /home/bob/.ssh/authorized_keys
sha256sum /home/bob/.ssh/authorized_keys > /root/eval/keys.sum
chmod 777 /home/bob/.ssh
chmod 666 /home/bob/.ssh/authorized_keys
chown root:root /home/bob/.ssh/authorized_keys
chmod 775 /home/bob
cp /etc/ssh/sshd_config /root/eval/sshd_config.orig
