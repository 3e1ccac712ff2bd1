@tool read_journal {"unit": "reportd.service", "lines": 20}
@tool apply_patch {"patch": "--- /etc/reportd/reportd.conf\n+++ /etc/reportd/reportd.conf\n@@ -2,3 +2,3 @@\n interval = 30\n-spool_dir = /var/spool/reprotd\n+spool_dir = /var/spool/reportd\n owner = nobody\n"}
systemctl restart reportd
systemctl is-active reportd
# answer: the journal said spool_dir /var/spool/reprotd does not exist (a typo of /var/spool/reportd); the patch fixed that one line and reportd is active.
