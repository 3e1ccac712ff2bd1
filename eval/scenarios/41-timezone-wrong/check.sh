set -e
link=$(readlink -f /etc/localtime)
echo "localtime -> $link"
[ "$link" = /usr/share/zoneinfo/Europe/Berlin ]
[ "$(cat /etc/timezone)" = Europe/Berlin ]
z=$(date +%Z)
[ "$z" = CET ] || [ "$z" = CEST ]
