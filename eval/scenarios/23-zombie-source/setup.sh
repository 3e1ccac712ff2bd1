set -e
printf '#!/usr/bin/python3\nimport os, time\nwhile True:\n    if os.fork() == 0:\n        os._exit(0)\n    time.sleep(2)\n' > /usr/local/bin/spawner-daemon
chmod 755 /usr/local/bin/spawner-daemon
