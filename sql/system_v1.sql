-- System baseline v1 of libcompaction.
--
-- Placeholders, substituted by the library in one pass (none is spelled
-- out in a comment: a substituted value could span lines):
--   schema       (in braces) the quoted schema identifier, "compaction"
--   schema_name  (in braces) the schema name as a string literal
--   topic_v1     (in braces) the text of sql/topic_v1.sql as a string
--                literal, its own placeholders left for register_topic
--   topic_fingerprint  (in braces) the fingerprint of that text as a
--                string literal, recorded for every topic it creates
-- The library runs this file in one transaction. Pre-v1 this baseline is
-- edited in place: recreate an existing database.
--
-- Nothing here depends on the caller's search_path: every function is
-- qualified with pg_catalog, and the setting below pins the path for the
-- rest of this transaction, so the operators in the CHECKs and defaults
-- resolve (once, at creation) to the built-in ones.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

-- A DBA may have created the schema already (and granted us only CREATE on
-- it): CREATE SCHEMA IF NOT EXISTS would still need CREATE on the database.
DO $create_schema$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace
                 WHERE nspname = {schema_name}::name) THEN
    CREATE SCHEMA {schema};
  END IF;
END
$create_schema$;

-- One row per registered topic. Generated tables are named after `id` only.
-- The CHECKs repeat the library's validation (lib/src/validate.cpp), so a
-- row typed in by hand is refused too: a name of 1-100 characters a-z 0-9 .
-- _ - starting with a letter or digit, a TTL of at most 36,500 days, and
-- retentions of 0 to 36,500 days or the largest bigint, which keeps
-- messages forever (kKeepForever).
CREATE TABLE IF NOT EXISTS {schema}.topic (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name            text NOT NULL UNIQUE
                  CONSTRAINT topic_name_valid CHECK (
                    name COLLATE "C" ~ '^[a-z0-9][a-z0-9._-]{0,99}$'::text),
  headless_ttl_ms bigint NOT NULL DEFAULT 3600000
                  CONSTRAINT topic_headless_ttl_ms_range CHECK (
                    headless_ttl_ms > 0::bigint
                    AND headless_ttl_ms <= 3153600000000::bigint),
  -- Messages that are no longer their key's head go after this long.
  retention_ms    bigint NOT NULL DEFAULT 604800000
                  CONSTRAINT topic_retention_ms_range CHECK (
                    retention_ms >= 0::bigint
                    AND (retention_ms <= 3153600000000::bigint
                         OR retention_ms = 9223372036854775807::bigint)),
  -- A key whose head is a tombstone keeps it this long, then its row turns
  -- headless (and the janitor removes it after headless_ttl_ms).
  tombstone_retention_ms bigint NOT NULL DEFAULT 86400000
                  CONSTRAINT topic_tombstone_retention_ms_range CHECK (
                    tombstone_retention_ms >= 0::bigint
                    AND (tombstone_retention_ms <= 3153600000000::bigint
                         OR tombstone_retention_ms
                            = 9223372036854775807::bigint)),
  -- How many partitions the message log is split in for consumers (a
  -- key's messages always share one). Fixed when the topic is created: the
  -- message table's generated column bakes it in.
  partitions      integer NOT NULL DEFAULT 1
                  CONSTRAINT topic_partitions_range CHECK (
                    partitions >= 1 AND partitions <= 1024),
  -- A consumer whose last Poll is older than this is inactive: it is
  -- reported, and the log cleaner no longer waits for it.
  consumer_inactive_after_ms bigint NOT NULL DEFAULT 604800000
                  CONSTRAINT topic_consumer_inactive_after_ms_range CHECK (
                    consumer_inactive_after_ms > 0::bigint
                    AND consumer_inactive_after_ms <= 3153600000000::bigint),
  created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
  updated_at      timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- A topic's id names its tables and functions, and a client caches it by
-- name. So ids never repeat across installs in one database (DROP SCHEMA,
-- then install again): a new identity starts at the install's time in
-- microseconds since 1970, and a client that outlived the old schema
-- cannot reach another topic's tables through an id it cached. Registering
-- a topic takes far longer than a microsecond, so a later install starts
-- above every id an earlier one handed out (unless the clock steps back).
-- About 1.8e15: exact in JSON readers that use doubles (below 2^53).
DO $topic_ids$
DECLARE
  v_ids CONSTANT regclass := pg_catalog.pg_get_serial_sequence(
    pg_catalog.format('%I.topic', {schema_name}::text), 'id')::regclass;
BEGIN
  IF pg_catalog.pg_sequence_last_value(v_ids) IS NULL THEN
    PERFORM pg_catalog.setval(v_ids,
      (EXTRACT(EPOCH FROM pg_catalog.clock_timestamp()) * 1000000)::bigint,
      false);
  END IF;
END
$topic_ids$;

-- Baseline versions: topic_id NULL is the system baseline, otherwise the
-- baseline the topic's generated tables were created from. Pre-v1 a
-- baseline changes in place under the same version number, so the library
-- also records a fingerprint (a hash of the baseline's SQL text) and
-- refuses a database whose fingerprint is not its own. `profile` (on the
-- system row only) says which layout was installed: 'single' (one
-- PostgreSQL) or 'citus' (sql/citus_v1.sql, when the database has the citus
-- extension); a library meeting the other one refuses.
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
  topic_id     bigint REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  version      integer NOT NULL,
  fingerprint  text NOT NULL,
  profile      text
               CONSTRAINT schema_version_profile_valid CHECK (
                 profile IN ('single', 'citus')),
  installed_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
  CONSTRAINT schema_version_subject UNIQUE NULLS NOT DISTINCT (topic_id)
);

-- Janitor bookkeeping, one row per topic. The claim keeps two daemon
-- replicas from sweeping one topic at the same moment; FOR UPDATE SKIP
-- LOCKED on the head rows stays the safety net.
CREATE TABLE IF NOT EXISTS {schema}.janitor_state (
  topic_id               bigint PRIMARY KEY
                         REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  claimed_by             text,
  claimed_until          timestamptz,
  last_sweep_started_at  timestamptz,
  last_sweep_finished_at timestamptz,
  last_success_at        timestamptz,
  last_deleted_rows      bigint NOT NULL DEFAULT 0,
  total_deleted_rows     bigint NOT NULL DEFAULT 0,
  last_error             text
);

-- The log cleaner's claim, bookkeeping and positions, one row per topic.
-- The first nine columns are janitor_state's (the sweep machinery shares
-- them). A position is a message id: every message at or below it that the
-- cleaner could remove is gone. A pass scans from the position; what it
-- reached becomes the pending position, which turns final only once every
-- transaction running during that pass has ended (pending_xmax <= the
-- oldest running xid), because identity values are handed out before
-- commit and a transaction still open could commit a message below it.
-- The tombstone_ columns are the same for the tombstone scan.
CREATE TABLE IF NOT EXISTS {schema}.log_cleaner_state (
  topic_id               bigint PRIMARY KEY
                         REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  claimed_by             text,
  claimed_until          timestamptz,
  last_sweep_started_at  timestamptz,
  last_sweep_finished_at timestamptz,
  last_success_at        timestamptz,
  last_deleted_rows      bigint NOT NULL DEFAULT 0,
  total_deleted_rows     bigint NOT NULL DEFAULT 0,
  last_error             text,
  position               bigint NOT NULL DEFAULT 0,
  pending_position       bigint,
  pending_xmax           xid8,
  tombstone_position     bigint NOT NULL DEFAULT 0,
  tombstone_pending_position bigint,
  tombstone_pending_xmax xid8,
  last_tombstones_expired  bigint NOT NULL DEFAULT 0,
  total_tombstones_expired bigint NOT NULL DEFAULT 0,
  -- For the lag: when the last batch scanned, and the created_at of the
  -- first message it did not pass (NULL: it reached the end of the log).
  scanned_at             timestamptz,
  next_created_at        timestamptz,
  -- Keys whose head was a tombstone after the last tombstone scan.
  tombstoned_keys        bigint NOT NULL DEFAULT 0,
  -- Where the last batch of each walk got to and its snapshot's xmax, as
  -- the cleaner's functions (below) recorded them: a pending position must
  -- be one of these, so a janitor login cannot record a position its walk
  -- never reached (check_cleaner_positions). No role but the owner can
  -- write them.
  walked_position        bigint,
  walked_xmax            xid8,
  tombstone_walked_position bigint,
  tombstone_walked_xmax  xid8
);

-- Consumer positions, one row per topic, consumer and partition, created
-- by the consumer's first Poll and locked by every Poll (FOR UPDATE SKIP
-- LOCKED: instances of one consumer share the partitions). A position is a
-- snapshot, not a message id, because ids are drawn before commit and
-- transactions commit in any order: every message whose writing
-- transaction is visible in done_snapshot has been consumed. A batch is
-- what read_snapshot sees that done_snapshot did not, walked in (xid, id)
-- order; cursor_xid/cursor_id is the last message delivered from it, and
-- once it is exhausted done_snapshot takes its value. Why this never skips
-- a late commit: lib/src/consume_read.cpp.
CREATE TABLE IF NOT EXISTS {schema}.consumer_position (
  topic_id      bigint NOT NULL
                REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  consumer      text NOT NULL
                CONSTRAINT consumer_position_consumer_valid CHECK (
                  consumer COLLATE "C" ~ '^[a-z0-9][a-z0-9._-]{0,99}$'::text),
  partition     integer NOT NULL
                CONSTRAINT consumer_position_partition_range CHECK (
                  partition >= 0 AND partition < 1024),
  done_snapshot pg_snapshot NOT NULL,
  read_snapshot pg_snapshot,
  cursor_xid    xid8,
  cursor_id     bigint,
  created_at    timestamptz NOT NULL DEFAULT pg_catalog.now(),
  last_poll_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
  CONSTRAINT consumer_position_pkey PRIMARY KEY (topic_id, consumer, partition),
  CONSTRAINT consumer_position_cursor_in_window CHECK (
    (cursor_xid IS NULL) = (cursor_id IS NULL)
    AND (read_snapshot IS NOT NULL OR cursor_xid IS NULL))
);

-- Keeps a head row's created_at what its INSERT made it (the baseline
-- says immutable; the app role's column grants already leave it out, this
-- holds for every role, the owner and superusers included). Each head
-- table's trigger (sql/topic_v1.sql) runs it only WHEN created_at changes:
-- the condition is evaluated by the executor without calling a function,
-- so head advances pay almost nothing, and this function only ever raises.
CREATE OR REPLACE FUNCTION {schema}.refuse_created_at_change()
  RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $refuse_created_at_change$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = 'check_violation',
    MESSAGE = pg_catalog.format(
      'created_at of %I.%I is immutable: a head row keeps the time it was '
      'inserted (delete the row to start it over)',
      TG_TABLE_SCHEMA, TG_TABLE_NAME),
    TABLE = TG_TABLE_NAME,
    SCHEMA = TG_TABLE_SCHEMA,
    COLUMN = 'created_at';
END
$refuse_created_at_change$;

-- Keeps a stored message as it was inserted, for every role: the log is
-- append-only, and only the log cleaner deletes from it.
CREATE OR REPLACE FUNCTION {schema}.refuse_message_change()
  RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $refuse_message_change$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = 'check_violation',
    MESSAGE = pg_catalog.format(
      'messages of %I.%I are immutable: produce a new version instead',
      TG_TABLE_SCHEMA, TG_TABLE_NAME),
    TABLE = TG_TABLE_NAME,
    SCHEMA = TG_TABLE_SCHEMA;
END
$refuse_message_change$;

-- created_at, updated_at and idle_since are the server's clock: a value
-- that is infinite or ahead of the clock would keep a row from ever
-- expiring and break every reader that subtracts it. The triggers of the
-- head tables (sql/topic_v1.sql) call this only when a written value is
-- bad (their WHEN needs no function call), so it only ever raises.
CREATE OR REPLACE FUNCTION {schema}.refuse_client_timestamp()
  RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $refuse_client_timestamp$
BEGIN
  RAISE EXCEPTION USING
    ERRCODE = 'check_violation',
    MESSAGE = pg_catalog.format(
      'timestamps of %I.%I are the server''s: they cannot be infinite or '
      'ahead of its clock', TG_TABLE_SCHEMA, TG_TABLE_NAME),
    TABLE = TG_TABLE_NAME,
    SCHEMA = TG_TABLE_SCHEMA;
END
$refuse_client_timestamp$;

-- A consumer position's timestamps are the server's clock too: an app
-- login could otherwise write a last_poll_at of infinity (a consumer that
-- holds the log cleaner back for good and is never reported inactive) or
-- of -infinity (one the cleaner stops waiting for at once), or a
-- created_at ahead of the clock. Only a changed value is checked on
-- UPDATE, so a row written under a clock that ran ahead stays updatable.
CREATE OR REPLACE TRIGGER consumer_position_server_time_insert
  BEFORE INSERT ON {schema}.consumer_position
  FOR EACH ROW
  WHEN (NOT pg_catalog.isfinite(NEW.last_poll_at)
        OR NEW.last_poll_at > pg_catalog.clock_timestamp()
        OR NOT pg_catalog.isfinite(NEW.created_at)
        OR NEW.created_at > pg_catalog.clock_timestamp())
  EXECUTE FUNCTION {schema}.refuse_client_timestamp();

CREATE OR REPLACE TRIGGER consumer_position_server_time_update
  BEFORE UPDATE ON {schema}.consumer_position
  FOR EACH ROW
  WHEN ((NEW.last_poll_at IS DISTINCT FROM OLD.last_poll_at
         AND (NOT pg_catalog.isfinite(NEW.last_poll_at)
              OR NEW.last_poll_at > pg_catalog.clock_timestamp()))
        OR (NEW.created_at IS DISTINCT FROM OLD.created_at
            AND (NOT pg_catalog.isfinite(NEW.created_at)
                 OR NEW.created_at > pg_catalog.clock_timestamp())))
  EXECUTE FUNCTION {schema}.refuse_client_timestamp();

-- The log cleaner's positions move only the way its walk moves them
-- (lib/src/sweep/cleaner.cpp): a final position back (a reset, safe: the
-- walk redoes work) or forward, at most to the recorded pending position,
-- once every transaction below its xmax has ended (nothing can commit
-- below it any more); a pending position to what the cleaner's function
-- recorded as walked. Any other value would make the cleaner skip messages
-- for good.
CREATE OR REPLACE FUNCTION {schema}.check_cleaner_positions()
  RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $check_cleaner_positions$
DECLARE
  v_xmin CONSTANT xid8 :=
    pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot());
BEGIN
  -- Each test is NULL-safe: an unset pending position allows nothing.
  IF (NEW.position <= OLD.position
      OR (NEW.position <= OLD.pending_position
          AND OLD.pending_xmax <= v_xmin)) IS NOT TRUE
     OR (NEW.tombstone_position <= OLD.tombstone_position
         OR (NEW.tombstone_position <= OLD.tombstone_pending_position
             AND OLD.tombstone_pending_xmax <= v_xmin)) IS NOT TRUE
     OR (NEW.pending_position IS NULL
         OR (NEW.pending_position = OLD.pending_position
             AND NEW.pending_xmax = OLD.pending_xmax)
         OR (NEW.pending_position = OLD.walked_position
             AND NEW.pending_xmax = OLD.walked_xmax)) IS NOT TRUE
     OR (NEW.tombstone_pending_position IS NULL
         OR (NEW.tombstone_pending_position = OLD.tombstone_pending_position
             AND NEW.tombstone_pending_xmax = OLD.tombstone_pending_xmax)
         OR (NEW.tombstone_pending_position = OLD.tombstone_walked_position
             AND NEW.tombstone_pending_xmax = OLD.tombstone_walked_xmax))
        IS NOT TRUE
  THEN
    RAISE EXCEPTION USING
      ERRCODE = 'check_violation',
      MESSAGE = pg_catalog.format(
        'log_cleaner_state of topic %s: a position moves only as the log '
        'cleaner walks', OLD.topic_id),
      TABLE = TG_TABLE_NAME,
      SCHEMA = TG_TABLE_SCHEMA;
  END IF;
  RETURN NEW;
END
$check_cleaner_positions$;

CREATE OR REPLACE TRIGGER cleaner_positions
  BEFORE UPDATE ON {schema}.log_cleaner_state
  FOR EACH ROW
  WHEN (NEW.position IS DISTINCT FROM OLD.position
        OR NEW.pending_position IS DISTINCT FROM OLD.pending_position
        OR NEW.pending_xmax IS DISTINCT FROM OLD.pending_xmax
        OR NEW.tombstone_position IS DISTINCT FROM OLD.tombstone_position
        OR NEW.tombstone_pending_position
           IS DISTINCT FROM OLD.tombstone_pending_position
        OR NEW.tombstone_pending_xmax
           IS DISTINCT FROM OLD.tombstone_pending_xmax)
  EXECUTE FUNCTION {schema}.check_cleaner_positions();

-- The janitor's writes. The janitor role has no write grant on head or
-- message tables and cannot read payloads: its sweeps run these, which run
-- as the owner and delete only what the rules allow, whatever the
-- arguments: headless rows past the topic's TTL; messages out of
-- retention that are not their key's head; tombstone heads out of
-- tombstone retention (the one head write: the row turns headless). The
-- SQL is the sweeps' (their comments in lib/src/sweep/ say why each
-- clause is there); table names come from the numeric topic id only.
-- Statement timeouts and planner settings are the caller's transaction's.

-- The statement of one batch of the headless sweep
-- (lib/src/sweep/headless.cpp): $1 topic id, $2 batch size, and with
-- `p_cursor` $3, $4 the last row an earlier batch deleted. A function of
-- its own so that a test can EXPLAIN it.
CREATE OR REPLACE FUNCTION {schema}.sweep_headless_sql(p_topic_id bigint,
                                                       p_cursor boolean)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $sweep_headless_sql$
  SELECT pg_catalog.concat(
    'WITH picked AS (SELECT ctid FROM ', h.head,
    ' WHERE idle_since IS NOT NULL AND idle_since < ', h.cutoff,
    CASE WHEN p_cursor THEN
      ' AND (idle_since, message_key) > ($3::timestamptz, $4::text)' END,
    ' ORDER BY idle_since, message_key LIMIT $2 FOR UPDATE SKIP LOCKED), ',
    'gone AS (DELETE FROM ', h.head,
    ' d WHERE d.ctid = ANY (ARRAY(SELECT ctid FROM picked)) ',
    'AND d.head_id IS NULL AND d.updated_at < ', h.cutoff,
    ' RETURNING d.idle_since, d.message_key) ',
    'SELECT (SELECT pg_catalog.count(*) FROM gone), ',
    'last.idle_since::text, last.message_key FROM (SELECT 1) one ',
    'LEFT JOIN (SELECT * FROM gone ORDER BY 1 DESC, 2 DESC LIMIT 1) last ',
    'ON true')
  FROM (SELECT pg_catalog.format('%I.%I', {schema_name}::text,
                 pg_catalog.concat('compaction_head_', p_topic_id)) AS head,
               '(SELECT pg_catalog.now() - headless_ttl_ms::float8 * '
               'interval ''1 millisecond'' FROM {schema}.topic '
               'WHERE id = $1)'::text AS cutoff) h
$sweep_headless_sql$;

-- One batch of the headless sweep. The cursor only decides where the walk
-- starts.
CREATE OR REPLACE FUNCTION {schema}.sweep_headless(
    p_topic_id bigint, p_batch_size bigint, p_after_idle_since timestamptz,
    p_after_key text)
  RETURNS TABLE (deleted bigint, last_idle_since text, last_key text)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $sweep_headless$
BEGIN
  RETURN QUERY EXECUTE {schema}.sweep_headless_sql(
    p_topic_id, p_after_idle_since IS NOT NULL)
  USING p_topic_id, p_batch_size, p_after_idle_since, p_after_key;
END
$sweep_headless$;

-- The cutoff of retention column `column` of topic $1 from the server's
-- clock; the largest bigint (keep forever) is -infinity.
CREATE OR REPLACE FUNCTION {schema}.cleaner_cutoff_sql(p_column text)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_cutoff_sql$
  SELECT pg_catalog.concat('(SELECT CASE WHEN t.', p_column,
    ' = 9223372036854775807::bigint THEN ''-infinity''::timestamptz ',
    'ELSE pg_catalog.now() - t.', p_column, '::float8 * ',
    'interval ''1 millisecond'' END FROM {schema}.topic t WHERE t.id = $1)')
$cleaner_cutoff_sql$;

-- "Is message `m` its key's head", for the cleaner's statements.
CREATE OR REPLACE FUNCTION {schema}.cleaner_is_head_sql(p_head text,
                                                        p_m text)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_is_head_sql$
  SELECT pg_catalog.concat('EXISTS (SELECT 1 FROM ', p_head,
    ' h WHERE h.message_key = ', p_m, '.message_key AND h.head_id = ', p_m,
    '.id)')
$cleaner_is_head_sql$;

-- Where a walk's batch stopped: the last id passed, never below the
-- batch's start ($2). `stop` is the first id it must not pass.
CREATE OR REPLACE FUNCTION {schema}.cleaner_frontier_expr_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_frontier_expr_sql$
  SELECT 'CASE WHEN (SELECT id FROM stop) IS NULL '
    'THEN coalesce((SELECT max(id) FROM scan), $2::bigint) '
    'ELSE greatest($2::bigint, (SELECT id FROM stop) - 1) END'::text
$cleaner_frontier_expr_sql$;

-- A created_at this far past the server's clock was planted (the column is
-- the server's; a concurrent producer's is at most a batch ahead): such a
-- message is never due, so the walks pass it instead of stopping before it
-- (an 'infinity' row would stop the cleaner for good). It is kept: neither
-- walk nor the older-versions lookup deletes it.
CREATE OR REPLACE FUNCTION {schema}.cleaner_future_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_future_sql$
  SELECT 'pg_catalog.now() + interval ''1 hour'''::text
$cleaner_future_sql$;

-- Consumers (lib/src/consume_read.cpp): tombstones, and messages without a
-- key or without compaction, wait until every active consumer of the topic
-- (last Poll within consumer_inactive_after) has consumed them. Keyed
-- compacted messages that are not their key's head go all the same: the
-- consumer reads the key's newer version. `waiting` is the positions of the
-- active consumers, a handful of rows per partition.
CREATE OR REPLACE FUNCTION {schema}.cleaner_waiting_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_waiting_sql$
  SELECT 'waiting AS MATERIALIZED (SELECT p.partition, p.done_snapshot, '
    'p.read_snapshot, p.cursor_xid, p.cursor_id FROM '
    '{schema}.consumer_position p WHERE p.topic_id = $1 AND p.consumer IN '
    '(SELECT q.consumer FROM {schema}.consumer_position q JOIN '
    '{schema}.topic t ON t.id = q.topic_id WHERE q.topic_id = $1 GROUP BY '
    'q.consumer, t.consumer_inactive_after_ms HAVING '
    'pg_catalog.max(q.last_poll_at) > pg_catalog.now() - '
    't.consumer_inactive_after_ms::float8 * interval ''1 millisecond'')), '::text
$cleaner_waiting_sql$;

-- "Some active consumer has not consumed message `m`": a position has
-- consumed it when its writer is visible in the done snapshot, or in the
-- window being walked at or before the cursor.
CREATE OR REPLACE FUNCTION {schema}.cleaner_held_sql(p_m text)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_held_sql$
  SELECT pg_catalog.concat('EXISTS (SELECT 1 FROM waiting w WHERE ',
    'w.partition = ', p_m, '.partition AND NOT ',
    'pg_catalog.pg_visible_in_snapshot(', p_m, '.xid, w.done_snapshot) ',
    'AND NOT coalesce(pg_catalog.pg_visible_in_snapshot(', p_m,
    '.xid, w.read_snapshot) AND (', p_m, '.xid, ', p_m,
    '.id) <= (w.cursor_xid, w.cursor_id), false))')
$cleaner_held_sql$;

-- The frontier columns of both walks: the frontier, whether the batch was
-- full, the snapshot's xmax.
CREATE OR REPLACE FUNCTION {schema}.cleaner_frontier_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_frontier_sql$
  SELECT pg_catalog.concat({schema}.cleaner_frontier_expr_sql(), ', '
    '(SELECT pg_catalog.count(*) FROM scan) = $3::bigint '
    'AND (SELECT id FROM stop) IS NULL, '
    'pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot())')
$cleaner_frontier_sql$;

-- One batch of the tombstone walk (CleanerBatches::TombstoneStep). It
-- starts at `p_after`, which may not lie beyond where this walk got to
-- (its final position or what it recorded as walked), and records where it
-- got to. An expiring tombstone takes along its key's older messages that
-- are out of retention (`older`): the message walk removes a superseded
-- message only when it meets the message or a newer one of its key above
-- its position, and a value it passed while that value was the head would
-- otherwise stay once the tombstone is gone, the deleted value readable in
-- the key's history for good. A tombstone whose older messages are not all
-- locked here waits, as one whose head row is locked does, and so does one
-- with an older message still inside retention (walked while it was the
-- head under a shorter retention, raised since): expiring it would leave
-- that message with nothing to name it. They are kept as
-- arrays on the tombstone's own row: CTEs have no statistics, and a join
-- between two of them is planned as a nested loop, quadratic in the batch
-- (46 s for a batch of 1,000 tombstones).
CREATE OR REPLACE FUNCTION {schema}.clean_tombstones(
    p_topic_id bigint, p_after bigint, p_batch_size bigint)
  RETURNS TABLE (deleted bigint, expired bigint, frontier bigint,
                 full_batch boolean, snapshot_xmax xid8)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $clean_tombstones$
DECLARE
  v_head CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id));
  v_message CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('message_', p_topic_id));
  v_cutoff CONSTANT text := {schema}.cleaner_cutoff_sql('retention_ms');
  v_walked bigint;
BEGIN
  -- The message walk's reach: the older messages an expiring tombstone
  -- takes along are the ones that walk has passed (it removes the others
  -- itself when it reaches them), a few per key, so the batch stays bounded
  -- however many versions of a hot key wait above the walk. Retention kept
  -- forever keeps every version: none is taken along and none waited for
  -- (0: ids start at 1), or a tombstone whose key had a walked value would
  -- wait for good (the message walk no longer runs) and stop the walk.
  SELECT CASE WHEN t.retention_ms = 9223372036854775807::bigint THEN 0
              ELSE greatest(c.position, c.walked_position) END
  INTO v_walked
  FROM {schema}.log_cleaner_state c
  JOIN {schema}.topic t ON t.id = c.topic_id
  WHERE c.topic_id = p_topic_id
    AND p_after <= greatest(c.tombstone_position,
                            c.tombstone_walked_position);
  IF NOT FOUND THEN
    RAISE EXCEPTION USING
      ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format('topic %s: the tombstone walk has not '
                                  'reached %s', p_topic_id, p_after);
  END IF;
  -- A tombstone a consumer still has to see stops the walk as one inside
  -- its retention does.
  EXECUTE pg_catalog.concat(
    'WITH ', {schema}.cleaner_waiting_sql(),
    'scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at < ',
    {schema}.cleaner_cutoff_sql('tombstone_retention_ms'), ' AS old, ',
    'm.created_at > ', {schema}.cleaner_future_sql(), ' AS future, ',
    {schema}.cleaner_held_sql('m'), ' AS held FROM ',
    v_message, ' m WHERE m.payload IS NULL AND m.id > $2::bigint ',
    'ORDER BY m.id LIMIT $3::bigint), ',
    'young AS (SELECT pg_catalog.min(id) AS id FROM scan ',
    'WHERE (NOT old AND NOT future) OR held), ',
    'due AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s ',
    'WHERE s.old AND s.id < coalesce((SELECT id FROM young), ',
    '9223372036854775807::bigint) AND ',
    {schema}.cleaner_is_head_sql(v_head, 's'), '), ',
    'older AS MATERIALIZED (SELECT d.id, d.message_key, c.ids, c.young, ',
    'ARRAY(SELECT m.id FROM ', v_message, ' m WHERE m.id = ANY (c.ids) ',
    'FOR UPDATE SKIP LOCKED) AS locked_ids FROM due d CROSS JOIN LATERAL ',
    '(SELECT coalesce(pg_catalog.array_agg(o.id), ''{}'') AS ids, ',
    'coalesce(pg_catalog.bool_or(o.created_at >= ', v_cutoff,
    '), false) AS young FROM ', v_message,
    ' o WHERE o.message_key = d.message_key AND o.id < d.id ',
    'AND o.id <= $4::bigint AND o.created_at <= ',
    {schema}.cleaner_future_sql(), ' AND (o.compaction_rank IS NOT NULL ',
    'OR NOT ', {schema}.cleaner_held_sql('o'), ')) c), ',
    'ready AS MATERIALIZED (SELECT o.id, o.message_key FROM older o ',
    'WHERE NOT o.young AND ',
    'pg_catalog.cardinality(o.locked_ids) = pg_catalog.cardinality(o.ids)), ',
    'locked AS MATERIALIZED (SELECT h.message_key, h.head_id FROM ', v_head,
    ' h WHERE h.message_key = ANY (ARRAY(SELECT message_key FROM ready)) ',
    'AND h.head_id = ANY (ARRAY(SELECT id FROM ready)) ',
    'FOR UPDATE OF h SKIP LOCKED), ',
    'expired AS (UPDATE ', v_head, ' u SET head_id = NULL, ',
    'schema_version = NULL, compaction_rank = NULL, ',
    'updated_at = pg_catalog.now(), idle_since = pg_catalog.now() ',
    'FROM locked l WHERE u.message_key = l.message_key ',
    'AND u.head_id = l.head_id RETURNING l.head_id AS id), ',
    'gone AS (DELETE FROM ', v_message,
    ' d WHERE d.id = ANY (ARRAY(SELECT id FROM expired UNION ALL ',
    'SELECT pg_catalog.unnest(o.ids) FROM older o ',
    'WHERE o.id = ANY (ARRAY(SELECT id FROM expired)))) RETURNING d.id), ',
    'stop AS (SELECT least((SELECT id FROM young), ',
    '(SELECT pg_catalog.min(x.id) FROM (SELECT id FROM due EXCEPT ',
    'SELECT head_id FROM locked) x)) AS id) ',
    'SELECT (SELECT pg_catalog.count(*) FROM gone), ',
    '(SELECT pg_catalog.count(*) FROM expired), ',
    {schema}.cleaner_frontier_sql())
  INTO deleted, expired, frontier, full_batch, snapshot_xmax
  USING p_topic_id, p_after, p_batch_size, v_walked;
  UPDATE {schema}.log_cleaner_state c
  SET tombstone_walked_position = frontier,
      tombstone_walked_xmax = snapshot_xmax
  WHERE c.topic_id = p_topic_id;
  RETURN NEXT;
END
$clean_tombstones$;

-- One batch of the message walk (CleanerBatches::MessageStep), with the
-- same rule for `p_after`. next_created_at, for the lag
-- (TopicStats::cleaner_lag): the created_at of the first message past where
-- this batch left the walk that is either removable (out of retention, not
-- its key's head) or not yet due, skipping heads and planted future rows,
-- among at most 1,000 messages. Lazily evaluated (no MATERIALIZED): one
-- descent of the primary key and one head lookup per row read, stopping at
-- the first match, which is the next row of a backlog. NULL when the log
-- ends or 1,000 heads come first: the lag then reads from the batch's time,
-- a lower bound, until the walk gets past them. Rows this statement deletes
-- are all at or below the frontier, so its snapshot seeing them does not
-- matter.
CREATE OR REPLACE FUNCTION {schema}.clean_messages(
    p_topic_id bigint, p_after bigint, p_batch_size bigint)
  RETURNS TABLE (deleted bigint, frontier bigint, full_batch boolean,
                 snapshot_xmax xid8, next_created_at text)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $clean_messages$
DECLARE
  v_head CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id));
  v_message CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('message_', p_topic_id));
  v_cutoff CONSTANT text := {schema}.cleaner_cutoff_sql('retention_ms');
BEGIN
  PERFORM FROM {schema}.log_cleaner_state c
  WHERE c.topic_id = p_topic_id
    AND p_after <= greatest(c.position, c.walked_position);
  IF NOT FOUND THEN
    RAISE EXCEPTION USING
      ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format('topic %s: the message walk has not '
                                  'reached %s', p_topic_id, p_after);
  END IF;
  -- A message retention would remove but a consumer still has to see
  -- stops the walk as one inside its retention does.
  EXECUTE pg_catalog.concat(
    'WITH ', {schema}.cleaner_waiting_sql(),
    'scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at, ',
    'm.created_at < ', v_cutoff, ' AS old, m.created_at > ',
    {schema}.cleaner_future_sql(), ' AS future, ',
    '(m.message_key IS NULL OR m.compaction_rank IS NULL) AND ',
    {schema}.cleaner_held_sql('m'), ' AS held FROM ', v_message,
    ' m WHERE m.id > $2::bigint ORDER BY m.id LIMIT $3::bigint), ',
    'young AS (SELECT pg_catalog.min(id) AS id FROM scan ',
    'WHERE (NOT old AND NOT future) OR held), ',
    'considered AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s ',
    'WHERE s.old AND s.id < coalesce((SELECT id FROM young), ',
    '9223372036854775807::bigint)), ',
    'cand AS MATERIALIZED (SELECT c.id FROM considered c WHERE NOT ',
    {schema}.cleaner_is_head_sql(v_head, 'c'),
    ' UNION SELECT o.id FROM (SELECT DISTINCT message_key FROM ',
    'considered WHERE message_key IS NOT NULL) k CROSS JOIN LATERAL ',
    '(SELECT o.id FROM ', v_message,
    ' o WHERE o.message_key = k.message_key AND o.id <= $2::bigint ',
    'AND o.created_at < ', v_cutoff, ' AND NOT ',
    {schema}.cleaner_is_head_sql(v_head, 'o'),
    ' AND (o.compaction_rank IS NOT NULL OR NOT ',
    {schema}.cleaner_held_sql('o'), ')) o), ',
    'locked AS MATERIALIZED (SELECT m.id FROM ', v_message,
    ' m WHERE m.id = ANY (ARRAY(SELECT id FROM cand)) ',
    'FOR UPDATE SKIP LOCKED), ',
    'gone AS (DELETE FROM ', v_message,
    ' d WHERE d.id = ANY (ARRAY(SELECT id FROM locked)) RETURNING d.id), ',
    'stop AS (SELECT least((SELECT id FROM young), ',
    '(SELECT pg_catalog.min(x.id) FROM (SELECT id FROM cand EXCEPT ',
    'SELECT id FROM locked) x)) AS id) ',
    'SELECT (SELECT pg_catalog.count(*) FROM gone), ',
    {schema}.cleaner_frontier_sql(),
    ', (SELECT p.created_at::text FROM (SELECT n.id, n.message_key, ',
    'n.created_at FROM ', v_message, ' n WHERE n.id > (',
    {schema}.cleaner_frontier_expr_sql(), ') ORDER BY n.id LIMIT 1000) p ',
    'WHERE p.created_at <= ', {schema}.cleaner_future_sql(),
    ' AND (p.created_at >= ', v_cutoff, ' OR NOT ',
    {schema}.cleaner_is_head_sql(v_head, 'p'), ') ORDER BY p.id LIMIT 1)')
  INTO deleted, frontier, full_batch, snapshot_xmax, next_created_at
  USING p_topic_id, p_after, p_batch_size;
  UPDATE {schema}.log_cleaner_state c
  SET walked_position = frontier, walked_xmax = snapshot_xmax
  WHERE c.topic_id = p_topic_id;
  RETURN NEXT;
END
$clean_messages$;

-- Keys whose head is a tombstone above `p_after`, up to `p_limit`
-- (CleanerBatches::CountTombstonedKeys): it reads whether a payload is
-- NULL, which the janitor role may not read itself.
CREATE OR REPLACE FUNCTION {schema}.count_tombstoned_keys(
    p_topic_id bigint, p_after bigint, p_limit bigint)
  RETURNS bigint
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $count_tombstoned_keys$
DECLARE
  v_count bigint;
BEGIN
  EXECUTE pg_catalog.concat(
    'SELECT pg_catalog.count(*) FROM (SELECT FROM ',
    pg_catalog.format('%I.%I', {schema_name}::text,
                      pg_catalog.concat('message_', p_topic_id)),
    ' m WHERE m.payload IS NULL AND m.id > $1::bigint AND ',
    {schema}.cleaner_is_head_sql(
      pg_catalog.format('%I.%I', {schema_name}::text,
                        pg_catalog.concat('compaction_head_', p_topic_id)),
      'm'),
    ' LIMIT $2::bigint) k')
  INTO v_count
  USING p_after, p_limit;
  RETURN v_count;
END
$count_tombstoned_keys$;

-- Grants the roles of sql/roles_v1.sql their privileges on one topic's
-- tables. A no-op until roles_v1.sql replaces it with the real grants.
CREATE OR REPLACE FUNCTION {schema}.grant_topic(p_topic_id bigint)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $grant_topic$
BEGIN
END
$grant_topic$;

-- Turns a new topic's tables into the layout of the installed profile. A
-- no-op on one PostgreSQL; sql/citus_v1.sql replaces it with the
-- distribution.
CREATE OR REPLACE FUNCTION {schema}.distribute_topic(
    p_topic_id bigint, p_partitions integer)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $distribute_topic$
BEGIN
END
$distribute_topic$;

-- Topic registration: upserts the topic row and, when it is new, creates
-- its tables from the topic baseline, records their version, adds the
-- janitor bookkeeping row and grants the shipped roles their privileges.
-- SECURITY DEFINER: it runs as its owner (the owner role, once
-- roles_v1.sql ran), so a role allowed to EXECUTE it registers topics
-- without any DDL privilege of its own. Its search_path is pinned, so no
-- object a caller planted anywhere can stand in for ours.
--
-- Every setting parameter is optional: NULL gives a new topic the column's
-- default and leaves an existing topic's value as it is, so an application
-- registering at every start never resets what an operator set. A setting
-- of an existing topic that differs from the stored one is refused
-- (42501): this runs as the owner for every caller, so it cannot tell the
-- application role from the owner. The owner changes settings with an
-- UPDATE of the topic row (the library does that before calling this), and
-- may grant that UPDATE to another role. A new setting is one more
-- parameter, one more coalesce() line and one more comparison below.
--
-- A concurrent registration of the same name waits on the topic's unique
-- index and then takes the update branch, so the DDL runs once; either
-- branch leaves the row locked by this transaction for the settings update.
-- `version` and `fingerprint` are the recorded topic baseline's (NULL when
-- missing): the library refuses a topic created from another baseline.
-- p_partitions is fixed at creation: a different value for an existing
-- topic is refused (SQLSTATE 22023) before anything changes.
CREATE OR REPLACE FUNCTION {schema}.register_topic(
    p_name text, p_headless_ttl_ms bigint, p_retention_ms bigint,
    p_tombstone_retention_ms bigint, p_partitions integer DEFAULT NULL,
    p_consumer_inactive_after_ms bigint DEFAULT NULL)
  RETURNS TABLE (id bigint, name text, headless_ttl_ms bigint,
                 retention_ms bigint, tombstone_retention_ms bigint,
                 inserted boolean, version integer, fingerprint text,
                 partitions integer, consumer_inactive_after_ms bigint)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $register_topic$
#variable_conflict use_column
DECLARE
  -- The topic baseline with its placeholders: {id} is replaced first (a
  -- number), then the schema, so a schema name containing "{id}" stays
  -- intact. The second token is spelled in two pieces so that the
  -- install-time substitution of this file leaves it alone.
  v_template CONSTANT text := {topic_v1};
  v_schema CONSTANT text := pg_catalog.quote_ident({schema_name}::text);
BEGIN
  -- Only the name: a new row takes every setting's column default.
  INSERT INTO {schema}.topic AS t (name, partitions)
  VALUES (p_name, coalesce(p_partitions, 1))
  -- The proposed row's default, which is now(): Citus allows only IMMUTABLE
  -- functions in DO UPDATE SET.
  ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at
  RETURNING t.id, t.name, t.headless_ttl_ms, t.retention_ms,
            t.tombstone_retention_ms, t.xmax = '0'::xid, t.partitions,
            t.consumer_inactive_after_ms
  INTO id, name, headless_ttl_ms, retention_ms, tombstone_retention_ms,
       inserted, partitions, consumer_inactive_after_ms;
  IF p_partitions IS NOT NULL AND p_partitions <> partitions THEN
    RAISE EXCEPTION USING
      ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format(
        'topic %s has %s partitions, fixed at its creation; %s requested',
        name, partitions, p_partitions);
  END IF;
  IF NOT inserted
     AND (p_headless_ttl_ms <> headless_ttl_ms
          OR p_retention_ms <> retention_ms
          OR p_tombstone_retention_ms <> tombstone_retention_ms
          OR p_consumer_inactive_after_ms <> consumer_inactive_after_ms) THEN
    RAISE EXCEPTION USING
      ERRCODE = 'insufficient_privilege',
      MESSAGE = pg_catalog.format(
        'register_topic does not change the settings of existing topic %s',
        pg_catalog.quote_literal(p_name)),
      HINT = 'Change them as the owner role (compactiond topic register as '
             'the owner, or UPDATE the topic row).';
  END IF;
  -- A new topic's settings; the row is ours (inserted above).
  IF inserted AND (p_headless_ttl_ms IS NOT NULL OR p_retention_ms IS NOT NULL
                   OR p_tombstone_retention_ms IS NOT NULL
                   OR p_consumer_inactive_after_ms IS NOT NULL) THEN
    UPDATE {schema}.topic AS t
    SET headless_ttl_ms = coalesce(p_headless_ttl_ms, t.headless_ttl_ms),
        retention_ms = coalesce(p_retention_ms, t.retention_ms),
        tombstone_retention_ms = coalesce(p_tombstone_retention_ms,
                                          t.tombstone_retention_ms),
        consumer_inactive_after_ms = coalesce(p_consumer_inactive_after_ms,
                                              t.consumer_inactive_after_ms),
        updated_at = pg_catalog.now()
    WHERE t.id = register_topic.id
    RETURNING t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms,
              t.consumer_inactive_after_ms
    INTO headless_ttl_ms, retention_ms, tombstone_retention_ms,
         consumer_inactive_after_ms;
  END IF;
  IF inserted THEN
    EXECUTE pg_catalog.replace(pg_catalog.replace(
      pg_catalog.replace(v_template, '{id}'::text, id::text),
      '{partitions}'::text, partitions::text),
      pg_catalog.concat('{', 'schema}'), v_schema);
    PERFORM {schema}.distribute_topic(id, partitions);
    version := 1;
    fingerprint := {topic_fingerprint};
    INSERT INTO {schema}.schema_version (topic_id, version, fingerprint)
    VALUES (id, version, fingerprint);
    INSERT INTO {schema}.janitor_state (topic_id) VALUES (id);
    INSERT INTO {schema}.log_cleaner_state (topic_id) VALUES (id);
    PERFORM {schema}.grant_topic(id);
  ELSE
    SELECT v.version, v.fingerprint INTO version, fingerprint
    FROM {schema}.schema_version v WHERE v.topic_id = id;
  END IF;
  -- Tells LISTENing daemons that the topic set changed; sent on commit.
  PERFORM pg_catalog.pg_notify('compaction_topics',
    pg_catalog.json_build_object('schema', {schema_name}::text,
                                 'topic', name,
                                 'event', 'registered'::text)::text);
  RETURN NEXT;
END
$register_topic$;

-- Consumer lag for the stats (monitor role: it reads no message table).
-- Per topic and consumer: its partitions, how many committed messages it
-- has not consumed (counted exactly up to p_cap per partition; capped
-- says some partition reached it), the oldest such message's created_at
-- (the oldest of those counted), its last Poll and whether that is past
-- the topic's consumer_inactive_after. Numbers and names only: no key or
-- payload leaves. Each partition's scan is a range of the consumers'
-- (partition, xid, id) index from the done snapshot's xmin, at most p_cap
-- rows; a topic whose message table is missing is skipped.
CREATE OR REPLACE FUNCTION {schema}.consumer_lag(p_cap bigint)
  RETURNS TABLE (topic text, consumer text, partitions integer,
                 lag_messages bigint, capped boolean,
                 oldest_created_at timestamptz, last_poll_at timestamptz,
                 inactive boolean)
  LANGUAGE plpgsql
  STABLE
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $consumer_lag$
DECLARE
  r record;
BEGIN
  IF p_cap IS NULL OR p_cap < 1 THEN
    RAISE EXCEPTION USING
      ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format('consumer_lag: cap must be >= 1, got %s',
                                  p_cap);
  END IF;
  FOR r IN
    SELECT t.id, t.name, p.consumer,
           pg_catalog.count(*)::integer AS parts,
           pg_catalog.max(p.last_poll_at) AS last_poll,
           pg_catalog.max(p.last_poll_at) <= pg_catalog.now() -
             t.consumer_inactive_after_ms::float8 * interval '1 millisecond'
             AS is_inactive
    FROM {schema}.consumer_position p
    JOIN {schema}.topic t ON t.id = p.topic_id
    GROUP BY t.id, t.name, p.consumer, t.consumer_inactive_after_ms
    ORDER BY t.name, p.consumer
  LOOP
    IF pg_catalog.to_regclass(pg_catalog.format('%I.%I', {schema_name}::text,
         pg_catalog.concat('message_', r.id))) IS NULL THEN
      CONTINUE;
    END IF;
    topic := r.name;
    consumer := r.consumer;
    partitions := r.parts;
    last_poll_at := r.last_poll;
    inactive := r.is_inactive;
    -- A Destroy that commits after the check above drops the table while
    -- the count waits for its lock: that topic is skipped, as it would
    -- have been a moment later, not every topic's lag lost with it.
    BEGIN
    EXECUTE pg_catalog.concat(
      'SELECT coalesce(pg_catalog.sum(x.n), 0)::bigint, ',
      'coalesce(pg_catalog.bool_or(x.n >= $3), false), ',
      'pg_catalog.min(x.oldest) FROM {schema}.consumer_position w ',
      'CROSS JOIN LATERAL (SELECT pg_catalog.count(*) AS n, ',
      'pg_catalog.min(s.created_at) AS oldest FROM (SELECT m.created_at ',
      'FROM ', pg_catalog.format('%I.%I', {schema_name}::text,
                                 pg_catalog.concat('message_', r.id)),
      ' m WHERE m.partition = w.partition ',
      'AND m.xid >= pg_catalog.pg_snapshot_xmin(w.done_snapshot) ',
      'AND NOT pg_catalog.pg_visible_in_snapshot(m.xid, w.done_snapshot) ',
      'AND NOT coalesce(pg_catalog.pg_visible_in_snapshot(m.xid, ',
      'w.read_snapshot) AND (m.xid, m.id) <= (w.cursor_xid, w.cursor_id), ',
      'false) ORDER BY m.xid, m.id LIMIT $3) s) x ',
      'WHERE w.topic_id = $1 AND w.consumer = $2')
      INTO lag_messages, capped, oldest_created_at
      USING r.id, r.consumer, p_cap;
    EXCEPTION WHEN undefined_table THEN
      CONTINUE;
    END;
    RETURN NEXT;
  END LOOP;
END
$consumer_lag$;

-- Functions are executable by PUBLIC by default; registration is granted
-- explicitly (to the application role by roles_v1.sql).
REVOKE ALL ON FUNCTION
  {schema}.register_topic(text, bigint, bigint, bigint, integer, bigint)
  FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.grant_topic(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.distribute_topic(bigint, integer)
  FROM PUBLIC;
-- A trigger runs its function without checking EXECUTE: nobody needs it.
REVOKE ALL ON FUNCTION {schema}.refuse_created_at_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.refuse_message_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.refuse_client_timestamp() FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.check_cleaner_positions() FROM PUBLIC;
-- The monitor's (granted by roles_v1.sql).
REVOKE ALL ON FUNCTION {schema}.consumer_lag(bigint) FROM PUBLIC;
-- The janitor's (granted by roles_v1.sql).
REVOKE ALL ON FUNCTION
  {schema}.sweep_headless(bigint, bigint, timestamptz, text),
  {schema}.clean_tombstones(bigint, bigint, bigint),
  {schema}.clean_messages(bigint, bigint, bigint),
  {schema}.count_tombstoned_keys(bigint, bigint, bigint) FROM PUBLIC;
