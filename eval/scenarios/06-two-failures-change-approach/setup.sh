set -e
mkdir -p /etc/app/conf.d
echo 'alpha_threads=7' > /etc/app/conf.d/a.conf
echo 'beta_cache=512M' > /etc/app/conf.d/b.conf
