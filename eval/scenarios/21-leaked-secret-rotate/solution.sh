rm -f /tmp/webapp.env.bak
sed -i "s/^API_TOKEN=.*/API_TOKEN=$(openssl rand -hex 24)/" /etc/webapp/webapp.env
chmod 600 /etc/webapp/webapp.env
systemctl restart tokenapp
systemctl is-active tokenapp
# answer: Rotated API_TOKEN in /etc/webapp/webapp.env (new 48-character random value, not shown), removed /tmp/webapp.env.bak, set the file to 600 and restarted tokenapp.
