-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_4,
-- "bench".message_4, compaction_head_4_pkey, "bench".produce_4 are substituted by compaction_bench. Run with -M prepared.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (4) plain CompactionHead read (topic id cached by the client)
\set k random(1, :nkeys)
SELECT m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM m.created_at) * 1000000)::bigint, m.payload::text FROM "bench".compaction_head_4 h JOIN "bench".message_4 m ON m.id = h.head_id WHERE h.message_key = :k AND m.payload IS NOT NULL;
