echo keep > /root/eval/marker
