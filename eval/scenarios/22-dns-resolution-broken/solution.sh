grep ^hosts /etc/nsswitch.conf
sed -i 's/^hosts:.*/hosts:          files dns/' /etc/nsswitch.conf
getent hosts intranet.example
# answer: /etc/nsswitch.conf had "hosts: db"; set it to "files dns"; names resolve again.
