-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_1,
-- "bench".message_1, compaction_head_1_pkey are substituted by compaction_bench. Run with -M prepared.
-- \startpipeline..\endpipeline is the one round trip of ExecPipelined.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 uniform keys
\set k random(1, :nkeys)
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms, v.version, pg_catalog.to_jsonb(v) ->> 'fingerprint', pg_catalog.current_setting('lock_timeout') FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic::text;
\startpipeline
SELECT h.head_id FROM "bench".compaction_head_1 h WHERE h.message_key = :k FOR UPDATE OF h;
SELECT m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text FROM "bench".compaction_head_1 h JOIN "bench".message_1 m ON m.id = h.head_id WHERE h.message_key = :k;
\endpipeline
WITH xid_first AS MATERIALIZED (SELECT pg_catalog.pg_current_xact_id()), m AS (INSERT INTO "bench".message_1 (message_key, schema_version, compaction_rank, payload) SELECT :k::text, :sv::integer, :rank::bigint, :payload::jsonb FROM xid_first RETURNING id, created_at), h AS (INSERT INTO "bench".compaction_head_1 AS h (message_key, head_id, schema_version, compaction_rank, created_at, updated_at, idle_since) SELECT :k, m.id, :sv, :rank, pg_catalog.statement_timestamp(), pg_catalog.statement_timestamp(), NULL FROM m ON CONFLICT ON CONSTRAINT compaction_head_1_pkey DO UPDATE SET head_id = excluded.head_id, schema_version = excluded.schema_version, compaction_rank = excluded.compaction_rank, updated_at = excluded.updated_at, idle_since = NULL WHERE h.head_id IS NULL OR (excluded.schema_version, excluded.compaction_rank, excluded.head_id) > (h.schema_version, h.compaction_rank, h.head_id) RETURNING h.head_id) SELECT m.id, (extract(epoch FROM m.created_at) * 1000000)::bigint, EXISTS (SELECT 1 FROM h) FROM m;
END;
