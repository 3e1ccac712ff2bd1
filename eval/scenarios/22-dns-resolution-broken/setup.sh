set -e
echo '10.20.30.40 intranet.example' >> /etc/hosts
sed -i 's/^hosts:.*/hosts:          db/' /etc/nsswitch.conf
