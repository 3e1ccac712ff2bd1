df -h
du -xh --max-depth=1 /srv
# answer: Disk usage is moderate; the largest directory under /srv is /srv/archive (about 60M, backup-2024.tar). Nothing was changed.
