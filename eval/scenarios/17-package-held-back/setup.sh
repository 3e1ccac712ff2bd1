set -e
apt-mark hold lynis >/dev/null
dpkg-query -W -f='${Version}' lynis > /root/eval/version
