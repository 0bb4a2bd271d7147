"""The edge: connectors to the systems caveat does not own (architecture.md, "The
edge"). Hooks (docs/hooks.md): ``receive`` and one translator per sender."""

from caveat.connectors._hooks import Translation, hook_actor, receive, translators

__all__ = ["Translation", "hook_actor", "receive", "translators"]
