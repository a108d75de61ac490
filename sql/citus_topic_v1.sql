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

-- produce_batch_{id} of sql/topic_v1.sql in statements Citus routes to one
-- shard each: the single-node statement is an INSERT .. SELECT with
-- data-modifying CTEs, which Citus runs through the coordinator. The ids
-- are drawn first, in input order (an unkeyed message's partition follows
-- its id, as the column default does), then per partition of the batch,
-- in ascending order: one multi-row INSERT of its messages and one
-- multi-row upsert of its keys' head rows in key order (byte order), each
-- with the partition a literal. So heads are taken in (partition, key)
-- order, the same for every batch: concurrent batches over overlapping
-- keys queue instead of deadlocking. As on one node, a key the batch names
-- once takes its message as the head in the upsert; a key named more than
-- once is only locked there (or inserted headless) and its messages then
-- apply the winner rule one by one against the locked row. Values reach
-- the statements as literals (format's %L; keys and payloads are data, the
-- identifiers are numeric ids). A batch over one key's partition touches
-- one worker and commits without two-phase commit. now() is refused in DO
-- UPDATE SET (only IMMUTABLE functions), so the head takes the proposed
-- row's default, the same statement_timestamp(). The repeated keys are
-- found here, on the coordinator, beside statements sent to workers: the
-- caller's list (p_repeated, which saves the single-node function a
-- statement) is not read.
CREATE OR REPLACE FUNCTION {schema}.produce_batch_{id}(
    p_keys text[], p_schema_versions integer[], p_ranks bigint[],
    p_payloads jsonb[], p_repeated text[])
  RETURNS TABLE (message_id bigint, message_created_at timestamptz,
                 advanced boolean)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $produce_batch$
#variable_conflict use_column
DECLARE
  v_n CONSTANT integer := pg_catalog.cardinality(p_keys);
  v_ids bigint[];
  v_parts integer[];
  v_repeated text[];
  v_advanced boolean[];
  v_created timestamptz[];
  v_at integer;
  v_lo integer;
  v_hi integer;
  v_partition integer;
  v_sql text;
  v_row record;
  v_head record;
BEGIN
  IF pg_catalog.cardinality(p_schema_versions) IS DISTINCT FROM v_n
     OR pg_catalog.cardinality(p_ranks) IS DISTINCT FROM v_n
     OR pg_catalog.cardinality(p_payloads) IS DISTINCT FROM v_n THEN
    RAISE EXCEPTION 'produce_batch_{id}: the four arrays differ in length'
      USING ERRCODE = '22023';
  END IF;
  IF coalesce(v_n, 0) = 0 THEN
    RETURN;
  END IF;
  -- The xid before the first id (sql/topic_v1.sql).
  PERFORM pg_catalog.pg_current_xact_id();
  v_ids := ARRAY(
    SELECT pg_catalog.nextval(
             $seq${schema}.message_{id}_id_seq$seq$::regclass)
    FROM pg_catalog.generate_series(1, v_n));
  v_parts := ARRAY(
    SELECT coalesce(((pg_catalog.hashtextextended(b.k, 0::bigint)
                      % {partitions}::bigint + {partitions}::bigint)
                     % {partitions}::bigint)::integer,
                    (b.id % {partitions}::bigint)::integer)
    FROM ROWS FROM (pg_catalog.unnest(p_keys), pg_catalog.unnest(v_ids))
      WITH ORDINALITY AS b(k, id, ord)
    ORDER BY b.ord);
  v_repeated := ARRAY(
    SELECT b.k
    FROM ROWS FROM (pg_catalog.unnest(p_keys), pg_catalog.unnest(p_ranks))
      AS b(k, r)
    WHERE b.r IS NOT NULL AND b.k IS NOT NULL
    GROUP BY b.k HAVING pg_catalog.count(*) > 1);
  v_advanced := pg_catalog.array_fill(false, ARRAY[v_n]);
  v_created := pg_catalog.array_fill(NULL::timestamptz, ARRAY[v_n]);
  FOR v_partition IN
    SELECT DISTINCT p FROM pg_catalog.unnest(v_parts) AS p ORDER BY p
  LOOP
    SELECT pg_catalog.concat(
             'INSERT INTO {schema}.message_{id} (id, message_key, ',
             'schema_version, compaction_rank, payload, partition) ',
             'OVERRIDING SYSTEM VALUE VALUES ',
             pg_catalog.string_agg(
               pg_catalog.format(
                 '(%s, %L, %L::integer, %L::bigint, %L::jsonb, %s)',
                 b.id, b.k, b.sv, b.r, b.p, v_partition),
               ', ' ORDER BY b.ord),
             ' RETURNING id, created_at')
    INTO v_sql
    FROM ROWS FROM (pg_catalog.unnest(v_ids), pg_catalog.unnest(p_keys),
                    pg_catalog.unnest(p_schema_versions),
                    pg_catalog.unnest(p_ranks), pg_catalog.unnest(p_payloads),
                    pg_catalog.unnest(v_parts))
      WITH ORDINALITY AS b(id, k, sv, r, p, part, ord)
    WHERE b.part = v_partition;
    -- An id's element: ids ascend in input order (binary search).
    FOR v_row IN EXECUTE v_sql LOOP
      v_lo := 1;
      v_hi := v_n;
      WHILE v_lo < v_hi LOOP
        v_at := (v_lo + v_hi) / 2;
        IF v_ids[v_at] < v_row.id THEN v_lo := v_at + 1; ELSE v_hi := v_at; END IF;
      END LOOP;
      v_created[v_lo] := v_row.created_at;
    END LOOP;
    -- The head rows: a key named once with its message, a repeated one
    -- with none (idle_since DEFAULT: a new row is headless).
    -- No row (a partition of uncompacted messages only): no statement.
    SELECT CASE WHEN pg_catalog.count(*) > 0 THEN pg_catalog.concat(
             'INSERT INTO {schema}.compaction_head_{id} AS h (message_key, ',
             'partition, head_id, schema_version, compaction_rank, ',
             'idle_since) VALUES ',
             pg_catalog.string_agg(
               CASE WHEN w.k IN (
                           SELECT r.k FROM pg_catalog.unnest(v_repeated) AS r(k))
                 THEN pg_catalog.format('(%L, %s, NULL, NULL, NULL, DEFAULT)',
                                        w.k, v_partition)
                 ELSE pg_catalog.format(
                        '(%L, %s, %s, %L::integer, %L::bigint, NULL)', w.k,
                        v_partition, w.id, w.sv, w.r)
               END,
               ', ' ORDER BY w.k COLLATE "C"),
             ' ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO UPDATE ',
             'SET head_id = excluded.head_id, ',
             'schema_version = excluded.schema_version, ',
             'compaction_rank = excluded.compaction_rank, ',
             'updated_at = excluded.updated_at, idle_since = NULL ',
             'WHERE excluded.head_id IS NOT NULL AND (h.head_id IS NULL ',
             'OR (excluded.schema_version, excluded.compaction_rank, ',
             'excluded.head_id) > (h.schema_version, h.compaction_rank, ',
             'h.head_id)) RETURNING h.head_id') END
    INTO v_sql
    FROM (SELECT DISTINCT ON (b.k) b.k, b.id, b.sv, b.r
          FROM ROWS FROM (pg_catalog.unnest(v_ids), pg_catalog.unnest(p_keys),
                          pg_catalog.unnest(p_schema_versions),
                          pg_catalog.unnest(p_ranks),
                          pg_catalog.unnest(v_parts)) AS b(id, k, sv, r, part)
          WHERE b.part = v_partition AND b.r IS NOT NULL
          ORDER BY b.k) w;
    IF v_sql IS NOT NULL THEN
      FOR v_row IN EXECUTE v_sql LOOP
        CONTINUE WHEN v_row.head_id IS NULL;
        v_lo := 1;
        v_hi := v_n;
        WHILE v_lo < v_hi LOOP
          v_at := (v_lo + v_hi) / 2;
          IF v_ids[v_at] < v_row.head_id THEN v_lo := v_at + 1; ELSE v_hi := v_at; END IF;
        END LOOP;
        v_advanced[v_lo] := true;
      END LOOP;
    END IF;
  END LOOP;
  -- The repeated keys' messages, in input order, their rows locked above:
  -- produce_{id}'s rule against the row as it is now.
  FOR v_row IN
    SELECT b.id, b.k, b.sv, b.r, b.part, b.ord
    FROM ROWS FROM (pg_catalog.unnest(v_ids), pg_catalog.unnest(p_keys),
                    pg_catalog.unnest(p_schema_versions),
                    pg_catalog.unnest(p_ranks), pg_catalog.unnest(v_parts))
      WITH ORDINALITY AS b(id, k, sv, r, part, ord)
    WHERE b.r IS NOT NULL
      AND b.k IN (SELECT r.k FROM pg_catalog.unnest(v_repeated) AS r(k))
    ORDER BY b.ord
  LOOP
    SELECT h.head_id, h.schema_version, h.compaction_rank INTO v_head
    FROM {schema}.compaction_head_{id} h
    WHERE h.message_key = v_row.k AND h.partition = v_row.part;
    IF v_head.head_id IS NULL
       OR (v_row.sv, v_row.r, v_row.id)
          > (v_head.schema_version, v_head.compaction_rank, v_head.head_id)
    THEN
      UPDATE {schema}.compaction_head_{id} h
      SET head_id = v_row.id, schema_version = v_row.sv,
          compaction_rank = v_row.r, updated_at = statement_timestamp(),
          idle_since = NULL
      WHERE h.message_key = v_row.k AND h.partition = v_row.part;
      v_advanced[v_row.ord] := true;
    END IF;
  END LOOP;
  RETURN QUERY
  SELECT b.id, b.at, b.adv
  FROM ROWS FROM (pg_catalog.unnest(v_ids), pg_catalog.unnest(v_created),
                  pg_catalog.unnest(v_advanced)) AS b(id, at, adv);
END
$produce_batch$;
