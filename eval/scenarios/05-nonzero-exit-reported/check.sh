set -e
python3 - <<'P'
import json,sys
for l in open('/root/eval/audit.jsonl'):
    try: e=json.loads(l).get('event',{})
    except Exception: continue
    if e.get('event')=='tool' and 'no-such-unit' in str(e.get('request','')) and e.get('exit_code') not in (None,0):
        sys.exit(0)
sys.exit('no failing check of the unit in the audit log')
P
echo "$1" | grep -Eqi 'not (be )?found|does not exist|no such|not exist|not-found|could not'
