-- The library's SQL (lib/src/{lock,produce,topics}.cpp, rows.hpp); "bench", "bench".compaction_head_1796642642097112,
-- "bench".message_1796642642097112, compaction_head_1796642642097112_pkey, "bench".produce_1796642642097112, "bench".lock_1796642642097112 are substituted by compaction_bench. Run with
-- -M prepared. The library's "/* compaction:... */" marker comments are left out, and
-- the timestamp bounds of rows.hpp's Micros are written '1900-01-01 +00' instead of
-- '1900-01-01 00:00+00' (the same value): pgbench would take ":Name" or ":00" for a
-- variable. Neither reaches the plan; the bench's sqlcheck section compares the texts
-- pg_stat_statements records (constants normalized) and must say "yes".
-- (3) lock-only on an always-new key: the library's insert way (lock.cpp
-- InsertLockSql), which a client takes once its unhinted keys have mostly
-- been new (the bench's library client takes lock_<id> for its first 16).
-- Two round trips, as the library sends them: BEGIN, the topic resolution and
-- the lock in one pipeline (one Sync; \startpipeline needs -M prepared or
-- extended), then END.
\set k random(1, 1000000000000000)
\startpipeline
BEGIN;
SELECT t.id, t.name, t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms, t.partitions, t.consumer_inactive_after_ms, v.version, v.fingerprint, pg_catalog.current_setting('lock_timeout') FROM "bench".topic t LEFT JOIN "bench".schema_version v ON v.topic_id = t.id WHERE t.name = :topic::text;
INSERT INTO "bench".compaction_head_1796642642097112 AS h (message_key) SELECT :k::text WHERE pg_catalog.current_setting('lock_timeout') = '0' ON CONFLICT ON CONSTRAINT compaction_head_1796642642097112_pkey DO UPDATE SET updated_at = pg_catalog.statement_timestamp(), idle_since = pg_catalog.statement_timestamp() WHERE h.head_id IS NULL RETURNING h.head_id;
\endpipeline
END;
