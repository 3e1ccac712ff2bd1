set -e
dpkg-query -W -f='${Status}' unattended-upgrades | grep -q 'install ok installed'
cfg=$(apt-config dump)
echo "$cfg" | grep -q '^APT::Periodic::Update-Package-Lists "1";'
echo "$cfg" | grep -q '^APT::Periodic::Unattended-Upgrade "1";'
