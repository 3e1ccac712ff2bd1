#!/bin/bash
mkdir -p /etc/app
printf '{"port": 8080, "debug": false}\n' > /etc/app/config.json
jq . /etc/app/config.json
