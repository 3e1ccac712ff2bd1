#!/bin/bash
# Terminal-Bench style test: exit 0 = pass.
set -e
[ "$(jq -r .port /etc/app/config.json)" = 8080 ]
[ "$(jq -r .debug /etc/app/config.json)" = false ]
