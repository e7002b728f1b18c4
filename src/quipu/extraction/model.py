"""A model-backed extractor over any OpenAI-compatible chat-completions endpoint (PROMO-3).

One ``POST {base_url}/chat/completions`` per run: temperature 0, the versioned prompt of
:mod:`.prompts` rendered at call time, and strict JSON-schema output. ``base_url``
includes the version prefix (``https://api.openai.com/v1``, ``http://127.0.0.1:11434/v1``).

The parser fails closed. A timeout, a refused connection, an error status, a refusal, a
truncated answer, malformed JSON or an answer that breaks the schema in any place makes
the run a **failure**: :class:`~quipu.extraction.base.ExtractionResult` with zero
candidates and an :class:`~quipu.extraction.base.ExtractionFailure` naming the reason —
never an exception, never a half result. The promotion job records such a result as a
failed attempt and retries it (``failure.retryable`` is False only for a status that a
retry cannot fix: 400, 401, 403, 404, 422).

A well-formed answer is then checked item by item, as data and never as instructions;
an item is dropped (and counted in ``dropped``) when:

* its ``turn_seq`` is not a user turn of the window, or its ``quote`` does not occur in
  that turn (``ungrounded_quote``): a memory must come from what the user said;
* its source turn, text or quote looks like a prompt injection (``injection``);
* its quote holds a secret (``secret``). A secret in the text alone is scrubbed
  (``secret_scrubbed``), as SAFE-1 asks for extracted text.

Ids are checked against ``allowed_ids`` (SAFE-3): ``links`` outside the set are removed
(``foreign_link``), and id-shaped tokens (32 hex digits or a UUID) in the text or the
supersedes hint that are not allowed are replaced with ``[unknown id]`` (``foreign_id``).
The API key is sent as a bearer token and never appears in a failure message.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quipu.core.records import Kind
from quipu.extraction.base import Candidate, ExtractionFailure, ExtractionResult, Extractor, Turn
from quipu.extraction.prompts import (
    MAX_ITEMS,
    MAX_LINKS,
    MAX_QUOTE_CHARS,
    MAX_TEXT_CHARS,
    PROMPT_VERSION,
    render_messages,
    response_format,
)
from quipu.safety import find_secrets, looks_like_injection, scrub_secrets

__all__ = ["DEFAULT_MAX_INPUT_CHARS", "DEFAULT_TIMEOUT_SECONDS", "ModelExtractor"]

DEFAULT_TIMEOUT_SECONDS = 60.0
DEFAULT_MAX_INPUT_CHARS = 60_000
_EXCERPT_CHARS = 200
_PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})
_ID_TOKEN = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?![0-9A-Za-z])"
)
_UNKNOWN_ID = "[unknown id]"

KindName = Literal["fact", "preference", "decision", "procedure", "episode", "experience", "note"]


class _Memory(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    kind: KindName
    confidence: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
    quote: Annotated[str, Field(min_length=1, max_length=MAX_QUOTE_CHARS)]
    turn_seq: int
    supersedes: Annotated[str | None, Field(max_length=MAX_TEXT_CHARS)]
    links: Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=MAX_LINKS)]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    memories: Annotated[list[_Memory], Field(max_length=MAX_ITEMS)]


class _Failed(Exception):
    """Internal: carries an :class:`ExtractionFailure` out of the request path."""

    def __init__(self, failure: ExtractionFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ModelExtractor(Extractor):
    """Extraction through an OpenAI-compatible chat model (see the module docstring).

    ``timeout`` (seconds) bounds connecting, sending and each wait for data.
    ``max_input_chars`` bounds the transcript sent: the most recent turns that fit are
    kept. ``clock`` gives "today" for the prompt, read on every call.
    """

    extractor_id = "model"
    uses_model = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_input_chars < 1:
            raise ValueError(f"max_input_chars must be at least 1, got {max_input_chars}")
        self.model = model
        self.version = f"{PROMPT_VERSION}:{model}"
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key or None
        self._timeout = timeout
        self._max_input_chars = max_input_chars
        self._clock = clock
        headers = {"Accept": "application/json"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key}"
        # trust_env=False: proxies and certificates come from Quipu's settings only.
        import httpx  # here, not at import: a process that never calls a model never loads it

        self._client = httpx.Client(headers=headers, timeout=timeout, trust_env=False)

    def close(self) -> None:
        """Close the HTTP connections. The extractor cannot be used afterwards."""
        self._client.close()

    def __enter__(self) -> ModelExtractor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ run

    def run(self, turns: Sequence[Turn], *, allowed_ids: Collection[str] = ()) -> ExtractionResult:
        allowed = frozenset(allowed_ids)
        window = self._window(turns)
        if not any(turn.is_user for turn in window):
            return self._result((), Counter())
        messages = render_messages(window, now=self._clock(), known_ids=allowed)
        try:
            content = self._complete(messages)
            answer = self._parse(content)
        except _Failed as failed:
            return ExtractionResult(
                extractor_id=self.extractor_id,
                version=self.version,
                failure=failed.failure,
                model=self.model,
                prompt_version=PROMPT_VERSION,
            )
        dropped: Counter[str] = Counter()
        by_seq = {turn.seq: turn for turn in window if turn.is_user}
        candidates = [
            candidate
            for item in answer.memories
            if (candidate := self._candidate(item, by_seq, allowed, dropped)) is not None
        ]
        return self._result(tuple(candidates), dropped)

    def _result(self, candidates: tuple[Candidate, ...], dropped: Counter[str]) -> ExtractionResult:
        return ExtractionResult(
            extractor_id=self.extractor_id,
            version=self.version,
            candidates=candidates,
            dropped=dict(dropped),
            model=self.model,
            prompt_version=PROMPT_VERSION,
        )

    def _window(self, turns: Sequence[Turn]) -> list[Turn]:
        """The most recent turns whose contents fit in ``max_input_chars``, in order."""
        kept: list[Turn] = []
        budget = self._max_input_chars
        for turn in reversed(turns):
            if len(turn.content) > budget:
                break
            budget -= len(turn.content)
            kept.append(turn)
        return kept[::-1]

    # ------------------------------------------------------------------ transport

    def _complete(self, messages: list[dict[str, str]]) -> str:
        import httpx

        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "response_format": response_format(),
        }
        try:
            response = self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise self._failed(
                "timeout", f"timed out after {self._timeout:g}s ({type(exc).__name__})"
            ) from exc
        except httpx.HTTPError as exc:
            raise self._failed("transport", f"request failed: {self._redact(str(exc))}") from exc
        if response.status_code != httpx.codes.OK:
            excerpt = self._redact(response.text[:_EXCERPT_CHARS])
            raise self._failed(
                "http_status",
                f"HTTP {response.status_code}: {excerpt}",
                retryable=response.status_code not in _PERMANENT_STATUSES,
            )
        try:
            envelope = response.json()
        except ValueError as exc:
            raise self._failed("malformed_json", "the response body is not JSON") from exc
        return self._content(envelope)

    def _content(self, envelope: Any) -> str:
        """The assistant message text of a chat-completions answer."""
        choices = envelope.get("choices") if isinstance(envelope, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._failed("schema_violation", "the response has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._failed("schema_violation", "the first choice has no message")
        if message.get("refusal"):
            raise self._failed(
                "refusal", f"the model refused: {str(message['refusal'])[:_EXCERPT_CHARS]}"
            )
        if choice.get("finish_reason") == "length":
            raise self._failed("truncated", "the answer was cut off at the token limit")
        content = message.get("content")
        if not isinstance(content, str) or not content.strip():
            raise self._failed("schema_violation", "the message has no text content")
        return content

    def _parse(self, content: str) -> _Answer:
        try:
            data = json.loads(content)
        except ValueError as exc:
            raise self._failed("malformed_json", f"the answer is not JSON: {exc}") from exc
        try:
            return _Answer.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "answer"
            raise self._failed(
                "schema_violation", f"the answer breaks the schema at {where}: {first['msg']}"
            ) from exc

    # ------------------------------------------------------------------ items

    def _candidate(
        self,
        item: _Memory,
        user_turns: dict[int, Turn],
        allowed: frozenset[str],
        dropped: Counter[str],
    ) -> Candidate | None:
        turn = user_turns.get(item.turn_seq)
        start = -1 if turn is None else turn.content.find(item.quote)
        if turn is None or start < 0:
            dropped["ungrounded_quote"] += 1
            return None
        if (
            looks_like_injection(turn.content)
            or looks_like_injection(item.text)
            or looks_like_injection(item.quote)
        ):
            dropped["injection"] += 1
            return None
        if find_secrets(item.quote):
            dropped["secret"] += 1
            return None
        text, findings = scrub_secrets(item.text)
        if findings:
            dropped["secret_scrubbed"] += 1
        hint = item.supersedes
        if hint is not None:
            hint, hint_findings = scrub_secrets(hint)
            if hint_findings:
                dropped["secret_scrubbed"] += 1
        text = self._strip_ids(text, allowed, dropped)
        hint = None if hint is None else self._strip_ids(hint, allowed, dropped) or None
        links = tuple(dict.fromkeys(link for link in item.links if link in allowed))
        foreign = sum(1 for link in item.links if link not in allowed)
        if foreign:
            dropped["foreign_link"] += foreign
        return Candidate(
            text=text,
            kind=Kind(item.kind),
            confidence=item.confidence,
            quote=item.quote,
            quote_start=start,
            quote_end=start + len(item.quote),
            turn_seq=item.turn_seq,
            supersedes_hint=hint,
            links=links,
        )

    @staticmethod
    def _strip_ids(text: str, allowed: frozenset[str], dropped: Counter[str]) -> str:
        def replace(match: re.Match[str]) -> str:
            if match.group() in allowed:
                return match.group()
            dropped["foreign_id"] += 1
            return _UNKNOWN_ID

        return _ID_TOKEN.sub(replace, text)

    # ------------------------------------------------------------------ helpers

    def _failed(self, code: str, message: str, *, retryable: bool = True) -> _Failed:
        return _Failed(
            ExtractionFailure(code=code, message=f"{self._url}: {message}", retryable=retryable)
        )

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[redacted]") if self._api_key else text
