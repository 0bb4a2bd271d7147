"""Hook deliveries (model §2.2): authenticate the sender, translate its payload, act.

``receive`` is what ``POST /v1/hooks/{kind}`` and ``caveat hooks post`` call:

1. the kind names a translator (``not_found`` otherwise);
2. the sender authenticates: a bearer token of role ``source`` (its tenant is the
   token's), or, without one, the sender's HMAC signature over the raw body checked in
   constant time against the secret in the environment variable ``sources.yaml``
   names (GitHub, PagerDuty; the tenant is ``tenant`` or the server's); else
   ``unauthenticated``;
3. the translator, a pure function of the body, the headers, the tenant's
   ``HooksConfig`` and the clock, gives the actions (``caveat.app.HookAction``), the
   sender's delivery id and its timestamp, or raises a typed refusal;
4. ``caveat.app.deliver_hook`` acts on them, once per delivery id.

Steps 2 (the token, or the secret's name in ``hooks:``) to 4 are one transaction:
``deliver_hook`` authenticates the token and reads the mapping, then calls the
translation. Any refusal on the way is audited (``caveat.app.refuse_hook``) and
raised: nothing of the delivery is written. docs/hooks.md is the reference.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from datetime import datetime

import claims
import factgen
from caveat import app as use
from caveat._tracing import annotate, tracer
from predicates import ValueType, coerce
from predicates.errors import (
    CaveatError,
    DocumentError,
    Forbidden,
    NotFound,
    Unauthenticated,
    ValueTypeError,
    shown,
)

__all__ = [
    "MAX_BODY",
    "Translation",
    "Translator",
    "read_json",
    "receive",
    "signature_ok",
    "timestamp",
    "translators",
]

#: The largest body a hook accepts (bytes); a larger one is refused (``too_large``).
MAX_BODY = 1 << 20
_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")


#: What a payload asks for (``caveat.app.HookPlan``): the actions, the sender's
#: delivery id and its own timestamp.
Translation = use.HookPlan


#: A translator: (raw body, lower-cased headers, the tenant's hooks config, now).
Translator = Callable[[bytes, Mapping[str, str], factgen.HooksConfig, datetime], Translation]


def read_json(body: bytes, source: str) -> factgen.Document:
    """The body as a JSON document that knows where each node is (``DocumentError``
    with line and column when it is not UTF-8 JSON)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"the body is not UTF-8: {exc.reason}", source=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"the body is not JSON: {exc.msg}", source=source, line=exc.lineno, column=exc.colno
        ) from None
    except RecursionError:
        raise DocumentError("the body nests too deeply", source=source) from None
    except ValueError as exc:  # an integer beyond Python's digit limit, and the like
        raise DocumentError(f"the body is not JSON caveat reads: {exc}", source=source) from None
    return factgen.Document(data, source, lazy_text=text)


def timestamp(doc: factgen.Document, path: Sequence[str | int], value: object) -> datetime:
    """An RFC 3339 timestamp at ``path`` (nanoseconds read as microseconds)."""
    where = tuple(path)
    if not isinstance(value, str):
        raise doc.error(where, f"expected an RFC 3339 timestamp, not {shown(value)}")
    text = _FRACTION.sub(r"\1", value.strip().upper())
    try:
        stamp = coerce(text, ValueType("timestamp"))
    except ValueTypeError as exc:
        raise doc.error(where, f"{shown(value)}: {exc.message}") from None
    assert isinstance(stamp, datetime)
    return stamp


def signature_ok(secret: str, body: bytes, given: Sequence[str]) -> bool:
    """Whether one of ``given`` (hex digests) is the HMAC-SHA256 of ``body`` under
    ``secret``, compared in constant time."""
    want = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
    ok = False
    for candidate in given:
        ok |= hmac.compare_digest(want, candidate.strip().lower().encode("ascii", "replace"))
    return ok


def _github_signatures(headers: Mapping[str, str]) -> list[str]:
    value = headers.get("x-hub-signature-256", "")
    return [value.removeprefix("sha256=")] if value.startswith("sha256=") else []


def _pagerduty_signatures(headers: Mapping[str, str]) -> list[str]:
    value = headers.get("x-pagerduty-signature", "")
    parts = [p.strip() for p in value.split(",")]
    return [p.removeprefix("v1=") for p in parts if p.startswith("v1=")]


#: kind -> (the hooks config's secret_env of that kind, the signatures a delivery carries)
_SIGNED: dict[
    str,
    tuple[Callable[[factgen.HooksConfig], str | None], Callable[[Mapping[str, str]], list[str]]],
] = {
    "github": (lambda h: h.github.secret_env, _github_signatures),
    "pagerduty": (lambda h: h.pagerduty.secret_env, _pagerduty_signatures),
}


def translators() -> dict[str, Translator]:
    """Every hook kind and its translator."""
    from caveat.connectors import alertmanager, cloudevents, github, pagerduty

    return {
        "alertmanager": alertmanager.translate,
        "github": github.translate,
        "cloudevents": cloudevents.translate,
        "pagerduty": pagerduty.translate,
    }


def hook_kind(kind: str) -> str:
    """``kind`` when it names a hook, else ``other``: what a delivery is labelled with in
    metrics and spans, so that the paths a scanner tries cannot grow the label set."""
    return kind if kind in translators() else "other"


def _bearer(headers: Mapping[str, str]) -> str | None:
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if not scheme:
        return None
    if scheme.lower() != "bearer" or not credentials.strip():
        raise Unauthenticated("the Authorization header is not a bearer token")
    return credentials.strip()


def _signed(
    kind: str, config: factgen.HooksConfig, body: bytes, headers: Mapping[str, str]
) -> None:
    """Check a token-less delivery's signature; ``Unauthenticated`` saying what is wrong
    (never which part of a signature matched)."""
    if kind not in _SIGNED:
        raise Unauthenticated(f"a {kind} hook needs a bearer token of role source")
    secret_env, signatures = _SIGNED[kind]
    env = secret_env(config)
    secret = os.environ.get(env) if env else None
    if not secret:
        raise Unauthenticated(
            f"no bearer token, and no signing secret for {kind} hooks "
            f"(hooks.{kind}.secret_env in sources.yaml, set in the server's environment)"
        )
    given = signatures(headers)
    if not given:
        header = "X-Hub-Signature-256" if kind == "github" else "X-PagerDuty-Signature"
        raise Unauthenticated(f"the delivery carries no {header} signature")
    if not signature_ok(secret, body, given):
        raise Unauthenticated(f"the {kind} signature does not match the body")


def receive(
    rt: use.Runtime,
    kind: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    tenant: str | None = None,
    now: datetime | None = None,
    trusted: claims.Actor | None = None,
    delivery_id: str | None = None,
) -> use.Delivery:
    """Authenticate, translate and deliver one hook payload (module doc) in one
    transaction; every refusal audited in the tenant it was addressed to and raised.
    ``trusted`` skips authentication: a local caller (``caveat hooks post``, replay)
    acting as that actor in ``rt``'s tenant. ``delivery_id`` replaces the one the
    payload gives (replay's ``delivery``)."""
    with tracer.start_as_current_span("caveat.hook") as span:
        annotate(
            span,
            {
                "caveat.hook.kind": hook_kind(kind),
                "caveat.tenant": tenant or rt.tenant,
            },
        )
        try:
            delivery = _receive(
                rt,
                kind,
                body=body,
                headers=headers,
                tenant=tenant,
                now=now,
                trusted=trusted,
                delivery_id=delivery_id,
            )
        except CaveatError as exc:
            annotate(span, {"caveat.refusal": exc.code})
            raise
        annotate(
            span, {"caveat.hook.duplicate": delivery.duplicate, "caveat.count": len(delivery.done)}
        )
        return delivery


def _receive(
    rt: use.Runtime,
    kind: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    tenant: str | None = None,
    now: datetime | None = None,
    trusted: claims.Actor | None = None,
    delivery_id: str | None = None,
) -> use.Delivery:
    """``receive`` without its span."""
    now = now or use.utcnow()
    lowered = {k.lower(): v for k, v in headers.items()}
    target = rt if tenant is None else rt.for_tenant(tenant)
    token: str | None = None
    try:
        translator = translators().get(kind)
        if translator is None:
            raise NotFound(
                f"no hook {kind!r}; hooks: {', '.join(sorted(translators()))}", kind=kind
            )
        if len(body) > MAX_BODY:
            raise CaveatError(f"the body is larger than {MAX_BODY} bytes", code="too_large")
        if trusted is None:
            token = _bearer(lowered)
            if token is not None:
                named = claims.token_tenant(token)  # Unauthenticated when malformed
                if tenant is not None and tenant != named:
                    raise Forbidden(
                        f"the token is of tenant {named!r}, not {tenant!r}", tenant=tenant
                    )
                target = rt.for_tenant(named)
    except CaveatError as exc:
        with suppress(CaveatError):  # a tenant that does not exist keeps no audit row
            use.refuse_hook(
                target, kind=kind, actor_id=use.source_actor(kind).id, error=exc, now=now
            )
        raise
    signed = trusted is None and token is None

    def plan(hooks: factgen.HooksConfig) -> Translation:
        if signed:
            _signed(kind, hooks, body, lowered)
        return translator(body, lowered, hooks, now)

    return use.deliver_hook(
        target,
        kind=kind,
        actor=trusted if trusted is not None else (use.source_actor(kind) if signed else None),
        token=token,
        plan=plan,
        delivery_id=delivery_id,
        now=now,
    )
