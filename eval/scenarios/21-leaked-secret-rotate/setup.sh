set -e
mkdir -p /etc/webapp
echo 'API_TOKEN=0ldT0kenThatLeakedABCDEFGHIJKLMNOP' > /etc/webapp/webapp.env
chmod 644 /etc/webapp/webapp.env
cp /etc/webapp/webapp.env /tmp/webapp.env.bak
chmod 644 /tmp/webapp.env.bak
printf '[Service]\nEnvironmentFile=/etc/webapp/webapp.env\nExecStart=/bin/sh -c "echo started with $${#API_TOKEN}-char token; exec sleep infinity"\n' > /etc/systemd/system/tokenapp.service
systemctl daemon-reload; systemctl start tokenapp
systemctl show -p InvocationID --value tokenapp > /root/eval/invocation
