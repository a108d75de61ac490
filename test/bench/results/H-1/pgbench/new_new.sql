-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_3,
-- "bench".message_3, compaction_head_3_pkey are substituted by compaction_bench. Run with -M prepared.
-- \startpipeline..\endpipeline is the one round trip of ExecPipelined.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (3) lock-only on an always-new key: SELECT FOR UPDATE finds nothing, the
-- headless row is inserted ON CONFLICT DO NOTHING
\set k random(1, 1000000000000000)
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, v.version FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic;
\startpipeline
SELECT h.head_id FROM "bench".compaction_head_3 h WHERE h.message_key = :k FOR UPDATE OF h;
SELECT m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text FROM "bench".compaction_head_3 h JOIN "bench".message_3 m ON m.id = h.head_id WHERE h.message_key = :k;
\endpipeline
INSERT INTO "bench".compaction_head_3 (message_key, created_at, updated_at, idle_since) VALUES (:k, statement_timestamp(), statement_timestamp(), statement_timestamp()) ON CONFLICT ON CONSTRAINT compaction_head_3_pkey DO NOTHING RETURNING message_key;
END;
