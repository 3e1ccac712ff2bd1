set -e
[ "$(dpkg-query -W -f '${Status}' acme-agent)" = "install ok installed" ]
[ "$(dpkg-query -W -f '${Status}' jq)" = "install ok installed" ]
[ -z "$(dpkg --audit)" ]
apt-get check -q >/dev/null
[ "$(acme-agent)" = true ]
