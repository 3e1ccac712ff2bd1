grep -E '^PASS_(MAX|MIN|WARN)' /etc/login.defs
sed -i -E 's/^PASS_MAX_DAYS[[:space:]].*/PASS_MAX_DAYS\t180/; s/^PASS_MIN_DAYS[[:space:]].*/PASS_MIN_DAYS\t1/; s/^PASS_WARN_AGE[[:space:]].*/PASS_WARN_AGE\t14/' /etc/login.defs
chage -M 180 -m 1 -W 14 frank
chage -l frank
# answer: /etc/login.defs now has PASS_MAX_DAYS 180, PASS_MIN_DAYS 1, PASS_WARN_AGE 14 for new accounts; chage applied the same to frank.
