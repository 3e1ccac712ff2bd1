ls -ld /srv/reports /srv/reports/q3.txt
id erin
id dave
usermod -aG analysts dave
id dave
# answer: /srv/reports is root:analysts 2750 and erin is in analysts; dave was not. Added dave to the analysts group; the permissions are unchanged (he needs a new login for the group to apply).
