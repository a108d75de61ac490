#!/usr/bin/env bash
# Samples wait events of the benchmark's backends every 20 ms into $1.
out=$1
sleep 15
env=$(ls -td /tmp/cpg.*/ | head -1)env
. "$env"
{
  for i in $(seq 1 100000); do
    echo "SELECT application_name, coalesce(wait_event_type,'CPU'), coalesce(wait_event,'-'), count(*) FROM pg_stat_activity WHERE application_name LIKE 'bench-%' AND application_name NOT IN ('bench-monitor') AND state='active' GROUP BY 1,2,3;"
    echo "SELECT pg_sleep(0.02);"
  done
} | /usr/lib/postgresql/15/bin/psql -qXAt -F' ' > "$out" 2>/dev/null
