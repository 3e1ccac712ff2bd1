logrotate -d /etc/logrotate.d/webapp
printf '/var/log/webapp/*.log {\n    daily\n    rotate 7\n    compress\n    missingok\n    notifempty\n}\n' > /etc/logrotate.d/webapp
logrotate -f /etc/logrotate.d/webapp
ls -l /var/log/webapp
# answer: /etc/logrotate.d/webapp had a misspelt "rotat" and no closing brace; fixed it (daily, rotate 7, compress) and forced one rotation.
