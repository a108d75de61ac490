-- Topic baseline v1 of libcompaction: the generated tables of one topic.
--
-- {schema} stands for the quoted schema identifier, {id} for the numeric
-- topic id (never a user string), {partitions} for the topic's partition
-- count (a number, fixed at creation). Run once per topic, in the
-- transaction that inserts the topic row. Pre-v1 this baseline is edited
-- in place.

-- The message log. compaction_rank NULL: the message did not opt into
-- compaction. payload NULL: a tombstone, which says its key has no value
-- once it is the key's head, so it needs a key and a rank.
CREATE TABLE {schema}.message_{id} (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  message_key     text,
  schema_version  integer NOT NULL,
  compaction_rank bigint,
  payload         jsonb,
  created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
  -- The writing transaction (top-level) id: consumers read what a newer
  -- snapshot sees that their last one did not (lib/src/consume_read.cpp),
  -- whatever order the writers committed in. A default, so no INSERT
  -- names it.
  xid             xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
  -- A key's messages always share a partition (a stable hash of the key:
  -- the one hash partitioning relies on across upgrades); unkeyed messages
  -- spread by id. Non-negative without abs(), which fails on the smallest
  -- bigint.
  partition       integer NOT NULL GENERATED ALWAYS AS ((
                    (coalesce(pg_catalog.hashtextextended(message_key, 0::bigint),
                              id) % {partitions}::bigint + {partitions}::bigint)
                    % {partitions}::bigint)::integer) STORED,
  CONSTRAINT message_{id}_tombstone_keyed CHECK (
    payload IS NOT NULL
    OR (message_key IS NOT NULL AND compaction_rank IS NOT NULL))
);

CREATE INDEX message_{id}_key_history ON {schema}.message_{id} (message_key, id)
  WHERE message_key IS NOT NULL;

-- The consumers' batch read: one partition, in transaction order.
CREATE INDEX message_{id}_consume ON {schema}.message_{id}
  (partition, xid, id);

-- The log cleaner finds tombstones through this index. Messages are never
-- updated, so it costs the head advances nothing (they stay HOT).
CREATE INDEX message_{id}_tombstones ON {schema}.message_{id} (id)
  WHERE payload IS NULL;

-- A message never changes once stored, for every role. The cleaner locks
-- the rows it deletes (FOR UPDATE SKIP LOCKED, which needs an UPDATE
-- grant); this keeps that grant from being a way to rewrite a message.
CREATE TRIGGER message_immutable
  BEFORE UPDATE ON {schema}.message_{id}
  FOR EACH ROW
  EXECUTE FUNCTION {schema}.refuse_message_change();

-- One durable, lockable row per message key taking part in compaction.
-- A headless row (all three head columns NULL) exists so that a
-- transactional reader can lock a key that has no value yet.
CREATE TABLE {schema}.compaction_head_{id} (
  message_key     text NOT NULL,
  head_id         bigint,
  schema_version  integer,
  compaction_rank bigint,
  created_at      timestamptz NOT NULL,  -- immutable
  updated_at      timestamptz NOT NULL,  -- head changed or headless row relocked
  -- Set exactly while the row is headless, equal to updated_at. The janitor
  -- index covers this column instead of updated_at so that head advances on
  -- materialized rows change no indexed column and stay HOT updates.
  idle_since      timestamptz,
  CONSTRAINT compaction_head_{id}_pkey PRIMARY KEY (message_key),
  CONSTRAINT compaction_head_{id}_head_all_or_none CHECK (
    (head_id IS NULL AND schema_version IS NULL AND compaction_rank IS NULL)
    OR (head_id IS NOT NULL AND schema_version IS NOT NULL
        AND compaction_rank IS NOT NULL)),
  CONSTRAINT compaction_head_{id}_idle_since_iff_headless CHECK (
    (head_id IS NULL AND idle_since IS NOT NULL AND idle_since = updated_at)
    OR (head_id IS NOT NULL AND idle_since IS NULL))
);

-- created_at is immutable, for every role (the function raises). The WHEN
-- condition is checked without a function call, so the head advances pay
-- next to nothing; it was bound to the built-in operator at creation (the
-- baseline runs with search_path pinned), so no session's path changes it.
CREATE TRIGGER created_at_immutable
  BEFORE UPDATE ON {schema}.compaction_head_{id}
  FOR EACH ROW
  WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at)
  EXECUTE FUNCTION {schema}.refuse_created_at_change();

-- Serves the janitor (oldest first) and the headless stats.
CREATE INDEX compaction_head_{id}_idle ON {schema}.compaction_head_{id}
  (idle_since, message_key) WHERE idle_since IS NOT NULL;
