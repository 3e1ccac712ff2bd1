exec /usr/local/bin/spawner-daemon
