-- The library's SQL (lib/src/{lock,produce,topics}.cpp, rows.hpp); "bench", "bench".compaction_head_1796642642097114,
-- "bench".message_1796642642097114, compaction_head_1796642642097114_pkey, "bench".produce_1796642642097114, "bench".lock_1796642642097114 are substituted by compaction_bench. Run with
-- -M prepared. The library's "/* compaction:... */" marker comments are left out, and
-- the timestamp bounds of rows.hpp's Micros are written '1900-01-01 +00' instead of
-- '1900-01-01 00:00+00' (the same value): pgbench would take ":Name" or ":00" for a
-- variable. Neither reaches the plan; the bench's sqlcheck section compares the texts
-- pg_stat_statements records (constants normalized) and must say "yes".
-- (5) compacted Produce without a lock, autocommit
\set k random(1, :nkeys)
SELECT p.message_id, (extract(epoch FROM CASE WHEN p.message_created_at IS NULL THEN NULL ELSE least(greatest(p.message_created_at, '1900-01-01 +00'::timestamptz), '2200-01-01 +00'::timestamptz) END) * 1e6)::bigint, p.advanced FROM "bench".produce_1796642642097114(:k::text, :sv::integer, :rank::bigint, :payload::jsonb) p;
