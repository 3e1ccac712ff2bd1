set -e
c=/etc/ssl/webapp/webapp.crt
sha256sum -c --quiet /root/eval/key.sum
openssl x509 -in $c -noout -checkend $((300*86400))
openssl x509 -in $c -noout -subject | grep -q 'CN *= *webapp.internal'
[ "$(openssl x509 -in $c -noout -pubkey | sha256sum)" = "$(openssl pkey -in /etc/ssl/webapp/webapp.key -pubout | sha256sum)" ]
