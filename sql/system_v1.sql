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

-- Baseline versions: topic_id NULL is the system baseline, otherwise the
-- baseline the topic's generated tables were created from. Pre-v1 a
-- baseline changes in place under the same version number, so the library
-- also records a fingerprint (a hash of the baseline's SQL text) and
-- refuses a database whose fingerprint is not its own.
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
  topic_id     bigint REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  version      integer NOT NULL,
  fingerprint  text NOT NULL,
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
  tombstoned_keys        bigint NOT NULL DEFAULT 0
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
-- registering at every start never resets what an operator set. A new
-- setting is one more parameter and one more coalesce() line below.
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
  ON CONFLICT (name) DO UPDATE SET updated_at = pg_catalog.now()
  RETURNING t.id, t.name, t.headless_ttl_ms, t.retention_ms,
            t.tombstone_retention_ms, t.xmax = '0'::xid, t.partitions
  INTO id, name, headless_ttl_ms, retention_ms, tombstone_retention_ms,
       inserted, partitions;
  IF p_partitions IS NOT NULL AND p_partitions <> partitions THEN
    RAISE EXCEPTION USING
      ERRCODE = 'invalid_parameter_value',
      MESSAGE = pg_catalog.format(
        'topic %s has %s partitions, fixed at its creation; %s requested',
        name, partitions, p_partitions);
  END IF;
  -- The settings the caller set; the row is ours (inserted or locked above).
  IF p_headless_ttl_ms IS NOT NULL OR p_retention_ms IS NOT NULL
     OR p_tombstone_retention_ms IS NOT NULL
     OR p_consumer_inactive_after_ms IS NOT NULL THEN
    UPDATE {schema}.topic AS t
    SET headless_ttl_ms = coalesce(p_headless_ttl_ms, t.headless_ttl_ms),
        retention_ms = coalesce(p_retention_ms, t.retention_ms),
        tombstone_retention_ms = coalesce(p_tombstone_retention_ms,
                                          t.tombstone_retention_ms),
        consumer_inactive_after_ms = coalesce(p_consumer_inactive_after_ms,
                                              t.consumer_inactive_after_ms),
        updated_at = pg_catalog.now()
    WHERE t.id = register_topic.id
    RETURNING t.headless_ttl_ms, t.retention_ms, t.tombstone_retention_ms
    INTO headless_ttl_ms, retention_ms, tombstone_retention_ms;
  END IF;
  SELECT t.consumer_inactive_after_ms INTO consumer_inactive_after_ms
  FROM {schema}.topic t WHERE t.id = register_topic.id;
  IF inserted THEN
    EXECUTE pg_catalog.replace(pg_catalog.replace(
      pg_catalog.replace(v_template, '{id}'::text, id::text),
      '{partitions}'::text, partitions::text),
      pg_catalog.concat('{', 'schema}'), v_schema);
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

-- Functions are executable by PUBLIC by default; registration is granted
-- explicitly (to the application role by roles_v1.sql).
REVOKE ALL ON FUNCTION
  {schema}.register_topic(text, bigint, bigint, bigint, integer, bigint)
  FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.grant_topic(bigint) FROM PUBLIC;
-- A trigger runs its function without checking EXECUTE: nobody needs it.
REVOKE ALL ON FUNCTION {schema}.refuse_created_at_change() FROM PUBLIC;
REVOKE ALL ON FUNCTION {schema}.refuse_message_change() FROM PUBLIC;
