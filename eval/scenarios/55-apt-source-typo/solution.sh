apt-get update
grep -rn . /etc/apt/sources.list /etc/apt/sources.list.d
sed -i 's/bookwrom-security/bookworm-security/' /etc/apt/sources.list.d/security.list
apt-get update
# answer: /etc/apt/sources.list.d/security.list named the suite "bookwrom-security"; corrected it to bookworm-security, and apt-get update runs cleanly.
