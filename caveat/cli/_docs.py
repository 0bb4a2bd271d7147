"""``caveat docs import|list|show|revoke|redact``: knowledge beside memory (model §6;
docs/knowledge.md), runbooks and postmortems as documents split at their headings."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

docs_app = typer.Typer(
    help="Knowledge: Markdown runbooks and postmortems, split at headings, read like evidence.",
    no_args_is_help=True,
)
app.add_typer(docs_app, name="docs")

DocArg = Annotated[str, typer.Argument(help="The document's id (e.g. db/failover.md).")]
ReasonOpt = Annotated[
    str, typer.Option("--reason", help="Why (kept on the audit record).", show_default=False)
]


def _split(values: list[str] | None) -> list[str]:
    """Repeated options, each a comma-separated list."""
    return [v.strip() for raw in values or [] for v in raw.split(",") if v.strip()]


@docs_app.command("import")
@refusals
def docs_import(
    paths: Annotated[
        list[str], typer.Argument(help="Markdown files, or directories read recursively.")
    ],
    readers: Annotated[
        list[str] | None,
        typer.Option(
            "--readers",
            help="Capabilities any one of which reads the documents (comma-separated or "
            "repeated); none: the whole tenant.",
        ),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option("--deny", help="principal:<id> or cap:<capability> that may never read them."),
    ] = None,
    classification: Annotated[
        str | None, typer.Option("--classification", help="One of the tenant's levels.")
    ] = None,
    purpose: Annotated[
        list[str] | None,
        typer.Option("--purpose", help="A purpose they serve (repeat); none: every purpose."),
    ] = None,
    uri_base: Annotated[
        str | None,
        typer.Option(
            "--uri-base",
            help="Where the documents live, e.g. https://git.example/runbooks/blob/main: "
            "each uri is <base>/<id> (default file:<id>).",
        ),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import Markdown documents: a file's id is its name, a directory's files are
    named by their path inside it. Unchanged documents stay as they are, changed ones
    get a new version whose passages replace the old ones, revoked ones are skipped.
    All or nothing: bad input exits 2 and imports nothing."""
    from caveat import app as use
    from caveat.app._docs import import_view

    documents = use.documents_from_paths(paths, uri_base=uri_base)
    with use.serving(tenant, as_) as (rt, actor):
        report = use.docs_import(
            rt,
            actor,
            documents,
            readers=_split(readers),
            deny=_split(deny),
            classification=classification,
            purposes=_split(purpose),
        )
    view = import_view(report)
    if as_json:
        typer.echo(json.dumps(view))
        return
    for d in view["documents"]:
        more = f", {d['passages']} passage(s)" if d["outcome"] in ("imported", "updated") else ""
        typer.echo(f"{d['outcome']}: {d['id']} v{d['version']}{more}")
    typer.echo(
        f"{view['imported']} imported, {view['updated']} updated, {view['unchanged']} "
        f"unchanged, {view['revoked']} revoked (skipped); {view['passages']} passage(s) written"
    )


def _line(doc: dict[str, Any]) -> str:
    access = f"readers {','.join(doc['readers'])}" if doc["readers"] else "tenant-readable"
    if doc["classification"]:
        access += f", {doc['classification']}"
    return (
        f"{doc['id']}  v{doc['version']}  {doc['state']}  {doc['passages']} passage(s)  "
        f"{access}  {doc['title'] or ''}"
    ).rstrip()


@docs_app.command("list")
@refusals
def docs_list(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """List the documents you may read: id, version, state, passages, access, title."""
    from caveat import app as use
    from caveat.app._docs import document_view

    with use.serving(tenant, as_) as (rt, actor):
        rows = [document_view(d) for d in use.docs_list(rt, actor)]
    if as_json:
        typer.echo(json.dumps({"documents": rows}))
        return
    if not rows:
        typer.echo("no documents")
    for row in rows:
        typer.echo(_line(row))


@docs_app.command("show")
@refusals
def docs_show(
    document_id: DocArg, tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False
) -> None:
    """Print a document's current version, its passages (ref, heading path, text) and
    its versions."""
    from caveat import app as use
    from caveat.app._docs import detail_view

    with use.serving(tenant, as_) as (rt, actor):
        view = detail_view(use.docs_show(rt, actor, document_id))
    if as_json:
        typer.echo(json.dumps(view))
        return
    doc = view["document"]
    typer.echo(_line(doc))
    typer.echo(f"  uri: {doc['uri']}  digest: {doc['digest'][:12]}")
    for p in view["passages"]:
        typer.echo(f"- {p['ref']}  ({' / '.join(p['heading_path']) or 'top'})")
        for text in p["text"].splitlines():
            typer.echo(f"    {text}")
    typer.echo("versions:")
    for v in view["history"]:
        typer.echo(f"  v{v['version']}  {v['state']}  {v['imported_at']} by {v['imported_by']}")


@docs_app.command("revoke")
@refusals
def docs_revoke(
    document_id: DocArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a document: its passages are withdrawn; it stays listed as revoked, and a
    later import of it is skipped."""
    from caveat import app as use
    from caveat.app._docs import document_view

    with use.serving(tenant, as_) as (rt, actor):
        view = document_view(use.docs_revoke(rt, actor, document_id, reason=reason))
    if as_json:
        typer.echo(json.dumps(view))
        return
    typer.echo(f"revoked {view['id']} v{view['version']}")


@docs_app.command("redact")
@refusals
def docs_redact(
    document_id: DocArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Redact a document: every version hidden from every read, every passage
    withdrawn."""
    from caveat import app as use
    from caveat.app._docs import redact_view

    with use.serving(tenant, as_) as (rt, actor):
        n = use.docs_redact(rt, actor, document_id, reason=reason)
    if as_json:
        typer.echo(json.dumps(redact_view(document_id, n)))
        return
    typer.echo(f"redacted {document_id}: {n} passage(s) withdrawn")
