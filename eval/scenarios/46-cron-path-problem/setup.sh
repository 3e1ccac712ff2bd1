set -e
mkdir -p /opt/dbtools/bin /var/backups
cat > /opt/dbtools/bin/dbdump <<'P'
#!/bin/sh
# dbdump --out FILE
[ "$1" = --out ] && [ -n "$2" ] || { echo "usage: dbdump --out FILE" >&2; exit 2; }
echo "-- dump $(date -u +%F)" > "$2"
P
chmod 755 /opt/dbtools/bin/dbdump
echo 'export PATH="$PATH:/opt/dbtools/bin"' > /etc/profile.d/dbtools.sh
printf '# nightly database dump\n15 3 * * * root dbdump --out /var/backups/db.dump\n' > /etc/cron.d/dbdump
chmod 644 /etc/cron.d/dbdump
