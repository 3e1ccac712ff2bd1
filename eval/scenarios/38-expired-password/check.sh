set -e
IFS=: read -r _ hash last min max warn inactive expire _ <<EOF
$(getent shadow carol)
EOF
today=$(( $(date +%s) / 86400 ))
echo "last=$last min=$min max=$max warn=$warn inactive=$inactive expire=$expire today=$today"
[ "$hash" = "$(cat /root/eval/hash)" ]
[ "$last" -ge $((today - 1)) ]
[ "$last" -le "$today" ]
[ "$max" = 365 ]
[ "$min" = 1 ]
[ "$warn" = 14 ]
[ -z "$expire" ] || [ "$expire" -gt "$today" ]
