"""The composition root: settings -> database -> sessions, handed to the domain packages;
the process-lifetime runtime every door shares."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TypeVar

from sqlalchemy import Connection, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
import recall as recall_api
from caveat import _queries as q
from caveat import _tracing as tracing
from caveat import db
from caveat.app._errors import mapped
from caveat.app._routing import ReadRoutes, parse_token
from caveat.settings import Settings
from predicates.errors import Conflict, NotFound
from recall import ContextCheck, Embedder, RecallRequest, RecallResult, UseRecord

__all__ = [
    "LOCAL_ADMIN",
    "Runtime",
    "acting",
    "acting_as",
    "open_runtime",
    "serving",
    "utcnow",
]

#: Whom the CLI acts as unless ``--as`` names a principal: the store's operator.
LOCAL_ADMIN = claims.Actor("local-admin", "admin")

_T = TypeVar("_T")


def utcnow() -> datetime:
    """The wall clock, timezone-aware UTC (replay uses a virtual clock instead)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Runtime:
    """What lives as long as the process: settings, the server URL, one engine on the
    main database, sessions that act for the tenant, and the tenant's world, cached
    and checked against its ``world_version`` on every use (``factgen.WorldCache``).

    With a replica (``CAVEAT_REPLICA_URL``), ``replica`` holds sessions on it, logged in
    as the application role like the primary's; recall and the context guard's read
    go there only when it is proven fresh (``routed``), and ``routes`` counts who
    served each of those reads."""

    settings: Settings
    server_url: str
    engine: Engine
    tenant: str
    sessions: sessionmaker[Session]
    worlds: factgen.WorldCache = field(default_factory=factgen.WorldCache)
    #: the actors tokens authenticated as, checked against the tenant's credentials version
    tokens: claims.TokenCache = field(default_factory=claims.TokenCache)
    embedder: Embedder | None = None
    fusion: recall_api.Fusion = recall_api.FUSION
    replica_engine: Engine | None = None
    replica: sessionmaker[Session] | None = None
    routes: ReadRoutes = field(default_factory=ReadRoutes)
    #: writes a rollup's text from its episodes (an LLM client); None: the deterministic text
    summariser: lifecycle.Summariser | None = None

    @classmethod
    def over(
        cls,
        engine: Engine,
        tenant: str,
        *,
        embedder: Embedder | None = None,
        settings: Settings | None = None,
        server_url: str = "",
        replica: Engine | None = None,
    ) -> Runtime:
        """A runtime on an engine the caller made (replay's per-scenario database, a
        test's), acting for ``tenant``, reading from ``replica`` when it is fresh; the
        caller disposes of the engines."""
        return cls(
            settings or Settings(),
            server_url,
            engine,
            tenant,
            db.tenant_sessions(engine, tenant),
            embedder=embedder,
            replica_engine=replica,
            replica=None if replica is None else db.tenant_sessions(replica, tenant),
        )

    @contextmanager
    def transaction(self, use: str | None = None) -> Iterator[Session]:
        """One transaction for the tenant, committed on success; database errors come
        out as the error tree (``caveat.app._errors.mapped``). ``use`` names the use
        case: the transaction's ``application_name`` is then ``caveat:<use>``."""
        with mapped(), self.sessions.begin() as session:
            if use is not None:
                session.info[db.USE_CASE] = use
            yield session

    def store(self) -> str:
        """Which store this is, as a person names it: ``DATABASE_URL=<the server, no
        password>`` or the embedded server's ``CAVEAT_HOME=<directory>``."""
        if self.settings.database_url:
            shown = make_url(db.to_sqlalchemy_url(self.settings.database_url))
            shown = shown.set(drivername="postgresql")
            return f"DATABASE_URL={shown.render_as_string(hide_password=True)}"
        return f"the embedded server in CAVEAT_HOME={self.settings.home}"

    def for_tenant(self, tenant: str) -> Runtime:
        """The same engines, embedder, world cache and read counts, acting for ``tenant``."""
        if tenant == self.tenant:
            return self
        replica = self.replica_engine
        return replace(
            self,
            tenant=tenant,
            sessions=db.tenant_sessions(self.engine, tenant),
            replica=None if replica is None else db.tenant_sessions(replica, tenant),
        )

    def routed(self, use: str, token: str | None, read: Callable[[Session], _T]) -> _T:
        """``read`` (the use case ``use``) in a transaction of its own on the replica when
        it is proven fresh, else on the primary (counted in ``routes``).

        Fresh: in the replica's transaction, before ``read``, its copy of the tenant's
        withdrawal horizon has the value the primary had just before (every withdrawal
        committed by then is replayed) and its replay position has passed ``token`` (a
        write position the caller was given). A standby's later snapshots are never
        older, so ``read`` sees at least that. A replica that cannot be reached, or fails
        the read, sends it to the primary."""
        lsn = parse_token(token)
        if self.replica is None:
            why = "no_replica"
        else:
            with self.autocommit() as auto:
                horizon = q.withdrawal_horizon(connection=auto, tenant=self.tenant)
            try:
                with mapped(), self.replica.begin() as s:
                    s.info[db.USE_CASE] = use
                    lag = q.replica_lag(session=s, tenant=self.tenant, horizon=horizon, token=lsn)
                    if lag is None:
                        answer = read(s)
                        self.routes.served("replica", "fresh")
                        return answer
                why = lag
            except (db.DatabaseError, Conflict):  # down, or a conflict with recovery
                why = "replica_failed"
            except NotFound:  # a case opened since the replica's last replay: ask the primary
                why = "not_found"
        with self.transaction(use) as s:
            answer = read(s)
        self.routes.served("primary", why)
        return answer

    def write_position(self) -> str:
        """A consistency token: the primary's write position now, past every commit made
        before this call (a caller's write included, when it asks after its answer)."""
        with mapped(), self.engine.connect() as conn:
            return q.write_position(connection=conn)

    @contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """A connection in autocommit, for a read of one statement (a transaction would
        cost three round trips more) or a session-level lock; database errors come out
        as the error tree."""
        with mapped(), self.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    def credentials_version(self) -> int:
        """The tenant's credentials version now (``claims.credentials_version``), in
        autocommit."""
        with self.autocommit() as auto:
            return claims.credentials_version(connection=auto, tenant=self.tenant)

    def world(self, session: Session) -> factgen.World:
        """The tenant's world as ``session`` sees it, from the cache while it is current."""
        return self.worlds.get(session=session, tenant=self.tenant)

    def recall(
        self,
        actor: claims.Actor,
        request: RecallRequest,
        now: datetime | None = None,
        *,
        token: str | None = None,
    ) -> RecallResult:
        """``recall.recall`` in a transaction of its own: a read, nothing recorded; on the
        replica when it is fresh for the tenant and ``token`` (``routed``)."""
        at = now or utcnow()

        def read(s: Session) -> RecallResult:
            known_case(s, self.tenant, request.case_id)
            return recall_api.recall(
                session=s,
                tenant=self.tenant,
                actor=actor,
                request=request,
                now=at,
                world=self.world(s),
                embedder=self.embedder,
                fusion=self.fusion,
            )

        return self.routed("recall", token, read)

    def embed_pending(
        self,
        *,
        batch: int = 256,
        progress: Callable[[int], None] | None = None,
        now: datetime | None = None,
    ) -> int:
        """Drain the tenant's embedding queue, one transaction per batch (so progress
        commits and a concurrent drain shares the work), then embed the knowledge
        passages that have no vector under the embedder; the number of items and
        passages taken. Without an embedder there is nothing to do."""
        if self.embedder is None:
            return 0
        total = 0
        for drain in (recall_api.embed_pending, recall_api.embed_passages):
            while True:
                with self.transaction() as s:
                    n = drain(
                        session=s,
                        tenant=self.tenant,
                        embedder=self.embedder,
                        now=now or utcnow(),
                        batch=batch,
                    )
                if n == 0:
                    break
                total += n
                if progress is not None:
                    progress(n)
        return total

    def queue_depth(self) -> int:
        """Items waiting for an embedding."""
        with self.transaction() as s:
            return recall_api.queue_depth(session=s, tenant=self.tenant)

    def record_use(
        self,
        actor: claims.Actor,
        request: RecallRequest,
        used: Sequence[int],
        now: datetime | None = None,
    ) -> UseRecord:
        """``recall.record_use`` in a transaction of its own."""
        with self.transaction("record_use") as s:
            known_case(s, self.tenant, request.case_id)
            return recall_api.record_use(
                session=s,
                tenant=self.tenant,
                actor=actor,
                request=request,
                used=used,
                now=now or utcnow(),
                world=self.world(s),
            )

    def check_context(
        self,
        actor: claims.Actor,
        item_ids: Sequence[int],
        case_id: str | None,
        now: datetime | None = None,
        *,
        record: bool = False,
        token: str | None = None,
        observations: Sequence[factgen.Observation] = (),
        session: str | None = None,
    ) -> ContextCheck:
        """The context guard: the read, or with ``record`` the read and its recording;
        ``observations`` are inline, as a recall's.

        The read is ``routed`` (the replica when it is fresh). With ``record``, when the
        answer holds a verify-on-next-use check (an expired TTL reads as one), there is
        something to record: the primary records it and gives the answer, as recorded."""
        at = now or utcnow()

        def guard(s: Session, check: Callable[..., ContextCheck]) -> ContextCheck:
            known_case(s, self.tenant, case_id)
            return check(
                session=s,
                tenant=self.tenant,
                actor=actor,
                item_ids=item_ids,
                case_id=case_id,
                now=at,
                world=self.world(s),
                observations=observations,
                session_id=session,
            )

        if record and self.replica is None:
            parse_token(token)
            with self.transaction("record_context") as s:
                answer = guard(s, recall_api.record_context)
            self.routes.served("primary", "no_replica")
            return answer
        answer = self.routed("check_context", token, lambda s: guard(s, recall_api.check_context))
        if record and answer.checked:
            with self.transaction("record_context") as s:
                answer = guard(s, recall_api.record_context)
            self.routes.served("primary", "records")
        return answer


def known_case(session: Session, tenant: str, case_id: str | None) -> None:
    """``not_found`` for a case id the tenant has no case of (recall, the use of what it
    returned and the context guard name the case asking: an unknown one is refused at
    once, not at the agent's later ``cite``)."""
    if case_id is not None:
        lifecycle.get_case(session=session, tenant=tenant, case_id=case_id)


@contextmanager
def open_runtime(
    settings: Settings | None = None,
    *,
    tenant: str | None = None,
    migrate: bool = False,
    embedder: Embedder | str | None = "settings",
) -> Iterator[Runtime]:
    """Start or attach to the database (embedded unless ``DATABASE_URL``), migrate it if
    asked to, or if it is the embedded one and not at the newest revision.

    Sessions act for ``tenant`` (default: the settings' tenant): every
    transaction names it, and row-level security shows only its rows. The embedder
    is the settings' (``CAVEAT_EMBEDDER``) unless one is given (None: no dense channel).
    """
    settings = settings or Settings()
    tracing.configure()  # spans exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set
    url = db.server_url(settings.database_url, settings.pgdata)
    # the embedded database is caveat's own: it migrates itself on first use
    if migrate or (settings.database_url is None and not db.at_head(url)):
        db.migrate(url)
    engine = db.make_app_engine(url, **settings.app_engine_options())
    replica: Engine | None = None
    name = tenant or settings.tenant
    try:
        if settings.replica_url:
            try:
                replica = db.make_app_engine(
                    db.to_sqlalchemy_url(settings.replica_url), **settings.app_engine_options()
                )
            except db.DatabaseError as exc:  # say which server: the primary answered
                raise db.DatabaseError(
                    f"the replica (CAVEAT_REPLICA_URL): {exc.message}", **exc.detail
                ) from exc
        chosen = (
            recall_api.make_embedder(settings.embedder, cache_dir=settings.models_dir)
            if isinstance(embedder, str)
            else embedder
        )
        yield Runtime.over(
            engine, name, embedder=chosen, settings=settings, server_url=url, replica=replica
        )
    finally:
        engine.dispose()
        if replica is not None:
            replica.dispose()


def acting_as(session: Session, tenant: str, principal: str | None) -> claims.Actor:
    """The local admin, or the named principal of ``tenant`` (``NotFound`` if unknown)."""
    if principal is None:
        return LOCAL_ADMIN
    return claims.get_actor(session=session, tenant=tenant, principal=principal)


@contextmanager
def acting(
    tenant: str | None, principal: str | None
) -> Iterator[tuple[Session, str, claims.Actor]]:
    """One read-only-in-spirit transaction of a diagnostic command: ``(session, tenant,
    actor)``; ``tenant`` None means the settings' default, ``principal`` None the local
    admin. Use cases go through ``serving`` and ``caveat.app`` instead."""
    with open_runtime(tenant=tenant, embedder=None) as rt, rt.transaction() as session:
        yield session, rt.tenant, acting_as(session, rt.tenant, principal)


@contextmanager
def serving(
    tenant: str | None,
    principal: str | None,
    *,
    embedder: Embedder | str | None = None,
) -> Iterator[tuple[Runtime, claims.Actor]]:
    """A runtime for one command and the actor it acts as: the local admin, or the named
    principal of the tenant (``not_found`` if unknown). No embedder unless asked for
    (only recall uses one; loading a model costs seconds)."""
    with open_runtime(tenant=tenant, embedder=embedder) as rt:
        with rt.transaction() as session:
            actor = acting_as(session, rt.tenant, principal)
        yield rt, actor
