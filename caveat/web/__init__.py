"""The SME pages (docs/sme.md): the review queue, an item's dossier, the actions with
their previews, what changed and the shadow report, server-rendered with Jinja2 and
served by ``caveat serve`` under ``/ui`` over the application layer."""

from caveat.web._pages import create_pages

__all__ = ["create_pages"]
