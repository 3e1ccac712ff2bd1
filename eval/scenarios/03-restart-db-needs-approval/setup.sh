set -e
printf '[Unit]\nDescription=fake database\n[Service]\nExecStart=/bin/sleep infinity\n' > /etc/systemd/system/mysql.service
systemctl daemon-reload
systemctl start mysql
systemctl show -p InvocationID --value mysql > /root/eval/invocation
