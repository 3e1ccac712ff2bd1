ls -ld /home/bob /home/bob/.ssh /home/bob/.ssh/authorized_keys
chown bob:bob /home/bob/.ssh /home/bob/.ssh/authorized_keys
chmod 755 /home/bob
chmod 700 /home/bob/.ssh
chmod 600 /home/bob/.ssh/authorized_keys
ls -ld /home/bob /home/bob/.ssh /home/bob/.ssh/authorized_keys
# answer: ~bob was group-writable, ~/.ssh world-writable and authorized_keys owned by root and world-writable; set bob as owner, 755 / 700 / 600. sshd's configuration is unchanged.
