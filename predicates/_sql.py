"""PostgreSQL source of the in-database evaluator (same semantics as ``_eval``).

``caveat_eval(cond, obs)`` returns TRUE, FALSE or NULL (UNKNOWN) for one
condition document (``condition_json``) and one encoded observation
(``encode``) or NULL when there is none. ``caveat_applies(conditions,
snapshot, subject)`` folds a whole item and never returns NULL: NULL
results are coalesced *before* folding (``bool_and`` would skip them).
The text contains no ``%`` and no ``:name`` tokens, so it can be executed
as is by psycopg, SQLAlchemy ``text()`` or Alembic ``op.execute``.
"""

from __future__ import annotations

__all__ = ["SQL_EVALUATOR_DDL", "SQL_FUNCTIONS"]

#: Names of the functions the DDL defines, in dependency order.
SQL_FUNCTIONS: tuple[str, ...] = (
    "caveat_version_cmp(jsonb, jsonb)",
    "caveat_cmp(text, jsonb, jsonb)",
    "caveat_eval(jsonb, jsonb)",
    "caveat_applies(jsonb, jsonb, text)",
)

SQL_EVALUATOR_DDL = r"""
-- caveat predicate evaluator (predicates/_sql.py); docs/predicates.md.

-- Versions: arrays of integers compared per segment, missing segments read as 0.
CREATE OR REPLACE FUNCTION caveat_version_cmp(a jsonb, b jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $caveat$
DECLARE
    n integer := greatest(jsonb_array_length(a), jsonb_array_length(b));
    x numeric;
    y numeric;
BEGIN
    FOR i IN 0 .. n - 1 LOOP
        x := coalesce((a ->> i)::numeric, 0);
        y := coalesce((b ->> i)::numeric, 0);
        IF x < y THEN
            RETURN -1;
        ELSIF x > y THEN
            RETURN 1;
        END IF;
    END LOOP;
    RETURN 0;
END
$caveat$;

-- Three-way comparison of two encoded values of type t; NULL when not comparable.
CREATE OR REPLACE FUNCTION caveat_cmp(t text, a jsonb, b jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    ta text := jsonb_typeof(a);
    tb text := jsonb_typeof(b);
    x numeric;
    y numeric;
    s text;
    r text;
BEGIN
    IF ta IS NULL OR tb IS NULL OR ta <> tb THEN
        RETURN NULL;
    END IF;
    IF t IN ('int', 'float', 'duration', 'timestamp') THEN
        IF ta <> 'number' THEN
            RETURN NULL;
        END IF;
        x := (a #>> '{}')::numeric;
        y := (b #>> '{}')::numeric;
        RETURN CASE WHEN x < y THEN -1 WHEN x > y THEN 1 ELSE 0 END;
    ELSIF t IN ('string', 'enum') THEN
        IF ta <> 'string' THEN
            RETURN NULL;
        END IF;
        s := a #>> '{}';
        r := b #>> '{}';
        RETURN CASE
            WHEN s = r THEN 0
            WHEN s COLLATE "C" < r COLLATE "C" THEN -1
            ELSE 1
        END;
    ELSIF t = 'bool' THEN
        IF ta <> 'boolean' THEN
            RETURN NULL;
        END IF;
        RETURN CASE WHEN a = b THEN 0 WHEN a < b THEN -1 ELSE 1 END;
    ELSIF t = 'version' THEN
        IF ta <> 'array' THEN
            RETURN NULL;
        END IF;
        RETURN caveat_version_cmp(a, b);
    END IF;
    RETURN NULL;
END
$caveat$;

-- One condition against one observation: TRUE, FALSE or NULL (UNKNOWN).
-- No observation: UNKNOWN, except `exists`, which is FALSE.
-- An observation of another type than the condition's: UNKNOWN.
CREATE OR REPLACE FUNCTION caveat_eval(cond jsonb, obs jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    op text := cond ->> 'op';
    t text := cond ->> 't';
    lit jsonb := cond -> 'v';
    v jsonb;
    e jsonb;
    c integer;
    undecided boolean := false;
BEGIN
    IF cond IS NULL OR op IS NULL THEN
        RETURN NULL;
    END IF;
    IF obs IS NULL OR jsonb_typeof(obs) IS DISTINCT FROM 'object' THEN
        RETURN CASE WHEN op = 'exists' THEN false END;
    END IF;
    v := obs -> 'v';
    IF (obs ->> 't') IS DISTINCT FROM t OR v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    IF op = 'exists' THEN
        RETURN true;
    ELSIF op = 'in' OR op = 'not_in' THEN
        IF jsonb_typeof(lit) IS DISTINCT FROM 'array' THEN
            RETURN NULL;
        END IF;
        FOR e IN SELECT x FROM jsonb_array_elements(lit) AS x LOOP
            c := caveat_cmp(t, v, e);
            IF c = 0 THEN
                RETURN op = 'in';
            ELSIF c IS NULL THEN
                undecided := true;
            END IF;
        END LOOP;
        IF undecided THEN
            RETURN NULL;
        END IF;
        RETURN op = 'not_in';
    ELSIF op = 'contains' OR op = 'matches' THEN
        IF t <> 'string' OR jsonb_typeof(v) <> 'string'
                OR jsonb_typeof(lit) IS DISTINCT FROM 'string' THEN
            RETURN NULL;
        END IF;
        IF op = 'contains' THEN
            RETURN strpos(v #>> '{}', lit #>> '{}') > 0;
        END IF;
        RETURN (v #>> '{}') ~ (lit #>> '{}');
    END IF;
    c := caveat_cmp(t, v, lit);
    RETURN CASE op
        WHEN 'eq' THEN c = 0
        WHEN 'ne' THEN c <> 0
        WHEN 'lt' THEN c < 0
        WHEN 'lte' THEN c <= 0
        WHEN 'gt' THEN c > 0
        WHEN 'gte' THEN c >= 0
    END;
END
$caveat$;

-- Does an item apply? Every required condition TRUE and every excluded one
-- FALSE; UNKNOWN (NULL) is never granted. Never returns NULL.
-- conditions: {"required": [cond...], "excluded": [cond...]} (NULL or a
-- missing list means none); each cond has "a" (attribute path) and "e"
-- (entity or null: then `subject`). snapshot: {subject: {path: encoded obs}}.
CREATE OR REPLACE FUNCTION caveat_applies(conditions jsonb, snapshot jsonb, subject text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $caveat$
DECLARE
    req jsonb := coalesce(conditions -> 'required', '[]'::jsonb);
    exc jsonb := coalesce(conditions -> 'excluded', '[]'::jsonb);
    c jsonb;
BEGIN
    IF conditions IS NULL THEN
        RETURN true;
    END IF;
    IF jsonb_typeof(conditions) <> 'object'
            OR jsonb_typeof(req) <> 'array' OR jsonb_typeof(exc) <> 'array' THEN
        RETURN false;
    END IF;
    FOR c IN SELECT x FROM jsonb_array_elements(req) AS x LOOP
        IF caveat_eval(c, snapshot -> coalesce(c ->> 'e', subject) -> (c ->> 'a'))
                IS NOT TRUE THEN
            RETURN false;
        END IF;
    END LOOP;
    FOR c IN SELECT x FROM jsonb_array_elements(exc) AS x LOOP
        IF caveat_eval(c, snapshot -> coalesce(c ->> 'e', subject) -> (c ->> 'a'))
                IS NOT FALSE THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$caveat$;
"""
