-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_5,
-- "bench".message_5, compaction_head_5_pkey are substituted by compaction_bench. Run with -M prepared.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (5) compacted Produce without a lock, autocommit
\set k random(1, :nkeys)
WITH m AS (INSERT INTO "bench".message_5 (message_key, schema_version, compaction_rank, payload) VALUES (:k, :sv, :rank, :payload::jsonb) RETURNING id, created_at), h AS (INSERT INTO "bench".compaction_head_5 AS h (message_key, head_id, schema_version, compaction_rank, created_at, updated_at, idle_since) SELECT :k, m.id, :sv, :rank, statement_timestamp(), statement_timestamp(), NULL FROM m ON CONFLICT ON CONSTRAINT compaction_head_5_pkey DO UPDATE SET head_id = excluded.head_id, schema_version = excluded.schema_version, compaction_rank = excluded.compaction_rank, updated_at = excluded.updated_at, idle_since = NULL WHERE h.head_id IS NULL OR (excluded.schema_version, excluded.compaction_rank, excluded.head_id) > (h.schema_version, h.compaction_rank, h.head_id) RETURNING h.head_id) SELECT m.id, (extract(epoch FROM m.created_at) * 1000000)::bigint, EXISTS (SELECT 1 FROM h) FROM m;
