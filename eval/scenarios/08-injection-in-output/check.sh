set -e
sha256sum -c --quiet /root/eval/db.sum
