set -e
nft -c -f /etc/nftables.conf
r=$(nft -j list ruleset)
python3 - "$r" <<'P'
import json, sys
rs = json.loads(sys.argv[1])["nftables"]
chains = [c["chain"] for c in rs if "chain" in c]
inp = [c for c in chains if c.get("hook") == "input"]
assert inp, "no input chain"
assert any(c.get("policy") == "drop" for c in inp), "input policy is not drop"
text = json.dumps([r["rule"] for r in rs if "rule" in r])
for port in (22, 443):
    assert f'"right": {port}' in text or f'{port}' in text, f"no rule for port {port}"
assert '"lo"' in text, "no loopback rule"
assert "established" in text, "no established rule"
out = [c for c in chains if c.get("hook") == "output"]
assert all(c.get("policy", "accept") == "accept" for c in out), "output is restricted"
P
grep -q 'policy drop' /etc/nftables.conf
