apt-get update -q
apt-get install -y -q --no-install-recommends unattended-upgrades
printf 'APT::Periodic::Update-Package-Lists "1";\nAPT::Periodic::Unattended-Upgrade "1";\n' > /etc/apt/apt.conf.d/20auto-upgrades
apt-config dump APT::Periodic
# answer: Installed unattended-upgrades and enabled the daily package-list update and unattended upgrade in /etc/apt/apt.conf.d/20auto-upgrades.
