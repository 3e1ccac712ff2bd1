set -e
[ -z "$(apt-mark showhold)" ]
[ "$(dpkg-query -W -f='${Version}' lynis)" = "$(cat /root/eval/version)" ]
