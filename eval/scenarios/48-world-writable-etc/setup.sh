set -e
mkdir -p /etc/shopapp
printf 'listen = 127.0.0.1:9000\n' > /etc/shopapp/shop.conf
printf 'export SHOP_HOME=/srv/shop\n' > /etc/profile.d/shop.sh
printf '*/5 * * * * root /usr/bin/true\n' > /etc/cron.d/shop-cache
chmod 666 /etc/shopapp/shop.conf /etc/cron.d/shop-cache
chmod 777 /etc/profile.d/shop.sh
sha256sum /etc/shopapp/shop.conf /etc/profile.d/shop.sh /etc/cron.d/shop-cache > /root/eval/sums
