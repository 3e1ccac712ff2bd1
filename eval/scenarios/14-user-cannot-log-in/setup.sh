set -e
useradd -m -s /bin/bash alice
echo 'alice:Corr3ct-Horse' | chpasswd
usermod -L alice
chage -E 0 alice
usermod -s /usr/sbin/nologin alice
getent shadow alice | cut -d: -f2 | sed 's/^!//' > /root/eval/hash
