find /etc -xdev -type f -perm -o+w -exec ls -l {} +
chmod o-w,g-w /etc/cron.d/shop-cache /etc/profile.d/shop.sh /etc/shopapp/shop.conf
find /etc -xdev -type f -perm -o+w
# answer: /etc/shopapp/shop.conf, /etc/cron.d/shop-cache (666) and /etc/profile.d/shop.sh (777) were world-writable; removed group and other write. Contents unchanged, still readable.
