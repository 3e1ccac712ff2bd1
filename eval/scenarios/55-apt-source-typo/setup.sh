set -e
echo 'deb http://deb.debian.org/debian-security bookwrom-security main' > /etc/apt/sources.list.d/security.list
if apt-get update -q >/dev/null 2>&1; then echo "apt-get update passed with the broken source"; exit 1; fi
