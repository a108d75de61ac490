-- Least-privilege roles of libcompaction, v1.
--
-- Placeholders, substituted by the library in one pass (none is spelled out
-- in a comment):
--   schema        (in braces) the quoted schema identifier
--   schema_name   (in braces) the schema name as a string literal
--   owner_role, app_role, janitor_role, monitor_role  (in braces) the
--                 quoted role names; the library takes them from a prefix
--                 (the schema name by default): <prefix>_owner, _app,
--                 _janitor, _monitor, each [a-z0-9_] only.
--
-- Run by a superuser, after the system baseline (system_v1.sql), in one
-- transaction. Idempotent: run it again at any time, also after topics
-- exist; it creates what is missing and (re)grants what each role needs.
--
-- The roles (all NOLOGIN: grant them to login roles):
--   owner    owns the schema, every table in it and the functions. Only
--            a member of it can drop a topic (Destroy) or change tables.
--   app      reads messages and heads, produces, locks heads (SELECT ...
--            FOR UPDATE), consumes (creates, locks and moves consumer
--            positions), registers topics through register_topic. No
--            DELETE, TRUNCATE or DDL; it cannot rewrite a head row's key
--            or creation time.
--   janitor  the daemon: sweeps headless rows (SELECT, DELETE on head
--            tables), cleans the log (reads the message columns it needs,
--            payload only to tell a tombstone, and DELETE on messages;
--            turns a tombstoned head headless: UPDATE of the head columns)
--            and keeps janitor_state and log_cleaner_state. No DDL, no
--            TRUNCATE, no INSERT anywhere, and messages stay immutable (a
--            trigger refuses every UPDATE).
--   monitor  stats only: the topic list, versions, janitor_state,
--            log_cleaner_state, consumer positions and the idle_since
--            column of head tables.
--            No message tables, no keys.
-- app and janitor are members of monitor: the daemon exports stats, and an
-- application may read a topic's stats.
--
-- Per-topic tables are granted by grant_topic(), which register_topic
-- calls for every new topic. Default privileges would not do: they cannot
-- tell a message table from a head table, and the roles need different
-- rights on each.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

DO $create_roles$
BEGIN
  IF pg_catalog.to_regrole('{owner_role}') IS NULL THEN
    CREATE ROLE {owner_role} NOLOGIN;
  END IF;
  IF pg_catalog.to_regrole('{app_role}') IS NULL THEN
    CREATE ROLE {app_role} NOLOGIN;
  END IF;
  IF pg_catalog.to_regrole('{janitor_role}') IS NULL THEN
    CREATE ROLE {janitor_role} NOLOGIN;
  END IF;
  IF pg_catalog.to_regrole('{monitor_role}') IS NULL THEN
    CREATE ROLE {monitor_role} NOLOGIN;
  END IF;
END
$create_roles$;

GRANT {monitor_role} TO {app_role}, {janitor_role};

-- The per-topic grants (replaces the no-op of the system baseline). Runs
-- as register_topic's owner, who owns the tables. A topic whose tables are
-- missing (a row typed in by hand) is skipped, not an error.
CREATE OR REPLACE FUNCTION {schema}.grant_topic(p_topic_id bigint)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $grant_topic$
DECLARE
  v_message CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('message_', p_topic_id));
  v_head CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id));
BEGIN
  IF pg_catalog.to_regclass(v_message) IS NULL
     OR pg_catalog.to_regclass(v_head) IS NULL THEN
    RETURN;
  END IF;
  EXECUTE pg_catalog.concat('GRANT SELECT, INSERT ON ', v_message,
                            ' TO {app_role}');
  -- Produce upserts heads and the lock loop inserts and refreshes headless
  -- rows; message_key and created_at never change after the insert.
  -- FOR UPDATE needs UPDATE on some column, which these grant.
  EXECUTE pg_catalog.concat('GRANT SELECT, INSERT, UPDATE (head_id, ',
    'schema_version, compaction_rank, updated_at, idle_since) ON ', v_head,
    ' TO {app_role}');
  -- The sweep picks rows FOR UPDATE SKIP LOCKED, which needs UPDATE on some
  -- column. The cleaner's tombstone step turns a head headless: the head
  -- columns, updated_at and idle_since (never message_key or created_at).
  EXECUTE pg_catalog.concat('GRANT SELECT, DELETE, UPDATE (head_id, ',
    'schema_version, compaction_rank, updated_at, idle_since) ON ', v_head,
    ' TO {janitor_role}');
  -- The cleaner locks the messages it deletes (FOR UPDATE SKIP LOCKED needs
  -- an UPDATE grant; the message_immutable trigger refuses every actual
  -- UPDATE). It reads payload only as "IS NULL" (is it a tombstone).
  -- xid and partition: whether an active consumer still waits for a
  -- message (guarantee of tombstones and retention).
  EXECUTE pg_catalog.concat('GRANT SELECT (id, message_key, ',
    'compaction_rank, created_at, payload, xid, partition), DELETE, ',
    'UPDATE (created_at) ON ',
    v_message, ' TO {janitor_role}');
  EXECUTE pg_catalog.concat('GRANT SELECT (idle_since) ON ', v_head,
                            ' TO {monitor_role}');
END
$grant_topic$;

-- The owner role owns everything, whoever installed it: the schema, every
-- table (with its indexes and identity sequence) and the functions.
ALTER SCHEMA {schema} OWNER TO {owner_role};

DO $transfer_tables$
DECLARE
  v_table regclass;
BEGIN
  FOR v_table IN
    SELECT c.oid::regclass FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = {schema_name}::name AND c.relkind = 'r'::"char"
      AND c.relowner <> '{owner_role}'::regrole::oid
  LOOP
    EXECUTE pg_catalog.concat('ALTER TABLE ', v_table::text,
                              ' OWNER TO {owner_role}');
  END LOOP;
END
$transfer_tables$;

ALTER FUNCTION
  {schema}.register_topic(text, bigint, bigint, bigint, integer, bigint)
  OWNER TO {owner_role};
ALTER FUNCTION {schema}.grant_topic(bigint) OWNER TO {owner_role};
ALTER FUNCTION {schema}.refuse_created_at_change() OWNER TO {owner_role};
ALTER FUNCTION {schema}.refuse_message_change() OWNER TO {owner_role};

GRANT USAGE ON SCHEMA {schema} TO {app_role}, {janitor_role}, {monitor_role};
GRANT SELECT ON {schema}.topic, {schema}.schema_version
  TO {app_role}, {janitor_role}, {monitor_role};
GRANT SELECT ON {schema}.janitor_state, {schema}.log_cleaner_state
  TO {monitor_role};
-- The claim, its renewal and the sweep's record; never topic_id.
GRANT UPDATE (claimed_by, claimed_until, last_sweep_started_at,
              last_sweep_finished_at, last_success_at, last_deleted_rows,
              total_deleted_rows, last_error)
  ON {schema}.janitor_state TO {janitor_role};
-- The same for the cleaner, plus its positions and counters.
GRANT UPDATE (claimed_by, claimed_until, last_sweep_started_at,
              last_sweep_finished_at, last_success_at, last_deleted_rows,
              total_deleted_rows, last_error, position, pending_position,
              pending_xmax, tombstone_position, tombstone_pending_position,
              tombstone_pending_xmax, last_tombstones_expired,
              total_tombstones_expired, scanned_at, next_created_at,
              tombstoned_keys)
  ON {schema}.log_cleaner_state TO {janitor_role};
GRANT EXECUTE ON FUNCTION
  {schema}.register_topic(text, bigint, bigint, bigint, integer, bigint)
  TO {app_role};
-- Consumers: Poll creates its positions, locks them (FOR UPDATE needs an
-- UPDATE grant) and moves them; never their topic, consumer or partition.
-- Resetting or dropping a consumer is an operator's (owner) task.
GRANT SELECT, INSERT, UPDATE (done_snapshot, read_snapshot, cursor_xid,
                              cursor_id, last_poll_at)
  ON {schema}.consumer_position TO {app_role};
-- Positions carry no payloads or keys: lag and activity are stats.
GRANT SELECT ON {schema}.consumer_position TO {monitor_role};

-- Topics registered before this ran.
SELECT {schema}.grant_topic(t.id) FROM {schema}.topic t;
