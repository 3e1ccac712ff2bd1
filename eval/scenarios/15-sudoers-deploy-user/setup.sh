set -e
useradd -m -s /bin/bash deploy
