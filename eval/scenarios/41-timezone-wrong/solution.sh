ls -l /etc/localtime
cat /etc/timezone
timedatectl set-timezone Europe/Berlin
echo Europe/Berlin > /etc/timezone
date
# answer: the time zone was America/New_York; set Europe/Berlin with timedatectl (/etc/localtime links to it) and /etc/timezone says Europe/Berlin.
