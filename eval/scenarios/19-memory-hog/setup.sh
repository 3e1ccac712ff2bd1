set -e
printf '#!/usr/bin/python3\nimport time\nb = bytearray(300*1024*1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: time.sleep(60)\n' > /usr/local/bin/leaky-worker
chmod 755 /usr/local/bin/leaky-worker
printf '[Service]\nExecStart=/bin/sleep infinity\n' > /etc/systemd/system/keepme.service
systemctl daemon-reload; systemctl start keepme
