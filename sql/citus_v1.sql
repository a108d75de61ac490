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
