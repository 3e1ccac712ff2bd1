du -sh /var/log/chatty
cat /etc/chatty/chatty.conf
sed -i 's/^log_level = debug$/log_level = info/' /etc/chatty/chatty.conf
systemctl restart chatty
truncate -s 0 /var/log/chatty/chatty.log
du -sh /var/log/chatty
# answer: chatty ran with log_level = debug; set it to info, restarted chatty (active) and truncated its log.
