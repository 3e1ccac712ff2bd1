set -e
# The pack ran as an action in the packaged layout (its executable lives in
# /etc/sysward, which is otherwise unreadable to actions) and succeeded.
python3 - <<'P'
import json, sys
ran = False
for line in open("/root/eval/audit.jsonl"):
    r = json.loads(line)
    e = r.get("event", r)
    if isinstance(e, dict) and e.get("event") == "tool" and e.get("tool") == "disk_usage" and e.get("exit_code") == 0:
        ran = True
sys.exit(0 if ran else 1)
P
grep -q '%' "$EVAL_ANSWER_FILE"
