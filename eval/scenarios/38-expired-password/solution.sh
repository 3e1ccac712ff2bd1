chage -l carol
chage -d "$(date +%F)" -M 365 -m 1 -W 14 carol
chage -l carol
# answer: carol's password was last changed 2021-03-01 with a 90-day maximum, so it had expired; set last change today, max 365, min 1, warn 14. Her password is unchanged.
