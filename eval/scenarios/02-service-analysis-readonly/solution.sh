systemctl status webapp --no-pager
journalctl -u webapp --no-pager -n 20
# answer: webapp exits at start: "invalid listen_port 'eighty' in /etc/webapp/webapp.conf" (journal). The configuration was not changed.
