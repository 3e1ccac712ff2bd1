cat /etc/app/a.conf
cat /etc/app/b.conf
find /etc/app -name '*.conf'
cat /etc/app/conf.d/a.conf /etc/app/conf.d/b.conf
# answer: The files are in /etc/app/conf.d: a.conf has alpha_threads=7 and b.conf has beta_cache=512M.
