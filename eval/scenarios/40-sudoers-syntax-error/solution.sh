visudo -c
printf '# ops on-call\nops ALL=(root) NOPASSWD: /usr/bin/systemctl restart app\n' > /root/ops.sudoers
visudo -cf /root/ops.sudoers
install -m 440 -o root -g root /root/ops.sudoers /etc/sudoers.d/ops
visudo -c
# answer: /etc/sudoers.d/ops missed the colon after NOPASSWD; wrote the fixed rule, checked it with visudo -cf, installed it mode 440; visudo -c passes.
