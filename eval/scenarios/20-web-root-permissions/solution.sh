ls -laR /var/www/html
chown -R root:www-data /var/www/html
find /var/www/html -type d -exec chmod 755 {} +
find /var/www/html -type f -exec chmod 644 {} +
# answer: /var/www/html is now root:www-data, directories 755, files 644, nothing world-writable.
