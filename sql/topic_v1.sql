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
  -- Keys compare and order by their bytes (COLLATE "C"), whatever the
  -- database's collation: the order listings promise and batches lock in
  -- does not depend on the server's locale, and the key indexes compare
  -- with memcmp instead of strcoll (test/bench/RESULTS.md).
  message_key     text COLLATE "C",
  schema_version  integer NOT NULL,
  compaction_rank bigint,
  payload         jsonb,
  created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
  -- The writing transaction (top-level) id: consumers read what a newer
  -- snapshot sees that their last one did not (lib/src/consume_read.cpp),
  -- whatever order the writers committed in. A default, so no INSERT
  -- names it.
  xid             xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
  -- A key's messages always share a partition: a stable hash of the key
  -- (the one hash partitioning relies on across upgrades), which the writer
  -- names, the CHECK below holding it to the rule; an unkeyed message takes
  -- the default set below, which spreads by id. Not a generated column: its
  -- expression is set up again for every statement that inserts, about
  -- 16 us per produce (test/bench/RESULTS.md).
  partition       integer NOT NULL,
  CONSTRAINT message_{id}_tombstone_keyed CHECK (
    payload IS NOT NULL
    OR (message_key IS NOT NULL AND compaction_rank IS NOT NULL))
);

-- The id this row just drew: a column's default is evaluated after the
-- identity's, in column order, in the same row (test/pg/produce_test.cpp
-- holds it to that). Dollar-quoted: a schema name has no '$'.
ALTER TABLE {schema}.message_{id} ALTER COLUMN partition SET DEFAULT
  ((pg_catalog.currval($seq${schema}.message_{id}_id_seq$seq$::regclass)
    % {partitions}::bigint)::integer);

-- The partition of a key (the expression every writer names), and the rule
-- a stored row keeps: its key's partition, or any one for an unkeyed
-- message. A plpgsql function, not the expression inline in the CHECK: a
-- CHECK's expression is planned again for every inserting statement (about
-- 7 us for the hash inline, 1.5 us for this call). Operators qualified: the
-- body is compiled under the calling session's search_path.
CREATE FUNCTION {schema}.in_partition_{id}(p_key text, p_partition integer)
  RETURNS boolean
  LANGUAGE plpgsql
  IMMUTABLE
AS $in_partition$
BEGIN
  IF p_key IS NULL THEN
    RETURN p_partition OPERATOR(pg_catalog.>=) 0
       AND p_partition OPERATOR(pg_catalog.<) {partitions};
  END IF;
  RETURN p_partition OPERATOR(pg_catalog.=)
    ((pg_catalog.hashtextextended(p_key, 0::bigint)
      OPERATOR(pg_catalog.%) {partitions}::bigint
      OPERATOR(pg_catalog.+) {partitions}::bigint)
     OPERATOR(pg_catalog.%) {partitions}::bigint)::integer;
END
$in_partition$;

-- With one partition (the default) the rule is "partition 0", which the
-- CHECK tests without the call: the comparison of the two literals folds
-- away when the CHECK is planned, and a batch's insert saves the call on
-- every row (about 1 us of some 17 per batched message, test/bench/
-- RESULTS.md). With more partitions the call is all that is left.
ALTER TABLE {schema}.message_{id}
  ADD CONSTRAINT message_{id}_partition_of_key
  CHECK (({partitions} OPERATOR(pg_catalog.=) 1
          AND partition OPERATOR(pg_catalog.=) 0)
         OR {schema}.in_partition_{id}(message_key, partition));

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
-- The timestamps are the server's: the application role inserts only
-- message_key (a headless row, with these defaults) and writes heads only
-- through produce_{id} below.
CREATE TABLE {schema}.compaction_head_{id} (
  -- Byte order, as message_{id}'s.
  message_key     text COLLATE "C" NOT NULL,
  head_id         bigint,
  schema_version  integer,
  compaction_rank bigint,
  -- immutable
  created_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
  -- head changed or headless row relocked
  updated_at      timestamptz NOT NULL DEFAULT statement_timestamp(),
  -- Set exactly while the row is headless, equal to updated_at. The janitor
  -- index covers this column instead of updated_at so that head advances on
  -- materialized rows change no indexed column and stay HOT updates.
  idle_since      timestamptz DEFAULT statement_timestamp(),
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

-- The lock loop's refresh of a headless row is the one head write the
-- application role makes itself (it needs the UPDATE grant on updated_at
-- and idle_since for FOR UPDATE anyway): neither may be infinite or ahead
-- of the server's clock, for every role (idle_since equals updated_at by
-- the CHECK above). Only a changed value is checked, so a row written
-- under a clock that ran ahead (a failover) stays updatable. The clock,
-- not the statement's start: a procedure that commits in a loop runs in
-- one statement.
CREATE TRIGGER updated_at_server_time
  BEFORE UPDATE ON {schema}.compaction_head_{id}
  FOR EACH ROW
  WHEN (NEW.updated_at IS DISTINCT FROM OLD.updated_at
        AND (NOT isfinite(NEW.updated_at)
             OR NEW.updated_at > clock_timestamp()))
  EXECUTE FUNCTION {schema}.refuse_client_timestamp();

-- Serves the janitor (oldest first) and the headless stats.
CREATE INDEX compaction_head_{id}_idle ON {schema}.compaction_head_{id}
  (idle_since, message_key) WHERE idle_since IS NOT NULL;

-- A compacted produce: appends the message and moves its key's head with
-- the winner rule (the head moves when it is NULL or when (schema_version,
-- rank, id) of the new message is greater), in one call. SECURITY DEFINER:
-- the application role has no write grant on the head columns, so this is
-- the only way it moves a head, and only to the message this call stored.
-- The head update touches no indexed column of a materialized row
-- (idle_since stays NULL): head advances stay HOT. The xid is assigned
-- before the insert draws its id: the log cleaner's position turns final
-- once every xid older than a pass's snapshot has ended
-- (log_cleaner_state in sql/system_v1.sql).
CREATE FUNCTION {schema}.produce_{id}(
    p_key text, p_schema_version integer, p_rank bigint, p_payload jsonb,
    OUT message_id bigint, OUT message_created_at timestamptz,
    OUT advanced boolean)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $produce$
BEGIN
  -- The statement the library sent itself before this function existed:
  -- the materialized CTE assigns the xid before the insert draws its id.
  WITH xid_first AS MATERIALIZED (SELECT pg_catalog.pg_current_xact_id()),
  m AS (
    INSERT INTO {schema}.message_{id}
      (message_key, schema_version, compaction_rank, payload, partition)
    SELECT p_key, p_schema_version, p_rank, p_payload,
           ((pg_catalog.hashtextextended(p_key, 0::bigint) % {partitions}::bigint
             + {partitions}::bigint) % {partitions}::bigint)::integer
    FROM xid_first
    RETURNING id, created_at),
  h AS (
    INSERT INTO {schema}.compaction_head_{id} AS h
      (message_key, head_id, schema_version, compaction_rank, idle_since)
    SELECT p_key, m.id, p_schema_version, p_rank, NULL FROM m
    ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO UPDATE
    SET head_id = excluded.head_id, schema_version = excluded.schema_version,
        compaction_rank = excluded.compaction_rank,
        updated_at = statement_timestamp(), idle_since = NULL
    WHERE h.head_id IS NULL
       OR (excluded.schema_version, excluded.compaction_rank,
           excluded.head_id)
          > (h.schema_version, h.compaction_rank, h.head_id)
    RETURNING h.head_id)
  SELECT m.id, m.created_at, EXISTS (SELECT 1 FROM h)
  INTO message_id, message_created_at, advanced
  FROM m;
END
$produce$;

-- Functions are executable by PUBLIC by default; grant_topic grants this
-- one to the application role.
REVOKE ALL ON FUNCTION {schema}.produce_{id}(text, integer, bigint, jsonb)
  FROM PUBLIC;

-- LockCompactionHead in one call, whatever the key's state: the lock loop
-- of doc/architecture.md run by the server, so a new key, a headless row
-- and a head each cost the client one round trip. Only a miss writes
-- (a headless row, ON CONFLICT DO NOTHING, then the loop locks whichever
-- row won); locking an existing head writes no row version, and a found
-- headless row gets its TTL restarted under the lock. Each statement of a
-- plpgsql function takes its own snapshot at READ COMMITTED, so the
-- message read after the lock sees the head the lock found, even when the
-- lock waited for a writer that moved it.
--
-- SECURITY INVOKER (the default): it does exactly what the application
-- role's grants allow it to do itself (SELECT, INSERT (message_key),
-- UPDATE (updated_at, idle_since) on the heads), so it lends no privilege.
-- No SET search_path clause: it costs a GUC save and restore on every call
-- (3-6 us of backend CPU of a 50-100 us lock; test/bench/RESULTS.md), and
-- the body needs none: every table, function and operator in it is
-- schema-qualified, so a caller's search_path, hostile or not, resolves
-- nothing in it (test/pg/search_path_test.cpp calls it under the traps).
--
-- status: 'h' the row is locked and has a head (the message columns hold
-- it; payload NULL is a tombstone), 'e' the row is locked and headless,
-- 'v' the row vanished after 16 lost insert races (a janitor deleting it
-- over and over; nothing is locked), 'g' nothing done: the session has a
-- lock_timeout and p_guarded is false, so the caller retries inside a
-- savepoint (a timeout must leave its transaction usable) with p_guarded.
CREATE FUNCTION {schema}.lock_{id}(
    p_key text, p_guarded boolean,
    OUT status "char", OUT id bigint, OUT message_key text,
    OUT schema_version integer, OUT compaction_rank bigint,
    OUT created_at timestamptz, OUT payload jsonb)
  LANGUAGE plpgsql
AS $lock$
#variable_conflict use_column
DECLARE
  v_head bigint;
BEGIN
  IF NOT p_guarded
     AND pg_catalog.current_setting('lock_timeout')
         OPERATOR(pg_catalog.<>) '0' THEN
    status := 'g';
    RETURN;
  END IF;
  FOR v_round IN 1..16 LOOP
    SELECT h.head_id INTO v_head FROM {schema}.compaction_head_{id} h
      WHERE h.message_key OPERATOR(pg_catalog.=) p_key FOR UPDATE OF h;
    IF FOUND THEN
      IF v_head IS NULL THEN
        UPDATE {schema}.compaction_head_{id} h
          SET updated_at = pg_catalog.statement_timestamp(),
              idle_since = pg_catalog.statement_timestamp()
          WHERE h.message_key OPERATOR(pg_catalog.=) p_key;
        status := 'e';
        RETURN;
      END IF;
      -- The row lock keeps head_id where the lock found it.
      SELECT m.id, m.message_key, m.schema_version, m.compaction_rank,
             m.created_at, m.payload
        INTO id, message_key, schema_version, compaction_rank, created_at,
             payload
        FROM {schema}.message_{id} m
        WHERE m.id OPERATOR(pg_catalog.=) v_head;
      status := 'h';
      RETURN;
    END IF;
    -- A miss: our row is locked by our insert; none back means another
    -- transaction's insert won the race, so lock that row next round.
    INSERT INTO {schema}.compaction_head_{id} (message_key) VALUES (p_key)
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

-- A batch of produces (Producer::ProduceBatch) in one call: the outcome of
-- producing its elements one by one in input order (each compacted one as
-- produce_{id} above would, each other one as a plain insert), set-based
-- (test/bench/RESULTS.md). One row per message, ids ascending in input
-- order; the rows come back in no particular order (the caller sorts them
-- by id). Element i of each array is message i; p_ranks NULL: not
-- compacted. SECURITY DEFINER with search_path pinned, like produce_{id}:
-- the application role moves heads through these two only.
--
-- One statement does the work: it inserts the messages, then upserts one
-- head row per compacted key in key order (byte order, COLLATE "C"), the
-- only place a batch waits for another: ON CONFLICT locks each existing
-- row in that order before it evaluates the WHERE, so batches over
-- overlapping keys queue instead of deadlocking, and each head is read
-- once, under its lock. A key the batch names once takes its message as
-- the head by produce_{id}'s rule ((schema_version, rank, id) greater, or
-- no head), and the row the upsert returns is that message's "advanced".
-- A key named more than once (two of 100 messages over 10,000 keys in
-- about 40 % of batches) needs, for each of its messages, the head it had,
-- which an upsert cannot return: its row is only locked there (or
-- inserted headless), and a second statement, which sees the locked row as
-- it is, applies the rule message by message.
--
-- p_repeated names those keys, each once: the caller has them at hand,
-- and finding them here took a statement of its own, some 3 % of a batch
-- of 100 (test/bench/RESULTS.md). A wrong list moves no head wrongly:
-- the upsert moves a row at most once, since a later proposal for a row
-- it inserted or moved fails the call (cardinality_violation), while
-- proposals that only lock it pass. So a repeated key the list leaves out
-- either fails the call or passes with at most one of its messages moving
-- the head, which is the one-by-one outcome. A key it names twice is
-- locked twice and moved once, by the second statement. A key it adds is
-- only locked in the upsert (inserted headless when new, as a lock does)
-- and moved by the second statement when the batch has a compacted
-- message for it, the outcome a key named once gets.
CREATE FUNCTION {schema}.produce_batch_{id}(
    p_keys text[], p_schema_versions integer[], p_ranks bigint[],
    p_payloads jsonb[], p_repeated text[])
  RETURNS TABLE (message_id bigint, message_created_at timestamptz,
                 advanced boolean)
  LANGUAGE plpgsql
  SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
  -- Planned once per session: by its cost estimates the planner kept
  -- planning the statements of repeated keys again on every call (about
  -- 150 us each time); nothing here needs a plan for the values at hand.
  SET plan_cache_mode = force_generic_plan
AS $produce_batch$
#variable_conflict use_column
DECLARE
  -- Keys with more than one compacted message in the batch (p_repeated
  -- without NULLs, which name no key).
  v_repeated text[] :=
    pg_catalog.array_remove(coalesce(p_repeated, '{}'), NULL);
  -- The batch's ids by element, drawn first when a key repeats (the
  -- second statement needs them); NULL: drawn by the insert.
  v_ids bigint[];
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
  -- The xid before the first id is drawn (see produce_{id}).
  PERFORM pg_catalog.pg_current_xact_id();
  IF pg_catalog.cardinality(v_repeated) > 0 THEN
    v_ids := ARRAY(
      SELECT pg_catalog.nextval(
               $seq${schema}.message_{id}_id_seq$seq$::regclass)
      FROM pg_catalog.generate_series(1, pg_catalog.cardinality(p_keys)));
  END IF;
  -- The ids in input order (nextval is volatile: evaluated after the
  -- sort), so that an unkeyed message's partition can follow its id as the
  -- column's default does for a single insert.
  RETURN QUERY
  WITH m AS (
    INSERT INTO {schema}.message_{id} AS m
      (id, message_key, schema_version, compaction_rank, payload, partition)
    OVERRIDING SYSTEM VALUE
    SELECT x.id, x.k, x.sv, x.r, x.p,
           coalesce(((pg_catalog.hashtextextended(x.k, 0::bigint)
                      % {partitions}::bigint + {partitions}::bigint)
                     % {partitions}::bigint)::integer,
                    (x.id % {partitions}::bigint)::integer)
    FROM (SELECT coalesce(v_ids[b.ord::integer],
                          pg_catalog.nextval(
                            $seq${schema}.message_{id}_id_seq$seq$::regclass))
                   AS id,
                 b.k, b.sv, b.r, b.p
          FROM ROWS FROM (pg_catalog.unnest(p_keys),
                          pg_catalog.unnest(p_schema_versions),
                          pg_catalog.unnest(p_ranks),
                          pg_catalog.unnest(p_payloads))
            WITH ORDINALITY AS b(k, sv, r, p, ord)
          ORDER BY b.ord OFFSET 0) x
    RETURNING m.id, m.created_at, m.message_key, m.schema_version,
              m.compaction_rank),
  -- A repeated key's row goes in with a NULL head: inserted headless when
  -- new, only locked when it exists. The update touches no indexed column
  -- of a materialized row (idle_since stays NULL): head advances stay HOT.
  h AS (
    INSERT INTO {schema}.compaction_head_{id} AS h
      (message_key, head_id, schema_version, compaction_rank, idle_since)
    SELECT w.k, w.id, w.sv, w.r, w.idle
    FROM (SELECT m.message_key, m.id, m.schema_version, m.compaction_rank,
                 NULL::timestamptz
          FROM m
          -- A NULL key goes on to fail the head's NOT NULL, as in
          -- produce_{id}.
          WHERE m.compaction_rank IS NOT NULL
            AND (m.message_key IS NULL
                 OR m.message_key NOT IN (
                      SELECT r.k FROM pg_catalog.unnest(v_repeated) AS r(k)))
          UNION ALL
          SELECT r.k, NULL, NULL, NULL, statement_timestamp()
          FROM pg_catalog.unnest(v_repeated) AS r(k)) AS w(k, id, sv, r, idle)
    ORDER BY w.k COLLATE "C"
    ON CONFLICT ON CONSTRAINT compaction_head_{id}_pkey DO UPDATE
    SET head_id = excluded.head_id, schema_version = excluded.schema_version,
        compaction_rank = excluded.compaction_rank,
        updated_at = statement_timestamp(), idle_since = NULL
    WHERE excluded.head_id IS NOT NULL
      AND (h.head_id IS NULL
           OR (excluded.schema_version, excluded.compaction_rank,
               excluded.head_id)
              > (h.schema_version, h.compaction_rank, h.head_id))
    RETURNING h.head_id)
  SELECT m.id, m.created_at, h.head_id IS NOT NULL
  FROM m LEFT JOIN h ON h.head_id = m.id
  WHERE m.compaction_rank IS NULL OR m.message_key IS NULL
     OR m.message_key NOT IN (
          SELECT r.k FROM pg_catalog.unnest(v_repeated) AS r(k));
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  -- The repeated keys' messages, their rows locked above: produce_{id}'s
  -- rule message by message, against the head as the lock found it (a new
  -- statement, so a new snapshot at READ COMMITTED) and the running maximum
  -- of the key's earlier messages in the batch (arrays compare element by
  -- element, as the row comparison does). The heads are looked up per
  -- message and the update names its keys as an array: a join made the
  -- planner hash the whole head table. created_at is the column's default,
  -- the same for every message of this call.
  RETURN QUERY
  WITH e AS (
    SELECT x.id, x.k, x.sv, x.r,
           coalesce(
             ARRAY[x.sv::bigint, x.r, x.id]
             > (SELECT ARRAY[h.schema_version::bigint, h.compaction_rank,
                             h.head_id]
                FROM {schema}.compaction_head_{id} h
                WHERE h.message_key = x.k AND h.head_id IS NOT NULL),
             true)
           AND coalesce(
                 ARRAY[x.sv::bigint, x.r, x.id]
                 > pg_catalog.max(ARRAY[x.sv::bigint, x.r, x.id])
                     OVER (PARTITION BY x.k ORDER BY x.id
                           ROWS BETWEEN UNBOUNDED PRECEDING
                                AND 1 PRECEDING),
                 true) AS advanced
    FROM ROWS FROM (pg_catalog.unnest(v_ids), pg_catalog.unnest(p_keys),
                    pg_catalog.unnest(p_schema_versions),
                    pg_catalog.unnest(p_ranks)) AS x(id, k, sv, r)
    WHERE x.r IS NOT NULL
      AND x.k IN (SELECT r.k FROM pg_catalog.unnest(v_repeated) AS r(k))),
  -- Each key's head moves once, to its last advancing message (the
  -- greatest).
  u AS (
    UPDATE {schema}.compaction_head_{id} AS h
    SET head_id = a.id, schema_version = a.sv, compaction_rank = a.r,
        updated_at = statement_timestamp(), idle_since = NULL
    FROM (SELECT DISTINCT ON (e.k) e.k, e.id, e.sv, e.r
          FROM e WHERE e.advanced ORDER BY e.k, e.id DESC) a
    WHERE h.message_key = a.k
      AND h.message_key = ANY (ARRAY(SELECT e.k FROM e WHERE e.advanced)))
  SELECT e.id, statement_timestamp(), e.advanced FROM e;
END
$produce_batch$;

REVOKE ALL ON FUNCTION
  {schema}.produce_batch_{id}(text[], integer[], bigint[], jsonb[], text[])
  FROM PUBLIC;
