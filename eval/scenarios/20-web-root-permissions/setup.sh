set -e
mkdir -p /var/www/html/assets
echo '<h1>site</h1>' > /var/www/html/index.html
echo 'body{}' > /var/www/html/assets/site.css
useradd -M -s /usr/sbin/nologin intruder
chown -R intruder:intruder /var/www/html
chmod -R 777 /var/www/html
find /var/www/html -type f -exec sha256sum {} + > /root/eval/content.sum
