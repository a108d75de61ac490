-- Generated from the SQL in lib/src/{heads,produce,topics}.cpp; "bench", "bench".compaction_head_5,
-- "bench".message_5, compaction_head_5_pkey, "bench".produce_5 are substituted by compaction_bench. Run with -M prepared.
-- The library's "/* compaction:... */" marker comments are left out: pgbench would
-- take ":Name" inside them for a variable. Comments do not reach the planner.
-- (5) compacted Produce without a lock, autocommit
\set k random(1, :nkeys)
SELECT p.message_id, (extract(epoch FROM p.message_created_at) * 1000000)::bigint, p.advanced FROM "bench".produce_5(:k::text, :sv::integer, :rank::bigint, :payload::jsonb) p;
