#!/bin/sh
# rdmagw-check.sh URL - keepalived health check of the local rdmagw: healthy
# when its metrics endpoint answers with rdmagw series within 2 seconds
# (the process runs and its HTTP server is not wedged). Exit 0 healthy,
# 1 not. URL defaults to http://127.0.0.1:9464/metrics (metrics.listen).
url=${1:-http://127.0.0.1:9464/metrics}
curl -sf --max-time 2 "$url" 2>/dev/null | grep -q '^rdmagw_'
