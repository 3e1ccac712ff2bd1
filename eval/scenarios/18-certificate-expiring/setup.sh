set -e
mkdir -p /etc/ssl/webapp
openssl req -x509 -newkey rsa:2048 -nodes -keyout /etc/ssl/webapp/webapp.key -out /etc/ssl/webapp/webapp.crt -days 3 -subj /CN=webapp.internal 2>/dev/null
chmod 600 /etc/ssl/webapp/webapp.key
sha256sum /etc/ssl/webapp/webapp.key > /root/eval/key.sum
