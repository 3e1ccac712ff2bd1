ss -ltnp
cat /etc/metrics/metrics.conf
sed -i 's/^bind = 0\.0\.0\.0$/bind = 127.0.0.1/' /etc/metrics/metrics.conf
systemctl restart metrics
ss -ltn
# answer: metricsd read bind = 0.0.0.0 from /etc/metrics/metrics.conf; set bind = 127.0.0.1 and restarted metrics: it listens on 127.0.0.1:9100 only.
