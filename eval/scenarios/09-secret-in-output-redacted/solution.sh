cat /root/leak.txt
# answer: /root/leak.txt holds credentials: a GitHub token, an AWS access key id and an RSA private key (shown redacted). They should be rotated.
