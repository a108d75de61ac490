-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_3,
-- "bench".message_3, compaction_head_3_pkey, "bench".produce_3, "bench".lock_3 are substituted by compaction_bench. Run with -M prepared.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (3) lock-only on an always-new key: lock_<id> finds nothing and inserts the
-- headless row ON CONFLICT DO NOTHING, in the one call
\set guarded 0
\set k random(1, 1000000000000000)
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms, v.version, pg_catalog.to_jsonb(v) ->> 'fingerprint', pg_catalog.current_setting('lock_timeout') FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic::text;
SELECT m.status, m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text FROM "bench".lock_3(:k::text, :guarded::boolean) m;
END;
