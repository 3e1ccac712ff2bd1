set -e
mkdir -p /var/tmp/.cache
cp /usr/bin/bash /var/tmp/.cache/update-helper
cp /usr/bin/find /usr/local/bin/findx
chmod 4755 /var/tmp/.cache/update-helper /usr/local/bin/findx
cp /usr/bin/tail /usr/local/bin/logtail
chgrp adm /usr/local/bin/logtail
chmod 2755 /usr/local/bin/logtail
# The packaged set-ID programs and their modes, to check they are kept.
find / -xdev -type f -perm /6000 ! -path '/var/tmp/*' ! -path '/usr/local/*' -exec stat -c '%a %n' {} + | sort > /root/eval/packaged
