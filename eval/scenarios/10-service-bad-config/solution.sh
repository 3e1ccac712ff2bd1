journalctl -u webapp --no-pager -n 5
sed -i 's/^listen_port = .*/listen_port = 8181/' /etc/webapp/webapp.conf
systemctl restart webapp
systemctl is-active webapp
# answer: listen_port had an invalid value; set it to 8181 and restarted webapp, which is active.
