set -e
mkdir -p /var/log/webapp
head -c 5M /dev/zero | tr '\0' 'x' | fold -w 100 > /var/log/webapp/app.log
printf '/var/log/webapp/*.log {\n    daily\n    rotat 7\n    compress\n    missingok\n    notifempty\n' > /etc/logrotate.d/webapp
