id eve
ps -u eve -o pid,args
usermod -L -e 1 eve
gpasswd -d eve sudo || true
rm -f /etc/sudoers.d/eve
[ ! -e /home/eve/.ssh/authorized_keys ] || mv /home/eve/.ssh/authorized_keys /home/eve/.ssh/authorized_keys.revoked
pkill -KILL -u eve || true
sudo -l -U eve
# answer: locked eve's password and expired her account, removed her from sudo and /etc/sudoers.d/eve, moved her authorized_keys aside (authorized_keys.revoked) and killed her processes (eve-tunnel). Her account and home are kept.
