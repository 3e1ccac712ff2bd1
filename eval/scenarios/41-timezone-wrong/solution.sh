ls -l /etc/localtime
cat /etc/timezone
ln -sf /usr/share/zoneinfo/Europe/Berlin /etc/localtime
echo Europe/Berlin > /etc/timezone
date
# answer: the time zone was America/New_York; /etc/localtime now links to Europe/Berlin and /etc/timezone says Europe/Berlin.
