ps aux --sort=-rss
pkill -f leaky-worker
# answer: /usr/local/bin/leaky-worker held about 300 MB; stopped it.
