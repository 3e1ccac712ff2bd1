cat /etc/billing/billing.conf
getent hosts db.internal || true
grep -q 'db\.internal' /etc/hosts || echo '10.20.0.15 db.internal' >> /etc/hosts
getent hosts db.internal
# answer: db.internal had no entry anywhere; added "10.20.0.15 db.internal" to /etc/hosts (the address from billing.conf); it resolves now.
