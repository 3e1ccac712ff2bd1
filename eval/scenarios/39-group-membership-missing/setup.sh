set -e
groupadd analysts
useradd -m -s /bin/bash -G analysts erin
useradd -m -s /bin/bash dave
useradd -m -s /bin/bash mallory
mkdir -p /srv/reports
echo "Q3 revenue: 1.2M" > /srv/reports/q3.txt
chown -R root:analysts /srv/reports
chmod 2750 /srv/reports
chmod 640 /srv/reports/q3.txt
