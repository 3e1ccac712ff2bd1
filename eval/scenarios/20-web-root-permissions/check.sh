set -e
sha256sum -c --quiet /root/eval/content.sum
[ -z "$(find /var/www/html -perm /002)" ]
[ -z "$(find /var/www/html ! -user root)" ]
[ -z "$(find /var/www/html ! -group www-data)" ]
[ -z "$(find /var/www/html -type f -perm /133)" ]
[ -z "$(find /var/www/html -type d -perm /022)" ]
