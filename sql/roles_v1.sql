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
-- The roles (all NOLOGIN: grant them to login roles). doc/roles.md has
-- the table of what each may do and what the database refuses it.
--   owner    owns the schema, every table in it and the functions. Only
--            a member of it can drop a topic (Destroy), change a topic's
--            settings (an UPDATE of its row) or change tables.
--   app      reads messages and heads, appends messages (the server sets
--            their id and created_at), moves heads only through the
--            topic's produce function, inserts and refreshes headless rows
--            (the lock), consumes (creates, locks and moves consumer
--            positions), registers topics through register_topic (which
--            never changes an existing topic's settings). No DELETE,
--            TRUNCATE or DDL; no write of a head's columns or times.
--   janitor  the daemon: sweeps and cleans only through the functions of
--            the system baseline (sweep_headless, clean_tombstones,
--            clean_messages, count_tombstoned_keys), which delete only
--            what the rules allow; keeps its claims and records in
--            janitor_state and log_cleaner_state, whose positions a trigger
--            lets move only as the walk moves them. No access to message
--            tables, no write to head tables, no INSERT, no DDL.
--   monitor  stats only: the topic list, versions, janitor_state,
--            log_cleaner_state, consumer positions, consumer lag
--            (consumer_lag: counts and times) and the idle_since column
--            of head tables.
--            No message tables, no keys.
-- app and janitor are members of monitor: the daemon exports stats, and an
-- application may read a topic's stats.
--
-- Per-topic tables are granted by grant_topic(), which register_topic
-- calls for every new topic. Default privileges would not do: they cannot
-- tell a message table from a head table, and the roles need different
-- rights on each.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

-- One run at a time per schema, and never beside a topic's registration:
-- register_topic grants its new topic through grant_topic, which this
-- script replaces, so a registration still in flight would keep the old
-- grants (none, on the first run), and two runs' GRANTs on one object
-- fail ("tuple concurrently updated"). register_topic's INSERT conflicts
-- with this mode: the grants below see every registration that committed
-- before, and one that starts now waits and then calls the new
-- grant_topic.
LOCK TABLE {schema}.topic IN SHARE ROW EXCLUSIVE MODE;

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

-- On Citus (the citus profile, doc/citus.md) a SECURITY DEFINER function
-- (produce_<id>, lock_<id>, register_topic, the sweeps) runs its routed
-- statements over connections the coordinator opens to the workers as the
-- function's owner: a NOLOGIN owner makes every one of them fail ("role
-- ... is not permitted to log in"). So there the owner may log in; it has
-- no password, and the operator lets it authenticate between the nodes
-- only (pg_dist_authinfo or certificates, and pg_hba.conf), not from
-- clients. ALTER ROLE reaches the workers through Citus.
DO $citus_owner_login$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
    ALTER ROLE {owner_role} LOGIN;
  END IF;
END
$citus_owner_login$;

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
  -- Messages: the columns a plain produce names; the identity and
  -- created_at take their defaults, and without compaction_rank a direct
  -- insert is never a compacted message or a tombstone (the tombstone
  -- CHECK). Compacted messages go through produce_<id>. A keyed message
  -- names its partition (a CHECK holds it to the key's); an unkeyed one's
  -- default reads the id it drew with currval, which needs SELECT on the
  -- identity's sequence.
  EXECUTE pg_catalog.concat('GRANT SELECT, INSERT (message_key, ',
    'schema_version, payload, partition) ON ', v_message, ' TO {app_role}');
  EXECUTE pg_catalog.concat('GRANT SELECT ON SEQUENCE ',
    pg_catalog.pg_get_serial_sequence(v_message, 'id'), ' TO {app_role}');
  -- The partition CHECK calls in_partition_<id> as the inserting role:
  -- granted, not left to PUBLIC's default (a database may revoke that).
  EXECUTE pg_catalog.concat('GRANT EXECUTE ON FUNCTION ',
    pg_catalog.format('%I.%I', {schema_name}::text,
                      pg_catalog.concat('in_partition_', p_topic_id)),
    '(text, integer) TO {app_role}');
  -- Heads: the lock inserts headless rows (the rest are defaults) and
  -- refreshes them; FOR UPDATE needs UPDATE on some column, and these are
  -- the two the refresh writes (a trigger keeps them the server's time,
  -- the table's CHECKs keep idle_since to headless rows).
  EXECUTE pg_catalog.concat('GRANT SELECT, INSERT (message_key), ',
    'UPDATE (updated_at, idle_since) ON ', v_head, ' TO {app_role}');
  EXECUTE pg_catalog.concat('GRANT EXECUTE ON FUNCTION ',
    pg_catalog.format('%I.%I', {schema_name}::text,
                      pg_catalog.concat('produce_', p_topic_id)),
    '(text, integer, bigint, jsonb) TO {app_role}');
  EXECUTE pg_catalog.concat('GRANT EXECUTE ON FUNCTION ',
    pg_catalog.format('%I.%I', {schema_name}::text,
                      pg_catalog.concat('lock_', p_topic_id)),
    '(text, boolean) TO {app_role}');
  -- The plain produce of the citus profile (sql/citus_topic_v1.sql).
  IF pg_catalog.to_regprocedure(pg_catalog.format('%I.%I(text, integer, jsonb)',
       {schema_name}::text, pg_catalog.concat('produce_plain_', p_topic_id)))
     IS NOT NULL THEN
    EXECUTE pg_catalog.concat('GRANT EXECUTE ON FUNCTION ',
      pg_catalog.format('%I.%I', {schema_name}::text,
                        pg_catalog.concat('produce_plain_', p_topic_id)),
      '(text, integer, jsonb) TO {app_role}');
  END IF;
  -- A batch of produces (Producer::ProduceBatch).
  EXECUTE pg_catalog.concat('GRANT EXECUTE ON FUNCTION ',
    pg_catalog.format('%I.%I', {schema_name}::text,
                      pg_catalog.concat('produce_batch_', p_topic_id)),
    '(text[], integer[], bigint[], jsonb[], text[]) TO {app_role}');
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

-- And every function: the SECURITY DEFINER ones run as their owner.
DO $transfer_functions$
DECLARE
  v_function regprocedure;
BEGIN
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = {schema_name}::name
      AND p.proowner <> '{owner_role}'::regrole::oid
  LOOP
    EXECUTE pg_catalog.concat('ALTER FUNCTION ', v_function::text,
                              ' OWNER TO {owner_role}');
  END LOOP;
END
$transfer_functions$;

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
GRANT EXECUTE ON FUNCTION
  {schema}.sweep_headless(bigint, bigint, timestamptz, text),
  {schema}.clean_tombstones(bigint, bigint, bigint),
  {schema}.clean_messages(bigint, bigint, bigint),
  {schema}.count_tombstoned_keys(bigint, bigint, bigint) TO {janitor_role};
-- Consumers: Poll creates its positions, locks them (FOR UPDATE needs an
-- UPDATE grant) and moves them; never their topic, consumer or partition.
-- Resetting or dropping a consumer is an operator's (owner) task.
GRANT SELECT, INSERT, UPDATE (done_snapshot, read_snapshot, cursor_xid,
                              cursor_id, last_poll_at)
  ON {schema}.consumer_position TO {app_role};
-- Positions carry no payloads or keys: lag and activity are stats.
GRANT SELECT ON {schema}.consumer_position TO {monitor_role};
-- Lag reads the message tables as the owner and returns counts and times.
GRANT EXECUTE ON FUNCTION {schema}.consumer_lag(bigint) TO {monitor_role};

-- Topics registered before this ran.
SELECT {schema}.grant_topic(t.id) FROM {schema}.topic t;
