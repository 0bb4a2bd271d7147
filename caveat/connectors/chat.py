"""The server-side extractor's model: any OpenAI-compatible chat-completions endpoint
(vLLM, Ollama, llama.cpp's server, hosted APIs) asked for proposals (docs/proposals.md,
"The server-side extractor").

``ChatExtractor`` is the ``caveat.app.Extract`` the worker is handed: one ``POST
{CAVEAT_EXTRACTOR_URL}/chat/completions`` per call with the model, temperature 0, the
reference prompt as the system message, the turn as the user message and
``claims.proposal_json_schema()`` as a strict ``json_schema`` response format, a bearer
key when one is set, and a timeout. What comes back is sorted for the worker: the
answer's content; ``ExtractorDown`` (retried) for a timeout, a connection error, 429 or
a 5xx; ``ExtractorDown`` (not retried) for any other error answer; ``UnusableAnswer`` for
an answer with nothing to judge (a refusal, a choice with no content, a body that is
not a chat completion). The key never appears in an error.
"""

from __future__ import annotations

from typing import Any

import httpx

import claims
from caveat.app import ExtractorDown, UnusableAnswer
from caveat.settings import Settings

__all__ = ["SCHEMA_NAME", "ChatExtractor", "chat_request"]

#: The name the response format gives the proposal schema.
SCHEMA_NAME = "caveat_proposals"
#: The most of an error answer's body quoted in an error.
_QUOTE = 200


def chat_request(model: str, system: str, user: str) -> dict[str, Any]:
    """The chat-completions request body for one turn."""
    return {
        "model": model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": SCHEMA_NAME,
                "strict": True,
                "schema": claims.proposal_json_schema(),
            },
        },
    }


def _problem(answer: httpx.Response) -> str:
    """What an error answer says: OpenAI's ``{"error": {"message": ...}}``, else its text."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:_QUOTE]
        if isinstance(error, str):
            return error[:_QUOTE]
    return answer.text.strip()[:_QUOTE]


class ChatExtractor:
    """Asks one chat-completions endpoint, over one ``httpx.Client`` (kept alive)."""

    def __init__(
        self,
        url: str,
        *,
        model: str,
        key: str | None = None,
        timeout: float = 60.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.endpoint = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self._key = key
        self.client = client or httpx.Client(
            follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": "caveat-extractor"},
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ChatExtractor | None:
        """The extractor ``CAVEAT_EXTRACTOR_*`` describe; None without a URL."""
        if not settings.extractor_url:
            return None
        return cls(
            settings.extractor_url,
            model=settings.extractor_model,
            key=settings.extractor_key,
            timeout=settings.extractor_timeout,
        )

    def __call__(self, system: str, user: str) -> str:
        """The content of the model's answer to ``system`` and ``user``."""
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            answer = self.client.post(
                self.endpoint,
                json=chat_request(self.model, system, user),
                headers=headers,
                timeout=httpx.Timeout(self.timeout),
            )
        except httpx.TimeoutException:
            raise ExtractorDown(
                f"the extractor timed out after {round(self.timeout * 1000)} ms", retry=True
            ) from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ExtractorDown(f"cannot reach the extractor: {reason}", retry=True) from None
        if not answer.is_success:
            code = answer.status_code
            problem = _problem(answer)
            raise ExtractorDown(
                f"the extractor answered HTTP {code}" + (f": {problem}" if problem else ""),
                retry=code == 429 or code >= 500,
            )
        return _content(answer)


def _content(answer: httpx.Response) -> str:
    """The first choice's content, or ``UnusableAnswer`` saying why there is none."""
    try:
        body = answer.json()
    except ValueError:
        raise UnusableAnswer(
            "the extractor's answer is not a chat completion (not JSON)", answer.text
        ) from None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise UnusableAnswer("the extractor's answer has no choices", answer.text)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise UnusableAnswer("the extractor's answer has no message", answer.text)
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        raise UnusableAnswer("the model refused", refusal)
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise UnusableAnswer("the answer's choice has no content", answer.text)
    return content
