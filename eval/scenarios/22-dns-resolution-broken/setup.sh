set -e
grep -q localhost /etc/hosts || echo "127.0.0.1 localhost" >> /etc/hosts
echo "10.20.30.40 intranet.example" >> /etc/hosts
sed -i 's/^hosts:.*/hosts:          db/' /etc/nsswitch.conf
