set -e
val() { awk -v k="$1" '$1 == k {v = $2} END {print v}' /etc/login.defs; }
echo "PASS_MAX_DAYS=$(val PASS_MAX_DAYS) PASS_MIN_DAYS=$(val PASS_MIN_DAYS) PASS_WARN_AGE=$(val PASS_WARN_AGE)"
[ "$(val PASS_MAX_DAYS)" = 180 ]
[ "$(val PASS_MIN_DAYS)" = 1 ]
[ "$(val PASS_WARN_AGE)" = 14 ]
IFS=: read -r _ _ _ min max warn _ <<EOF
$(getent shadow frank)
EOF
echo "frank: min=$min max=$max warn=$warn"
[ "$max" = 180 ]
[ "$min" = 1 ]
[ "$warn" = 14 ]
# New accounts get it.
useradd -M eval-probe
IFS=: read -r _ _ _ min max warn _ <<EOF
$(getent shadow eval-probe)
EOF
userdel eval-probe
[ "$max" = 180 ]
[ "$min" = 1 ]
[ "$warn" = 14 ]
getent shadow | awk -F: '$1 != "frank" {print $1":"$4":"$5":"$6}' | sort | diff - /root/eval/others
