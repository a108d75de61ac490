-- System baseline v1 of libcompaction.
--
-- {schema} stands for the quoted schema identifier (default "compaction");
-- the library substitutes it and runs this file in one transaction.
-- Pre-v1 this baseline is edited in place: recreate an existing database.

CREATE SCHEMA IF NOT EXISTS {schema};

-- One row per registered topic. Generated tables are named after `id` only.
CREATE TABLE IF NOT EXISTS {schema}.topic (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name            text NOT NULL UNIQUE,
  headless_ttl_ms bigint NOT NULL DEFAULT 3600000 CHECK (headless_ttl_ms > 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Baseline versions: topic_id NULL is the system baseline, otherwise the
-- baseline the topic's generated tables were created from.
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
  topic_id     bigint REFERENCES {schema}.topic (id) ON DELETE CASCADE,
  version      integer NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT now(),
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
