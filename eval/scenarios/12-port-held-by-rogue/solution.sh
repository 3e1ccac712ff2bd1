ss -ltnp
pkill -f rogue-listener
systemctl restart webapp
systemctl is-active webapp
# answer: /usr/local/bin/rogue-listener held 127.0.0.1:8282; stopped it and restarted webapp, which now serves.
