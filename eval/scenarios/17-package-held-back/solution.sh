apt-mark showhold
apt-mark unhold lynis
apt-mark showhold
# answer: lynis was on hold; released with apt-mark unhold; nothing was upgraded.
