set -e
python3 - <<'P'
import json,sys
n=0
for l in open('/root/eval/audit.jsonl'):
    try: e=json.loads(l).get('event',{})
    except Exception: continue
    if e.get('event')=='tool' and 'same.conf' in str(e.get('request','')) and e.get('status'):
        n+=1
sys.exit(0 if n<=2 else f'the identical call ran {n} times')
P
echo "$1" | grep -Eqi 'not exist|no such|missing|not found'
