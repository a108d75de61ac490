-- The library's SQL (lib/src/{lock,produce,topics}.cpp, rows.hpp); "bench", "bench".compaction_head_1796642642097113,
-- "bench".message_1796642642097113, compaction_head_1796642642097113_pkey, "bench".produce_1796642642097113, "bench".lock_1796642642097113 are substituted by compaction_bench. Run with
-- -M prepared. The library's "/* compaction:... */" marker comments are left out, and
-- the timestamp bounds of rows.hpp's Micros are written '1900-01-01 +00' instead of
-- '1900-01-01 00:00+00' (the same value): pgbench would take ":Name" or ":00" for a
-- variable. Neither reaches the plan; the bench's sqlcheck section compares the texts
-- pg_stat_statements records (constants normalized) and must say "yes".
-- (4) plain CompactionHead read (topic id cached by the client)
\set k random(1, :nkeys)
SELECT m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM CASE WHEN m.created_at IS NULL THEN NULL ELSE least(greatest(m.created_at, '1900-01-01 +00'::timestamptz), '2200-01-01 +00'::timestamptz) END) * 1e6)::bigint, m.payload::text FROM "bench".compaction_head_1796642642097113 h JOIN "bench".message_1796642642097113 m ON m.id = h.head_id WHERE h.message_key = :k AND m.payload IS NOT NULL;
