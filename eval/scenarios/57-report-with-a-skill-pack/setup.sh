set -e
mkdir -p /etc/sysward/skills
cp -r /usr/share/doc/sysward/examples/skills/disk_usage /etc/sysward/skills/
chown -R root:root /etc/sysward/skills
chmod 0755 /etc/sysward/skills /etc/sysward/skills/disk_usage /etc/sysward/skills/disk_usage/run
chmod 0644 /etc/sysward/skills/disk_usage/skill.json
