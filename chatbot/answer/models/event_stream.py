"""Server-sent event streams checked for their end: a chat completion cut off mid-answer raises
`StreamCut` instead of passing for a whole answer, and an empty stream raises `EmptyStream`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2


class StreamCut(Exception):
    """The server closed a stream without [DONE] or a finish_reason: the answer is not whole."""


class EmptyStream(Exception):
    """An event stream that ended before its first event: the server did not start answering."""


class EndCheckingStream(httpx2.SyncByteStream):
    """A response body of server-sent events that raises `StreamCut` if it ends without its end."""

    def __init__(self, inner: httpx2.SyncByteStream) -> None:
        self.inner = inner

    def __iter__(self) -> Iterator[bytes]:
        started = ended = False
        rest = seen = b""
        for chunk in self.inner:
            seen = seen or chunk.strip()
            *lines, rest = (rest + chunk).split(b"\n")
            for data in _event_data(lines):
                started, ended = True, ended or _ends_stream(data)
            yield chunk
        for data in _event_data([rest]):
            started, ended = True, ended or _ends_stream(data)
        if not (started or seen):
            raise EmptyStream("the server sent an empty event stream")
        # A body with no events at all is not a stream: the model says so in its own words.
        if started and not ended:
            raise StreamCut("the connection closed before the end of the answer")

    def close(self) -> None:
        self.inner.close()


class _EndCheckingTransport(httpx2.HTTPTransport):
    """HTTP as usual, with each event stream's body checked for its end."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=EndCheckingStream(response.stream),  # type: ignore[arg-type]
            extensions=response.extensions,
            request=request,
        )


def end_checking_client() -> httpx2.Client:
    """The openai client's HTTP client, with event streams that end in `StreamCut` when cut.

    The openai client takes a closed connection for the end of a stream, and LangChain drops the
    [DONE] event, so from above a stream ended by [DONE] alone (no finish_reason) looks like a
    cut one; a transport, httpx's public extension point, sees every byte.
    """
    import openai

    return openai.DefaultHttpxClient(transport=_EndCheckingTransport())


def _event_data(lines: list[bytes]) -> Iterator[str]:
    """The `data:` fields among server-sent event lines."""
    for line in lines:
        if line.startswith(b"data:"):
            yield line[5:].strip().decode("utf-8", "replace")


def _ends_stream(data: str) -> bool:
    """True for the event that ends a chat completion stream: [DONE], or a finish_reason."""
    if data.startswith("[DONE]"):
        return True
    if '"finish_reason"' not in data:
        return False
    try:
        choices = json.loads(data).get("choices") or []
    except (ValueError, AttributeError):
        return False
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices)
