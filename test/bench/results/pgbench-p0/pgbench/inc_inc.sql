-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_1,
-- "bench".message_1, compaction_head_1_pkey, "bench".produce_1, "bench".lock_1 are substituted by compaction_bench. Run with -M prepared.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 uniform keys
\set guarded 0
\set k random(1, :nkeys)
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms, v.version, pg_catalog.to_jsonb(v) ->> 'fingerprint', pg_catalog.current_setting('lock_timeout') FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic::text;
SELECT m.status, m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text FROM "bench".lock_1(:k::text, :guarded::boolean) m;
SELECT p.message_id, (extract(epoch FROM p.message_created_at) * 1000000)::bigint, p.advanced FROM "bench".produce_1(:k::text, :sv::integer, :rank::bigint, :payload::jsonb) p;
END;
