-- Citus profile v1 of libcompaction: the distributed layout (doc/citus.md).
--
-- Run by the library after sql/system_v1.sql, in the same transaction, when
-- the database has the citus extension (on the coordinator). Placeholders,
-- substituted in one pass like system_v1.sql's:
--   schema          (in braces) the quoted schema identifier
--   schema_name     (in braces) the schema name as a string literal
--   citus_topic_v1  (in braces) the text of sql/citus_topic_v1.sql as a
--                   string literal, its own placeholders left for
--                   distribute_topic
-- Pre-v1 this layout is edited in place: recreate an existing database.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);

-- topic and schema_version: reference tables, a copy on every node. They
-- are written when a topic is registered (a two-phase commit to every
-- node, rare) and read by every node's statements without a hop.
SELECT pg_catalog.create_reference_table(
  pg_catalog.format('%I.topic', {schema_name}::text)::regclass);
SELECT pg_catalog.create_reference_table(
  pg_catalog.format('%I.schema_version', {schema_name}::text)::regclass);

-- janitor_state, log_cleaner_state and consumer_position stay on the
-- coordinator: their rows are claimed and moved by every sweep and Poll,
-- and a reference table would make each of those writes a two-phase commit
-- to every node. Their foreign keys to topic make Citus keep them in its
-- metadata as coordinator-local tables (they show in pg_dist_partition
-- with no distribution column), so they join with the reference tables.

-- Turns a new topic's tables into distributed tables co-located by
-- partition, and routes its compacted produce to one shard. Replaces the
-- no-op of sql/system_v1.sql, which register_topic calls right after
-- creating the tables. Unsafe triggers: Citus refuses to distribute a table
-- with triggers otherwise; ours only raise errors on the shard they fire
-- on, so none of the visibility or deadlock risks the setting warns about
-- applies.
CREATE OR REPLACE FUNCTION {schema}.distribute_topic(
    p_topic_id bigint, p_partitions integer)
  RETURNS void
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
  SET citus.enable_unsafe_triggers = on
AS $distribute_topic$
DECLARE
  v_template CONSTANT text := {citus_topic_v1};
  v_schema CONSTANT text := pg_catalog.quote_ident({schema_name}::text);
  v_message CONSTANT regclass := pg_catalog.format('%I.%I',
    {schema_name}::text, pg_catalog.concat('message_', p_topic_id));
  v_head CONSTANT regclass := pg_catalog.format('%I.%I',
    {schema_name}::text, pg_catalog.concat('compaction_head_', p_topic_id));
BEGIN
  EXECUTE pg_catalog.replace(pg_catalog.replace(
    pg_catalog.replace(v_template, '{id}'::text, p_topic_id::text),
    '{partitions}'::text, p_partitions::text),
    pg_catalog.concat('{', 'schema}'), v_schema);
  PERFORM pg_catalog.create_distributed_table(v_message, 'partition',
                                              shard_count => p_partitions);
  PERFORM pg_catalog.create_distributed_table(v_head, 'partition',
                                              colocate_with => v_message::text);
END
$distribute_topic$;

REVOKE ALL ON FUNCTION {schema}.distribute_topic(bigint, integer)
  FROM PUBLIC;

-- The headless sweep per shard. Citus refuses FOR UPDATE in a query that
-- spans shards; the single-node statement (sweep_headless_sql) restricted
-- to one partition is routed whole to that partition's worker, CTEs, ctid
-- and SKIP LOCKED included. $5 is not a parameter but the partition, a
-- literal: Citus prunes shards at planning time.
CREATE OR REPLACE FUNCTION {schema}.sweep_headless_shard_sql(
    p_topic_id bigint, p_partition integer, p_cursor boolean)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $sweep_headless_shard_sql$
  SELECT pg_catalog.concat(
    'WITH picked AS (SELECT ctid FROM ', h.head,
    ' WHERE partition = ', p_partition,
    ' AND idle_since IS NOT NULL AND idle_since < ', h.cutoff,
    CASE WHEN p_cursor THEN
      ' AND (idle_since, message_key) > ($3::timestamptz, $4::text)' END,
    ' ORDER BY idle_since, message_key LIMIT $2 FOR UPDATE SKIP LOCKED), ',
    'gone AS (DELETE FROM ', h.head, ' d WHERE d.partition = ', p_partition,
    ' AND d.ctid = ANY (ARRAY(SELECT ctid FROM picked)) ',
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
$sweep_headless_shard_sql$;

-- One batch of the headless sweep, shard by shard: the walk goes through
-- the partitions in order, each by (idle_since, key) as on one node. The
-- cursor's key names its partition (a key's partition is its hash), so
-- the batch resumes there after the cursor and goes on to the next
-- partitions from their start until it has deleted p_batch_size rows: a
-- short batch still means every shard caught up. Each shard's statement
-- is bounded by what is left of the batch.
CREATE OR REPLACE FUNCTION {schema}.sweep_headless(
    p_topic_id bigint, p_batch_size bigint, p_after_idle_since timestamptz,
    p_after_key text)
  RETURNS TABLE (deleted bigint, last_idle_since text, last_key text)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $sweep_headless$
DECLARE
  v_partitions integer;
  v_first integer := 0;
  v_n bigint;
  v_idle text;
  v_key text;
BEGIN
  SELECT t.partitions INTO v_partitions FROM {schema}.topic t
  WHERE t.id = p_topic_id;
  deleted := 0;
  IF p_after_key IS NOT NULL THEN
    v_first := ((pg_catalog.hashtextextended(p_after_key, 0::bigint)
                 % v_partitions::bigint + v_partitions::bigint)
                % v_partitions::bigint)::integer;
  END IF;
  FOR v_partition IN v_first..coalesce(v_partitions, 0) - 1 LOOP
    EXIT WHEN deleted >= p_batch_size;
    EXECUTE {schema}.sweep_headless_shard_sql(
      p_topic_id, v_partition,
      v_partition = v_first AND p_after_idle_since IS NOT NULL)
    INTO v_n, v_idle, v_key
    USING p_topic_id, p_batch_size - deleted, p_after_idle_since,
          p_after_key;
    IF v_n > 0 THEN
      deleted := deleted + v_n;
      last_idle_since := v_idle;
      last_key := v_key;
    END IF;
  END LOOP;
  RETURN NEXT;
END
$sweep_headless$;

-- The log cleaner per shard. The single-node walks are one statement over
-- the whole log, with correlated subqueries over CTEs and FOR UPDATE,
-- which Citus refuses across shards; the same statements restricted to one
-- partition (every table reference names it, as a literal so that Citus
-- prunes at planning time) are routed whole to the partition's worker.
-- The consumers' positions live on the coordinator and cannot join a
-- routed statement: they are read once per batch and passed in as $4, a
-- JSON array of the active positions (cleaner_waiting_sql's rows).
CREATE OR REPLACE FUNCTION {schema}.cleaner_waiting_json(p_topic_id bigint)
  RETURNS jsonb
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $cleaner_waiting_json$
DECLARE
  v_waiting jsonb;
BEGIN
  EXECUTE pg_catalog.concat('WITH ', {schema}.cleaner_waiting_sql(),
    'done AS (SELECT 1) SELECT coalesce(pg_catalog.jsonb_agg(',
    'pg_catalog.to_jsonb(w)), ''[]''::jsonb) FROM waiting w')
  INTO v_waiting
  USING p_topic_id;
  RETURN v_waiting;
END
$cleaner_waiting_json$;

-- cleaner_waiting_sql's CTE from the positions passed as $4.
CREATE OR REPLACE FUNCTION {schema}.cleaner_shard_waiting_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_shard_waiting_sql$
  SELECT 'waiting AS MATERIALIZED (SELECT * FROM '
    'pg_catalog.jsonb_to_recordset($4::jsonb) AS w(partition integer, '
    'done_snapshot pg_catalog.pg_snapshot, read_snapshot '
    'pg_catalog.pg_snapshot, cursor_xid pg_catalog.xid8, cursor_id bigint)), '::text
$cleaner_shard_waiting_sql$;

-- cleaner_is_head_sql on one partition's shard.
CREATE OR REPLACE FUNCTION {schema}.cleaner_shard_is_head_sql(
    p_head text, p_m text, p_partition integer)
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_shard_is_head_sql$
  SELECT pg_catalog.concat('EXISTS (SELECT 1 FROM ', p_head,
    ' h WHERE h.partition = ', p_partition, ' AND h.message_key = ', p_m,
    '.message_key AND h.head_id = ', p_m, '.id)')
$cleaner_shard_is_head_sql$;

-- The frontier columns of one shard's batch: cleaner_frontier_sql's, with
-- whether the batch stopped (a row it must not pass) in place of the
-- snapshot, which is the coordinator's (clean_combine).
CREATE OR REPLACE FUNCTION {schema}.cleaner_shard_frontier_sql()
  RETURNS text
  LANGUAGE sql
  IMMUTABLE
  SET search_path = pg_catalog, pg_temp
AS $cleaner_shard_frontier_sql$
  SELECT pg_catalog.concat({schema}.cleaner_frontier_expr_sql(), ', '
    '(SELECT pg_catalog.count(*) FROM scan) = $3::bigint '
    'AND (SELECT id FROM stop) IS NULL, (SELECT id FROM stop) IS NOT NULL')
$cleaner_shard_frontier_sql$;

-- Where a batch over all shards leaves the walk. A shard that stopped or
-- was full has handled its log up to its own frontier only; a shard that
-- was neither has handled all of it. The walk's frontier is the lowest
-- frontier of the first kind, full when that shard was full (the next
-- batch goes on at once, and it is above the batch's start: a full shard
-- passed at least one row); with none of the first kind, the highest
-- frontier, as on one node. Rows between the frontier and a shard's own
-- frontier are walked again by the next batch: they are heads, kept rows
-- or already gone. The snapshot's xmax is the coordinator's, taken after
-- the shards' statements: every writer's transaction id is the
-- coordinator's (its column default is evaluated there), assigned before
-- its message id, so a writer still running with an id at or below the
-- frontier is below this xmax.
CREATE OR REPLACE FUNCTION {schema}.clean_combine(
    p_frontiers bigint[], p_full boolean[], p_stopped boolean[],
    OUT frontier bigint, OUT full_batch boolean, OUT snapshot_xmax xid8)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $clean_combine$
BEGIN
  SELECT f.frontier, f.full_batch INTO frontier, full_batch
  FROM unnest(p_frontiers, p_full, p_stopped)
       AS f(frontier, full_batch, stopped)
  WHERE f.full_batch OR f.stopped
  ORDER BY f.frontier, f.stopped DESC LIMIT 1;
  IF NOT FOUND THEN
    SELECT pg_catalog.max(f) INTO frontier FROM pg_catalog.unnest(p_frontiers) f;
    full_batch := false;
  END IF;
  snapshot_xmax := pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot());
END
$clean_combine$;

-- One batch of the tombstone walk on every shard (the single-node
-- clean_tombstones, same arguments, results and check of p_after, and the
-- same removal of an expiring tombstone's older messages): each shard walks
-- up to p_batch_size tombstones above p_after.
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
  v_partitions integer;
  v_waiting jsonb;
  v_frontiers bigint[] := '{}';
  v_full boolean[] := '{}';
  v_stopped boolean[] := '{}';
  v_deleted bigint;
  v_expired bigint;
  v_frontier bigint;
  v_is_full boolean;
  v_is_stopped boolean;
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
  SELECT t.partitions INTO v_partitions FROM {schema}.topic t
  WHERE t.id = p_topic_id;
  v_waiting := {schema}.cleaner_waiting_json(p_topic_id);
  deleted := 0;
  expired := 0;
  FOR v_p IN 0..v_partitions - 1 LOOP
    EXECUTE pg_catalog.concat(
      'WITH ', {schema}.cleaner_shard_waiting_sql(),
      'scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at < ',
      {schema}.cleaner_cutoff_sql('tombstone_retention_ms'), ' AS old, ',
      'm.created_at > ', {schema}.cleaner_future_sql(), ' AS future, ',
      {schema}.cleaner_held_sql('m'), ' AS held FROM ',
      v_message, ' m WHERE m.partition = ', v_p,
      ' AND m.payload IS NULL AND m.id > $2::bigint ',
      'ORDER BY m.id LIMIT $3::bigint), ',
      'young AS (SELECT pg_catalog.min(id) AS id FROM scan ',
      'WHERE (NOT old AND NOT future) OR held), ',
      'due AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s ',
      'WHERE s.old AND s.id < coalesce((SELECT id FROM young), ',
      '9223372036854775807::bigint) AND ',
      {schema}.cleaner_shard_is_head_sql(v_head, 's', v_p), '), ',
      'older AS MATERIALIZED (SELECT d.id, d.message_key, c.ids, c.young, ',
      'ARRAY(SELECT m.id FROM ', v_message, ' m WHERE m.partition = ', v_p,
      ' AND m.id = ANY (c.ids) FOR UPDATE SKIP LOCKED) AS locked_ids ',
      'FROM due d CROSS JOIN LATERAL (SELECT ',
      'coalesce(pg_catalog.array_agg(o.id), ''{}'') AS ids, ',
      'coalesce(pg_catalog.bool_or(o.created_at >= ', v_cutoff,
      '), false) AS young FROM ', v_message, ' o WHERE o.partition = ', v_p,
      ' AND o.message_key = d.message_key AND o.id < d.id ',
      'AND o.id <= $5::bigint AND o.created_at <= ',
      {schema}.cleaner_future_sql(), ' AND (o.compaction_rank IS NOT NULL ',
      'OR NOT ', {schema}.cleaner_held_sql('o'), ')) c), ',
      'ready AS MATERIALIZED (SELECT o.id, o.message_key FROM older o ',
      'WHERE NOT o.young AND ',
      'pg_catalog.cardinality(o.locked_ids) = pg_catalog.cardinality(o.ids)), ',
      'locked AS MATERIALIZED (SELECT h.message_key, h.head_id FROM ', v_head,
      ' h WHERE h.partition = ', v_p,
      ' AND h.message_key = ANY (ARRAY(SELECT message_key FROM ready)) ',
      'AND h.head_id = ANY (ARRAY(SELECT id FROM ready)) ',
      'FOR UPDATE OF h SKIP LOCKED), ',
      'expired AS (UPDATE ', v_head, ' u SET head_id = NULL, ',
      'schema_version = NULL, compaction_rank = NULL, ',
      'updated_at = pg_catalog.now(), idle_since = pg_catalog.now() ',
      'FROM locked l WHERE u.partition = ', v_p,
      ' AND u.message_key = l.message_key ',
      'AND u.head_id = l.head_id RETURNING l.head_id AS id), ',
      'gone AS (DELETE FROM ', v_message, ' d WHERE d.partition = ', v_p,
      ' AND d.id = ANY (ARRAY(SELECT id FROM expired UNION ALL ',
      'SELECT pg_catalog.unnest(o.ids) FROM older o ',
      'WHERE o.id = ANY (ARRAY(SELECT id FROM expired)))) RETURNING d.id), ',
      'stop AS (SELECT least((SELECT id FROM young), ',
      '(SELECT pg_catalog.min(x.id) FROM (SELECT id FROM due EXCEPT ',
      'SELECT head_id FROM locked) x)) AS id) ',
      'SELECT (SELECT pg_catalog.count(*) FROM gone), ',
      '(SELECT pg_catalog.count(*) FROM expired), ',
      {schema}.cleaner_shard_frontier_sql())
    INTO v_deleted, v_expired, v_frontier, v_is_full, v_is_stopped
    USING p_topic_id, p_after, p_batch_size, v_waiting, v_walked;
    deleted := deleted + v_deleted;
    expired := expired + v_expired;
    v_frontiers := v_frontiers || v_frontier;
    v_full := v_full || v_is_full;
    v_stopped := v_stopped || v_is_stopped;
  END LOOP;
  SELECT * INTO frontier, full_batch, snapshot_xmax
  FROM {schema}.clean_combine(v_frontiers, v_full, v_stopped);
  UPDATE {schema}.log_cleaner_state c
  SET tombstone_walked_position = frontier,
      tombstone_walked_xmax = snapshot_xmax
  WHERE c.topic_id = p_topic_id;
  RETURN NEXT;
END
$clean_tombstones$;

-- One batch of the message walk on every shard (the single-node
-- clean_messages, same arguments, results and check of p_after).
-- next_created_at is the earliest of the shards'.
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
  v_partitions integer;
  v_waiting jsonb;
  v_frontiers bigint[] := '{}';
  v_full boolean[] := '{}';
  v_stopped boolean[] := '{}';
  v_deleted bigint;
  v_frontier bigint;
  v_is_full boolean;
  v_is_stopped boolean;
  v_next timestamptz;
  v_earliest timestamptz;
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
  SELECT t.partitions INTO v_partitions FROM {schema}.topic t
  WHERE t.id = p_topic_id;
  v_waiting := {schema}.cleaner_waiting_json(p_topic_id);
  deleted := 0;
  FOR v_p IN 0..v_partitions - 1 LOOP
    EXECUTE pg_catalog.concat(
      'WITH ', {schema}.cleaner_shard_waiting_sql(),
      'scan AS MATERIALIZED (SELECT m.id, m.message_key, m.created_at, ',
      'm.created_at < ', v_cutoff, ' AS old, m.created_at > ',
      {schema}.cleaner_future_sql(), ' AS future, ',
      '(m.message_key IS NULL OR m.compaction_rank IS NULL) AND ',
      {schema}.cleaner_held_sql('m'), ' AS held FROM ', v_message,
      ' m WHERE m.partition = ', v_p,
      ' AND m.id > $2::bigint ORDER BY m.id LIMIT $3::bigint), ',
      'young AS (SELECT pg_catalog.min(id) AS id FROM scan ',
      'WHERE (NOT old AND NOT future) OR held), ',
      'considered AS MATERIALIZED (SELECT s.id, s.message_key FROM scan s ',
      'WHERE s.old AND s.id < coalesce((SELECT id FROM young), ',
      '9223372036854775807::bigint)), ',
      'cand AS MATERIALIZED (SELECT c.id FROM considered c WHERE NOT ',
      {schema}.cleaner_shard_is_head_sql(v_head, 'c', v_p),
      ' UNION SELECT o.id FROM (SELECT DISTINCT message_key FROM ',
      'considered WHERE message_key IS NOT NULL) k CROSS JOIN LATERAL ',
      '(SELECT o.id FROM ', v_message, ' o WHERE o.partition = ', v_p,
      ' AND o.message_key = k.message_key AND o.id <= $2::bigint ',
      'AND o.created_at < ', v_cutoff, ' AND NOT ',
      {schema}.cleaner_shard_is_head_sql(v_head, 'o', v_p),
      ' AND (o.compaction_rank IS NOT NULL OR NOT ',
      {schema}.cleaner_held_sql('o'), ')) o), ',
      'locked AS MATERIALIZED (SELECT m.id FROM ', v_message,
      ' m WHERE m.partition = ', v_p,
      ' AND m.id = ANY (ARRAY(SELECT id FROM cand)) ',
      'FOR UPDATE SKIP LOCKED), ',
      'gone AS (DELETE FROM ', v_message, ' d WHERE d.partition = ', v_p,
      ' AND d.id = ANY (ARRAY(SELECT id FROM locked)) RETURNING d.id), ',
      'stop AS (SELECT least((SELECT id FROM young), ',
      '(SELECT pg_catalog.min(x.id) FROM (SELECT id FROM cand EXCEPT ',
      'SELECT id FROM locked) x)) AS id) ',
      'SELECT (SELECT pg_catalog.count(*) FROM gone), ',
      {schema}.cleaner_shard_frontier_sql(),
      ', (SELECT p.created_at FROM (SELECT n.id, n.message_key, ',
      'n.created_at FROM ', v_message, ' n WHERE n.partition = ', v_p,
      ' AND n.id > (', {schema}.cleaner_frontier_expr_sql(),
      ') ORDER BY n.id LIMIT 1000) p ',
      'WHERE p.created_at <= ', {schema}.cleaner_future_sql(),
      ' AND (p.created_at >= ', v_cutoff, ' OR NOT ',
      {schema}.cleaner_shard_is_head_sql(v_head, 'p', v_p),
      ') ORDER BY p.id LIMIT 1)')
    INTO v_deleted, v_frontier, v_is_full, v_is_stopped, v_next
    USING p_topic_id, p_after, p_batch_size, v_waiting;
    deleted := deleted + v_deleted;
    v_frontiers := v_frontiers || v_frontier;
    v_full := v_full || v_is_full;
    v_stopped := v_stopped || v_is_stopped;
    v_earliest := least(v_earliest, v_next);
  END LOOP;
  SELECT * INTO frontier, full_batch, snapshot_xmax
  FROM {schema}.clean_combine(v_frontiers, v_full, v_stopped);
  next_created_at := v_earliest::text;
  UPDATE {schema}.log_cleaner_state c
  SET walked_position = frontier, walked_xmax = snapshot_xmax
  WHERE c.topic_id = p_topic_id;
  RETURN NEXT;
END
$clean_messages$;

-- Keys whose head is a tombstone above p_after, up to p_limit, summed over
-- the shards (each counted up to the bound).
CREATE OR REPLACE FUNCTION {schema}.count_tombstoned_keys(
    p_topic_id bigint, p_after bigint, p_limit bigint)
  RETURNS bigint
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $count_tombstoned_keys$
DECLARE
  v_head CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id));
  v_partitions integer;
  v_count bigint := 0;
  v_n bigint;
BEGIN
  SELECT t.partitions INTO v_partitions FROM {schema}.topic t
  WHERE t.id = p_topic_id;
  FOR v_p IN 0..v_partitions - 1 LOOP
    EXECUTE pg_catalog.concat(
      'SELECT pg_catalog.count(*) FROM (SELECT 1 FROM ',
      pg_catalog.format('%I.%I', {schema_name}::text,
                        pg_catalog.concat('message_', p_topic_id)),
      ' m WHERE m.partition = ', v_p,
      ' AND m.payload IS NULL AND m.id > $1::bigint AND ',
      {schema}.cleaner_shard_is_head_sql(v_head, 'm', v_p),
      ' LIMIT $2::bigint) k')
    INTO v_n
    USING p_after, p_limit;
    v_count := least(v_count + v_n, p_limit);
  END LOOP;
  RETURN v_count;
END
$count_tombstoned_keys$;

-- The stats (lib/src/stats.cpp, stats_log.cpp) read a table's size from
-- the catalogs; on the coordinator a distributed table is an empty shell,
-- so on Citus they come from the shards: the sum of the shards' reltuples,
-- and of their estimates as the single-node stats make them (density at
-- the last statistics times the current size). 0 and 0 for a table
-- dropped meanwhile.
CREATE OR REPLACE FUNCTION {schema}.shard_sizes(
    p_table text, OUT reltuples bigint, OUT estimated bigint)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $shard_sizes$
DECLARE
  v_table CONSTANT regclass := pg_catalog.to_regclass(p_table);
BEGIN
  reltuples := 0;
  estimated := 0;
  IF v_table IS NULL THEN
    RETURN;
  END IF;
  SELECT coalesce(pg_catalog.sum(pg_catalog.split_part(r.result, ' ', 1)
                    ::float8), 0)::bigint,
         coalesce(pg_catalog.sum(pg_catalog.split_part(r.result, ' ', 2)
                    ::float8), 0)::bigint
  INTO reltuples, estimated
  FROM pg_catalog.run_command_on_shards(v_table,
    'SELECT pg_catalog.concat(greatest(c.reltuples, 0), '' '', CASE WHEN '
    'c.relpages > 0 AND c.reltuples > 0::float4 THEN c.reltuples::float8 '
    '/ c.relpages::float8 * (pg_catalog.pg_relation_size(c.oid) / '
    'pg_catalog.current_setting(''block_size'')::bigint)::float8 ELSE 0 '
    'END) FROM pg_catalog.pg_class c WHERE c.oid = '
    'pg_catalog.to_regclass(''%s'')') r
  WHERE r.success AND r.result <> '';
END
$shard_sizes$;

-- The headless rows of a topic estimated from its shards, for the stats
-- whose count stopped at exact_count_limit (lib/src/stats.cpp,
-- kEstimateSql): on the coordinator the head table and its partial
-- idle_since index are empty shells. Each shard's estimate is the
-- single-node one from the shard's own catalogs (the idle index's density
-- times its size, at most the head shard's estimate of all its rows; else
-- that estimate times the headless share ANALYZE measured; else 0), and
-- the topic's is their sum. 0 for a topic dropped meanwhile.
CREATE OR REPLACE FUNCTION {schema}.headless_estimate(p_topic_id bigint)
  RETURNS bigint
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $headless_estimate$
DECLARE
  v_head CONSTANT regclass := pg_catalog.to_regclass(pg_catalog.format(
    '%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id)));
  v_estimate bigint;
BEGIN
  IF v_head IS NULL THEN
    RETURN 0;
  END IF;
  SELECT coalesce(pg_catalog.sum(r.result::float8), 0)::bigint
  INTO v_estimate
  FROM pg_catalog.run_command_on_shards(v_head,
    'SELECT coalesce(CASE WHEN e.idx IS NOT NULL THEN least(e.idx, '
    'e.all_rows) END, e.all_rows * e.share, 0) FROM (SELECT '
    'CASE WHEN ic.relpages > 0 AND ic.reltuples > 0::float4 THEN '
    'ic.reltuples::float8 / ic.relpages::float8 * '
    '(pg_catalog.pg_relation_size(ic.oid) / b.size)::float8 END AS idx, '
    'CASE WHEN hc.relpages > 0 AND hc.reltuples > 0::float4 THEN '
    'hc.reltuples::float8 / hc.relpages::float8 * '
    '(pg_catalog.pg_relation_size(hc.oid) / b.size)::float8 END AS all_rows, '
    '(SELECT 1::float8 - st.null_frac::float8 FROM pg_catalog.pg_stats st '
    'WHERE st.schemaname = n.nspname AND st.tablename = hc.relname AND '
    'st.attname = ''idle_since'' AND NOT st.inherited) AS share '
    'FROM pg_catalog.pg_class hc '
    'JOIN pg_catalog.pg_namespace n ON n.oid = hc.relnamespace '
    'CROSS JOIN (SELECT pg_catalog.current_setting(''block_size'')::bigint '
    'AS size) b '
    'LEFT JOIN pg_catalog.pg_index i ON i.indrelid = hc.oid AND '
    'i.indpred IS NOT NULL '
    'LEFT JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid '
    'WHERE hc.oid = pg_catalog.to_regclass(''%s'')) e') r
  WHERE r.success AND r.result <> '';
  RETURN v_estimate;
END
$headless_estimate$;

-- A topic's head figures for the stats statement (StatsSelect): the
-- headless rows counted up to p_limit, the oldest usable idle_since, and
-- the head rows from the shards' catalogs. Statements of their own: the
-- single-node statement joins the head table with the coordinator's
-- tables and catalogs, which Citus refuses (42601).
CREATE OR REPLACE FUNCTION {schema}.head_stats(
    p_topic_id bigint, p_limit bigint, OUT headless bigint,
    OUT oldest_idle_since timestamptz, OUT head_rows bigint)
  LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp
AS $head_stats$
DECLARE
  v_head CONSTANT text := pg_catalog.format('%I.%I', {schema_name}::text,
    pg_catalog.concat('compaction_head_', p_topic_id));
BEGIN
  EXECUTE pg_catalog.concat('SELECT pg_catalog.count(*) FROM (SELECT 1 FROM ',
    v_head, ' h WHERE h.idle_since IS NOT NULL LIMIT $1) l')
  INTO headless
  USING p_limit;
  EXECUTE pg_catalog.concat('SELECT o.idle_since FROM ', v_head,
    ' o WHERE o.idle_since > ''-infinity''::timestamptz ',
    'ORDER BY o.idle_since LIMIT 1')
  INTO oldest_idle_since;
  SELECT s.reltuples INTO head_rows FROM {schema}.shard_sizes(v_head) s;
END
$head_stats$;

-- The consumers' lag (compactiond's consumer series, `compactiond
-- consumer list`) per shard: the single-node statement joins the positions
-- (on the coordinator) with the message table, which Citus refuses. Here
-- each position's count is one statement with the partition a literal,
-- routed to its shard, the position's snapshots and cursor as parameters
-- (they are the coordinator's, as every stored xid). Replaces
-- sql/system_v1.sql's consumer_lag, keeping its grants.
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
  w record;
  v_message text;
  v_n bigint;
  v_oldest timestamptz;
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
    v_message := pg_catalog.format('%I.%I', {schema_name}::text,
                                   pg_catalog.concat('message_', r.id));
    IF pg_catalog.to_regclass(v_message) IS NULL THEN
      CONTINUE;
    END IF;
    topic := r.name;
    consumer := r.consumer;
    partitions := r.parts;
    last_poll_at := r.last_poll;
    inactive := r.is_inactive;
    lag_messages := 0;
    capped := false;
    oldest_created_at := NULL;
    -- As on one node: a topic whose Destroy commits while its count waits
    -- for the table's lock is skipped, not every topic's lag lost with it.
    BEGIN
    FOR w IN
      SELECT p.partition, p.done_snapshot, p.read_snapshot, p.cursor_xid,
             p.cursor_id
      FROM {schema}.consumer_position p
      WHERE p.topic_id = r.id AND p.consumer = r.consumer
      ORDER BY p.partition
    LOOP
      EXECUTE pg_catalog.concat(
        'SELECT pg_catalog.count(*), pg_catalog.min(s.created_at) FROM ',
        '(SELECT m.created_at FROM ', v_message, ' m WHERE m.partition = ',
        w.partition,
        ' AND m.xid >= pg_catalog.pg_snapshot_xmin($1) ',
        'AND NOT pg_catalog.pg_visible_in_snapshot(m.xid, $1) ',
        'AND NOT coalesce(pg_catalog.pg_visible_in_snapshot(m.xid, $2) ',
        'AND (m.xid, m.id) <= ($3, $4), false) ',
        'ORDER BY m.xid, m.id LIMIT $5) s')
        INTO v_n, v_oldest
        USING w.done_snapshot, w.read_snapshot, w.cursor_xid, w.cursor_id,
              p_cap;
      lag_messages := lag_messages + v_n;
      capped := capped OR v_n >= p_cap;
      IF v_oldest IS NOT NULL THEN
        oldest_created_at := least(oldest_created_at, v_oldest);
      END IF;
    END LOOP;
    EXCEPTION WHEN undefined_table THEN
      CONTINUE;
    END;
    RETURN NEXT;
  END LOOP;
END
$consumer_lag$;
