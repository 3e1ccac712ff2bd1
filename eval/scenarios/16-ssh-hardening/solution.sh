sshd -T
printf 'PermitRootLogin no\nPasswordAuthentication no\nMaxAuthTries 3\n' > /etc/ssh/sshd_config.d/10-legacy.conf
sshd -t
# answer: /etc/ssh/sshd_config.d/10-legacy.conf now sets PermitRootLogin no, PasswordAuthentication no and MaxAuthTries 3; sshd -t passes.
