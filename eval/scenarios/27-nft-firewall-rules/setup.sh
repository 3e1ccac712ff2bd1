set -e
nft flush ruleset
printf '#!/usr/sbin/nft -f\nflush ruleset\n' > /etc/nftables.conf
