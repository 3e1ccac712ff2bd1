printf 'deploy ALL=(root) NOPASSWD: /usr/bin/systemctl restart webapp\n' > /etc/sudoers.d/deploy
chmod 440 /etc/sudoers.d/deploy
visudo -cf /etc/sudoers.d/deploy
# answer: /etc/sudoers.d/deploy lets deploy run only "/usr/bin/systemctl restart webapp" as root without a password; visudo -c validates it.
