set -e
useradd -m -s /bin/bash carol
echo 'carol:Blue-Whale-42' | chpasswd
chage -d 2021-03-01 -M 90 -m 0 -W 7 carol
getent shadow carol | cut -d: -f2 > /root/eval/hash
