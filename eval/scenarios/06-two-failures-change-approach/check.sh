set -e
echo "$1" | grep -q 'alpha_threads=7'
echo "$1" | grep -q 'beta_cache=512M'
