-- Trap objects for the search_path tests (test/pg/search_path_test.cpp,
-- test/daemon/traps_test.py). Run as a superuser in a database of its own:
-- they would hijack every other test's SQL in a shared database.
--
-- An untrusted role that can create objects plants look-alikes of the
-- built-in functions and operators our SQL uses: in `evil`, which the
-- database's search_path puts before pg_catalog, and in `public`, where an
-- exact-type look-alike beats a built-in reached through an implicit cast
-- (`bigint * interval`, `numeric * integer`, `pg_relation_size(oid)`).
-- Every trap counts itself in public.trap_hits (a sequence: it advances even
-- when the calling transaction rolls back) and raises, naming itself.

SET search_path = pg_catalog;  -- this script itself must not be trapped

CREATE SCHEMA evil;
CREATE SEQUENCE public.trap_hits;

CREATE FUNCTION public.trap_hit(what text) RETURNS boolean
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
  PERFORM pg_catalog.nextval('public.trap_hits');
  RAISE EXCEPTION 'trap called: %', what;
END $$;

DO $traps$
DECLARE
  schemas text[] := ARRAY['evil', 'public'];
  types text[] := ARRAY['smallint', 'integer', 'bigint', 'real',
                        'double precision', 'numeric', 'text', 'name', 'oid',
                        'regclass', 'tid', 'timestamptz', 'interval',
                        'boolean', 'jsonb'];
  -- Comparisons return boolean; arithmetic returns its left operand's type,
  -- so that an expression built on it (a cast, another operator) still
  -- parses and the trap runs instead of a type error hiding it.
  comparisons text[] := ARRAY['=', '<>', '<', '>', '<=', '>='];
  arithmetic text[] := ARRAY['+', '-', '*', '/', '||'];
  sch text; lt text; rt text; op text; cmp text; calc text; n int := 0;
BEGIN
  FOREACH sch IN ARRAY schemas LOOP
    FOREACH lt IN ARRAY types LOOP
      FOREACH rt IN ARRAY types LOOP
        n := n + 1;
        cmp := format('%I.trap_op_%s', sch, n);
        calc := format('%I.trap_calc_%s', sch, n);
        EXECUTE format(
          'CREATE FUNCTION %s(%s, %s) RETURNS boolean LANGUAGE sql '
          'AS $f$ SELECT public.trap_hit(%L) $f$',
          cmp, lt, rt, format('%s.operator(%s, %s)', sch, lt, rt));
        EXECUTE format(
          'CREATE FUNCTION %s(%s, %s) RETURNS %s LANGUAGE sql '
          'AS $f$ SELECT NULL::%s WHERE public.trap_hit(%L) $f$',
          calc, lt, rt, lt, lt, format('%s.operator(%s, %s)', sch, lt, rt));
        FOREACH op IN ARRAY comparisons LOOP
          EXECUTE format(
            'CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, '
            'FUNCTION = %s)', sch, op, lt, rt, cmp);
        END LOOP;
        FOREACH op IN ARRAY arithmetic LOOP
          EXECUTE format(
            'CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, '
            'FUNCTION = %s)', sch, op, lt, rt, calc);
        END LOOP;
      END LOOP;
    END LOOP;
  END LOOP;
END $traps$;

-- Functions the library and the daemon call, in both schemas, with the
-- built-in signature (wins in `evil` when it comes first) and with the exact
-- types a call site might pass (wins in `public` over a polymorphic or
-- implicitly cast built-in).
DO $traps$
DECLARE
  sch text;
  sig text;
  sigs text[] := ARRAY[
    'now() RETURNS timestamptz',
    'statement_timestamp() RETURNS timestamptz',
    'clock_timestamp() RETURNS timestamptz',
    'current_setting(text) RETURNS text',
    'set_config(text, text, boolean) RETURNS text',
    'to_regclass(text) RETURNS regclass',
    'pg_relation_size(oid) RETURNS bigint',
    'pg_relation_size(regclass) RETURNS bigint',
    'pg_notify(text, text) RETURNS void',
    'json_build_object(text, text, text, text, text, text) RETURNS json',
    'unnest(bigint[]) RETURNS SETOF bigint',
    'replace(text, text, text) RETURNS text',
    'format(text, text) RETURNS text',
    'pg_backend_pid() RETURNS integer',
    'pg_try_advisory_lock(bigint) RETURNS boolean',
    'nextval(regclass) RETURNS bigint',
    'lower(text) RETURNS text',
    'length(text) RETURNS integer',
    'octet_length(text) RETURNS integer',
    'to_jsonb(text) RETURNS jsonb',
    'count() RETURNS bigint'];
BEGIN
  FOREACH sch IN ARRAY ARRAY['evil', 'public'] LOOP
    FOREACH sig IN ARRAY sigs LOOP
      EXECUTE format(
        'CREATE FUNCTION %I.%s LANGUAGE plpgsql AS $f$ BEGIN '
        'PERFORM public.trap_hit(%L); END $f$',
        sch, sig, sch || '.' || sig);
    END LOOP;
  END LOOP;
END $traps$;

-- Tables and views a query could name without a schema.
CREATE VIEW evil.pg_class AS
  SELECT * FROM pg_catalog.pg_class WHERE public.trap_hit('evil.pg_class');
CREATE VIEW evil.pg_stats AS
  SELECT schemaname, tablename, attname, inherited, null_frac
  FROM pg_catalog.pg_stats WHERE public.trap_hit('evil.pg_stats');

-- Every new session of this database searches the attacker's schemas first.
DO $$
BEGIN
  EXECUTE pg_catalog.format(
    'ALTER DATABASE %I SET search_path = evil, public, pg_catalog',
    pg_catalog.current_database());
END $$;
