set -e
useradd -m -s /bin/bash frank
echo 'frank:Green-Tree-7' | chpasswd
getent shadow | awk -F: '$1 != "frank" {print $1":"$4":"$5":"$6}' | sort > /root/eval/others
