exec /usr/local/bin/rogue-listener
