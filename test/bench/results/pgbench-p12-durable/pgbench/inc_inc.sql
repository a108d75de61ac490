-- The library's SQL (lib/src/{lock,produce,topics}.cpp, rows.hpp); "bench", "bench".compaction_head_1796642642097110,
-- "bench".message_1796642642097110, compaction_head_1796642642097110_pkey, "bench".produce_1796642642097110, "bench".lock_1796642642097110 are substituted by compaction_bench. Run with
-- -M prepared. The library's "/* compaction:... */" marker comments are left out, and
-- the timestamp bounds of rows.hpp's Micros are written '1900-01-01 +00' instead of
-- '1900-01-01 00:00+00' (the same value): pgbench would take ":Name" or ":00" for a
-- variable. Neither reaches the plan; the bench's sqlcheck section compares the texts
-- pg_stat_statements records (constants normalized) and must say "yes".
-- (1) increment: LockCompactionHead + ProduceInTx + commit, 10,000 uniform keys
-- Three round trips, as the library sends them: BEGIN, the topic resolution and
-- the lock in one pipeline (one Sync; \startpipeline needs -M prepared or
-- extended), then the produce, then END. The lock is the seed's way, the
-- library's for a key it saw with a head (lock.cpp LockRowSql, then
-- ReadLockedHeadSql): the bench's library client has locked every key once
-- before it is measured, as a long-running service has.
\set k random(1, :nkeys)
\startpipeline
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms, t.partitions, t.consumer_inactive_after_ms, v.version, v.fingerprint, pg_catalog.current_setting('lock_timeout') FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic::text;
SELECT h.head_id FROM "bench".compaction_head_1796642642097110 h WHERE h.message_key = :k AND pg_catalog.current_setting('lock_timeout') = '0' FOR UPDATE OF h;
SELECT 'h'::"char", m.id, m.message_key, m.schema_version, m.compaction_rank, (extract(epoch FROM CASE WHEN m.created_at IS NULL THEN NULL ELSE least(greatest(m.created_at, '1900-01-01 +00'::timestamptz), '2200-01-01 +00'::timestamptz) END) * 1e6)::bigint, m.payload::text FROM "bench".compaction_head_1796642642097110 h JOIN "bench".message_1796642642097110 m ON m.id = h.head_id WHERE h.message_key = :k;
\endpipeline
SELECT p.message_id, (extract(epoch FROM CASE WHEN p.message_created_at IS NULL THEN NULL ELSE least(greatest(p.message_created_at, '1900-01-01 +00'::timestamptz), '2200-01-01 +00'::timestamptz) END) * 1e6)::bigint, p.advanced FROM "bench".produce_1796642642097110(:k::text, :sv::integer, :rank::bigint, :payload::jsonb) p;
END;
