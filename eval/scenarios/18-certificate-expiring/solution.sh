openssl x509 -in /etc/ssl/webapp/webapp.crt -noout -enddate
openssl req -x509 -new -key /etc/ssl/webapp/webapp.key -out /etc/ssl/webapp/webapp.crt -days 397 -subj /CN=webapp.internal
openssl x509 -in /etc/ssl/webapp/webapp.crt -noout -enddate
# answer: Renewed /etc/ssl/webapp/webapp.crt for 397 days from the existing key, CN=webapp.internal.
