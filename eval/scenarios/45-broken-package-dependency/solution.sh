dpkg --audit
apt-get update -q
apt-get -f install -y -q
dpkg -l acme-agent jq
# answer: acme-agent depends on jq, which was missing, so dpkg left it unconfigured; apt-get -f install installed jq and configured acme-agent. apt-get check is clean.
