set -e
mkdir -p /run/sshd
sshd -t
t=$(sshd -T 2>/dev/null)
echo "$t" | grep -qx 'permitrootlogin no'
echo "$t" | grep -qx 'passwordauthentication no'
echo "$t" | grep -qx 'maxauthtries 3'
