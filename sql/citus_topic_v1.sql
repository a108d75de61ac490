-- Citus profile v1 of a topic: readies the tables sql/topic_v1.sql just
-- created for distribution by partition, and the writes that route to one
-- shard (doc/citus.md).
--
-- {schema} stands for the quoted schema identifier, {id} for the numeric
-- topic id, {partitions} for the topic's partition count. Run by
-- distribute_topic (sql/citus_v1.sql) right after the topic baseline, in
-- the registering transaction; distribute_topic distributes both tables
-- after it.

-- Citus refuses a generated distribution column: it routes a row before the
-- shard computes anything. The writer supplies the partition (the topic's
-- functions below; the same hash as the single-node generated column) and
-- a CHECK on the shard holds it to the rule. Keyless messages have no hash
-- to follow and take any partition. The single-node CHECK of the same name
-- calls a plpgsql function the shards do not have.
ALTER TABLE {schema}.message_{id}
  DROP CONSTRAINT message_{id}_partition_of_key;
ALTER TABLE {schema}.message_{id}
  ADD CONSTRAINT message_{id}_partition_of_key CHECK (
    partition >= 0 AND partition < {partitions}
    AND (message_key IS NULL
         OR partition = ((pg_catalog.hashtextextended(message_key, 0::bigint)
                          % {partitions}::bigint + {partitions}::bigint)
                         % {partitions}::bigint)::integer));

-- Every unique constraint of a distributed table includes the distribution
-- column. An id is still unique on its own: one sequence hands them out.
ALTER TABLE {schema}.message_{id} DROP CONSTRAINT message_{id}_pkey;
ALTER TABLE {schema}.message_{id}
  ADD CONSTRAINT message_{id}_pkey PRIMARY KEY (id, partition);

-- The head row lives with its key's messages: the same partition column.
-- The key alone decides it, so the key stays unique.
ALTER TABLE {schema}.compaction_head_{id}
  ADD COLUMN partition integer NOT NULL
  CONSTRAINT compaction_head_{id}_partition_of_key CHECK (
    partition = ((pg_catalog.hashtextextended(message_key, 0::bigint)
                  % {partitions}::bigint + {partitions}::bigint)
                 % {partitions}::bigint)::integer);
ALTER TABLE {schema}.compaction_head_{id}
  DROP CONSTRAINT compaction_head_{id}_pkey;
ALTER TABLE {schema}.compaction_head_{id}
  ADD CONSTRAINT compaction_head_{id}_pkey PRIMARY KEY (message_key, partition);

-- The compacted produce of sql/topic_v1.sql in statements Citus routes to
-- the key's shard, so a transaction that touches one key commits on one
-- worker with a plain commit. A CTE or INSERT .. SELECT would go through
-- the coordinator and a two-phase commit; now() in DO UPDATE SET is
-- refused (only IMMUTABLE functions are allowed there), so the head takes
-- the proposed row's default, which is the same statement_timestamp().
CREATE OR REPLACE FUNCTION {schema}.produce_{id}(
    p_key text, p_schema_version integer, p_rank bigint, p_payload jsonb,
    OUT message_id bigint, OUT message_created_at timestamptz,
    OUT advanced boolean)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $produce$
DECLARE
  v_partition CONSTANT integer :=
    ((pg_catalog.hashtextextended(p_key, 0::bigint) % {partitions}::bigint
      + {partitions}::bigint) % {partitions}::bigint)::integer;
BEGIN
  -- The xid before the id, as on one node (sql/topic_v1.sql).
  PERFORM pg_catalog.pg_current_xact_id();
  INSERT INTO {schema}.message_{id}
    (message_key, schema_version, compaction_rank, payload, partition)
  VALUES (p_key, p_schema_version, p_rank, p_payload, v_partition)
  RETURNING id, created_at INTO message_id, message_created_at;
  INSERT INTO {schema}.compaction_head_{id} AS h
    (message_key, partition, head_id, schema_version, compaction_rank,
     idle_since)
  VALUES (p_key, v_partition, message_id, p_schema_version, p_rank, NULL)
  ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO UPDATE
  SET head_id = excluded.head_id, schema_version = excluded.schema_version,
      compaction_rank = excluded.compaction_rank,
      updated_at = excluded.updated_at, idle_since = NULL
  WHERE h.head_id IS NULL
     OR (excluded.schema_version, excluded.compaction_rank, excluded.head_id)
        > (h.schema_version, h.compaction_rank, h.head_id)
  RETURNING true INTO advanced;
  advanced := coalesce(advanced, false);
END
$produce$;

-- LockCompactionHead in one call (the single-node lock_<id> of
-- sql/topic_v1.sql, same signature and statuses), with every statement
-- naming the partition so it routes to the key's shard. A lock_timeout the
-- caller set with set_config() stays on the coordinator; re-set here with
-- citus.propagate_set_commands = 'local', it reaches the worker the lock
-- waits on, with the caller's own value, which it keeps after the call
-- (the library restores a LockOptions::lock_timeout itself). The SET
-- clause scopes citus.propagate_set_commands to the call: the caller's
-- later SET LOCALs propagate as they did before it. SECURITY DEFINER:
-- see produce_plain_{id} below.
CREATE OR REPLACE FUNCTION {schema}.lock_{id}(
    p_key text, p_guarded boolean,
    OUT status "char", OUT id bigint, OUT message_key text,
    OUT schema_version integer, OUT compaction_rank bigint,
    OUT created_at timestamptz, OUT payload jsonb)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  SET citus.propagate_set_commands = 'local'
AS $lock$
#variable_conflict use_column
DECLARE
  v_partition CONSTANT integer :=
    ((pg_catalog.hashtextextended(p_key, 0::bigint) % {partitions}::bigint
      + {partitions}::bigint) % {partitions}::bigint)::integer;
  v_timeout CONSTANT text := pg_catalog.current_setting('lock_timeout');
  v_head bigint;
BEGIN
  IF v_timeout <> '0' THEN
    IF NOT p_guarded THEN
      status := 'g';
      RETURN;
    END IF;
    EXECUTE pg_catalog.format('SET LOCAL lock_timeout = %L', v_timeout);
  END IF;
  FOR v_round IN 1..16 LOOP
    SELECT h.head_id INTO v_head FROM {schema}.compaction_head_{id} h
      WHERE h.message_key = p_key AND h.partition = v_partition
      FOR UPDATE OF h;
    IF FOUND THEN
      IF v_head IS NULL THEN
        UPDATE {schema}.compaction_head_{id} h
          SET updated_at = statement_timestamp(),
              idle_since = statement_timestamp()
          WHERE h.message_key = p_key AND h.partition = v_partition;
        status := 'e';
        RETURN;
      END IF;
      SELECT m.id, m.message_key, m.schema_version, m.compaction_rank,
             m.created_at, m.payload
        INTO id, message_key, schema_version, compaction_rank, created_at,
             payload
        FROM {schema}.message_{id} m
        WHERE m.id = v_head AND m.partition = v_partition;
      status := 'h';
      RETURN;
    END IF;
    INSERT INTO {schema}.compaction_head_{id} (message_key, partition)
      VALUES (p_key, v_partition)
      ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO NOTHING;
    IF FOUND THEN
      status := 'e';
      RETURN;
    END IF;
  END LOOP;
  status := 'v';
END
$lock$;

REVOKE ALL ON FUNCTION {schema}.lock_{id}(text, boolean) FROM PUBLIC;

-- The plain (not compacted) produce as plain statements, for the library's
-- Produce on Citus (lib/src/produce.cpp): the single-node statement is an
-- INSERT .. SELECT from a CTE that takes the transaction id first, which
-- Citus runs through the coordinator with a two-phase commit. Here the xid
-- comes first as in produce_{id}, then one INSERT .. VALUES routed to the
-- row's shard: a keyed message names its key's partition, an unkeyed one
-- takes the column's default (by the id it draws, evaluated on the
-- coordinator before Citus routes the row). SECURITY DEFINER, like
-- lock_{id}: Citus sends the shard the columns it filled from their
-- defaults (id, created_at, xid, the head's times) by name, where the
-- app role's column grants (sql/roles_v1.sql) refuse them; run as the
-- owner, these functions insert only what the app role may insert
-- directly on one node, a plain message or a headless row.
CREATE OR REPLACE FUNCTION {schema}.produce_plain_{id}(
    p_key text, p_schema_version integer, p_payload jsonb,
    OUT message_id bigint, OUT message_created_at timestamptz)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $produce_plain$
BEGIN
  PERFORM pg_catalog.pg_current_xact_id();
  IF p_key IS NULL THEN
    INSERT INTO {schema}.message_{id} (schema_version, payload)
    VALUES (p_schema_version, p_payload)
    RETURNING id, created_at INTO message_id, message_created_at;
  ELSE
    INSERT INTO {schema}.message_{id}
      (message_key, schema_version, payload, partition)
    VALUES (p_key, p_schema_version, p_payload,
            ((pg_catalog.hashtextextended(p_key, 0::bigint)
              % {partitions}::bigint + {partitions}::bigint)
             % {partitions}::bigint)::integer)
    RETURNING id, created_at INTO message_id, message_created_at;
  END IF;
END
$produce_plain$;

REVOKE ALL ON FUNCTION {schema}.produce_plain_{id}(text, integer, jsonb)
  FROM PUBLIC;

-- produce_batch_{id} of sql/topic_v1.sql with its first step, which takes
-- the head rows of the batch's compacted keys in key order, as one routed
-- upsert per key (the single-node INSERT .. SELECT names no partition, and
-- Citus needs one for each row). The rest is the same: plain inserts and
-- produce_{id}, each routed to its row's shard, so a batch over one key
-- commits on one worker with a plain commit.
CREATE OR REPLACE FUNCTION {schema}.produce_batch_{id}(
    p_keys text[], p_schema_versions integer[], p_ranks bigint[],
    p_payloads jsonb[])
  RETURNS TABLE (message_id bigint, message_created_at timestamptz,
                 advanced boolean)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $produce_batch$
DECLARE
  v record;
  v_key text;
BEGIN
  IF pg_catalog.cardinality(p_schema_versions)
       IS DISTINCT FROM pg_catalog.cardinality(p_keys)
     OR pg_catalog.cardinality(p_ranks)
       IS DISTINCT FROM pg_catalog.cardinality(p_keys)
     OR pg_catalog.cardinality(p_payloads)
       IS DISTINCT FROM pg_catalog.cardinality(p_keys) THEN
    RAISE EXCEPTION 'produce_batch_{id}: the four arrays differ in length'
      USING ERRCODE = '22023';
  END IF;
  PERFORM pg_catalog.pg_current_xact_id();
  FOR v_key IN
    SELECT DISTINCT b.k
    FROM ROWS FROM (pg_catalog.unnest(p_keys), pg_catalog.unnest(p_ranks))
      AS b(k, r)
    WHERE b.r IS NOT NULL
    ORDER BY b.k
  LOOP
    INSERT INTO {schema}.compaction_head_{id} AS h (message_key, partition)
    VALUES (v_key,
            ((pg_catalog.hashtextextended(v_key, 0::bigint)
              % {partitions}::bigint + {partitions}::bigint)
             % {partitions}::bigint)::integer)
    ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO UPDATE
    SET updated_at = h.updated_at WHERE false;
  END LOOP;
  FOR v IN
    SELECT b.k, b.sv, b.r, b.p
    FROM ROWS FROM (pg_catalog.unnest(p_keys),
                    pg_catalog.unnest(p_schema_versions),
                    pg_catalog.unnest(p_ranks), pg_catalog.unnest(p_payloads))
      AS b(k, sv, r, p)
  LOOP
    IF v.r IS NULL THEN
      SELECT p.message_id, p.message_created_at
      INTO message_id, message_created_at
      FROM {schema}.produce_plain_{id}(v.k, v.sv, v.p) p;
      advanced := false;
    ELSE
      SELECT p.message_id, p.message_created_at, p.advanced
      INTO message_id, message_created_at, advanced
      FROM {schema}.produce_{id}(v.k, v.sv, v.r, v.p) p;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$produce_batch$;
