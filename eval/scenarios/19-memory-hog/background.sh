exec /usr/local/bin/leaky-worker
