"""The delivery package's own SQL: what an operator's command runs on a server, outside
any tenant (the domain's SQL lives in each domain package's ``_queries.py``)."""

from __future__ import annotations

__all__ = ["APP_ROLE_EXISTS", "CREATE_APP_ROLE", "PUBLIC_RELATIONS"]

#: Whether the application's login role exists on the server.
APP_ROLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app')"

#: The application's login role, with the attributes migrations 0003 and 0011 give
#: it: LOGIN, and by omission NOSUPERUSER, NOBYPASSRLS, NOCREATEROLE, NOCREATEDB.
#: ``pg_dump`` writes no roles (they belong to the server, not to a database), so a
#: restore into a fresh server needs it before the grants the dump carries.
CREATE_APP_ROLE = "CREATE ROLE caveat_app LOGIN"

#: How many relations (tables, sequences, views, indexes) the ``public`` schema holds: a
#: restore goes only into a database where this is zero.
PUBLIC_RELATIONS = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public'"""
