"""Streamed calls: an iterator of events over Server-Sent Events that survives drops.

A :class:`Stream` reads one call's events. When its connection drops before the
call's final event it reconnects to ``GET /v1/calls/{id}/events`` with
``Last-Event-ID`` and goes on after the last event it delivered: every event is
delivered once, in order, as the Go client's ExecuteStream and Attach do.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any, Dict, Iterator, Optional
from urllib.parse import quote

from ._transport import Transport, answer_error
from .errors import APIError, StreamError, error_for
from .types import Event, Result

# The longest SSE line read (a done event carries the whole Result), as the Go client.
MAX_LINE = 256 << 20

CALL_ID_HEADER = "kernelbox-call-id"


class Stream:
    """The events of one call, as an iterator; ``result`` is set once it ends.

    Iterating yields :class:`~kernelbox.types.Event` objects as the server sends them
    and stops after the call's final event; ``result`` then holds its
    :class:`~kernelbox.types.Result`. A call that could not run raises the error
    table's exception (with ``.result`` when there was one). A connection that
    drops is resumed up to ``max_fails`` times in a row (backing off from 0.1 s to
    2 s); past that :class:`~kernelbox.errors.StreamError` is raised, naming the
    call id and the last event delivered so that :meth:`Client.attach` can resume
    later. Not safe for concurrent use; close it (or use ``with``) when you stop
    reading early.
    """

    def __init__(self, transport: Transport, call_id: str = "", after: int = 0,
                 max_fails: int = 10, first: Optional[http.client.HTTPConnection] = None,
                 first_resp: Optional[http.client.HTTPResponse] = None):
        self._t = transport
        self.call_id = call_id
        self.last_event_id = after
        self.result: Optional[Result] = None
        self.max_fails = max_fails
        self._conn = first
        self._resp = first_resp
        self._done = False

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the stream's connection; the call goes on on the server."""
        if self._conn is not None:
            self._conn.close()
        self._conn, self._resp = None, None

    def wait(self) -> Result:
        """Read the stream to its end and return the call's Result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def __iter__(self) -> Iterator[Event]:
        fails, backoff = 0, 0.1
        cause: Optional[BaseException] = None
        try:
            while not self._done:
                if self._resp is None:
                    if fails > 0:
                        if fails > self.max_fails:
                            raise StreamError(
                                f"kernelbox: follow call {self.call_id}: gave up after {self.max_fails} failed "
                                f"connections (last event {self.last_event_id}): {cause}",
                                self.call_id, self.last_event_id) from cause
                        time.sleep(backoff)
                        backoff = min(2 * backoff, 2.0)
                    try:
                        self._open()
                    except APIError as e:
                        if e.status < 500:
                            raise
                        fails, cause = fails + 1, e
                        continue
                    except (OSError, http.client.HTTPException) as e:
                        fails, cause = fails + 1, e
                        continue
                before = self.last_event_id
                try:
                    yield from self._read()
                except (OSError, http.client.HTTPException, ValueError) as e:
                    cause = e
                else:
                    if self._done:
                        return
                    cause = ConnectionError("event stream ended before the result")
                self.close()
                if not self.call_id:
                    raise StreamError(f"kernelbox: event stream broke before the call had an id: {cause}") from cause
                if self.last_event_id > before:
                    fails, backoff = 0, 0.1
                fails += 1
        finally:
            self.close()

    def _open(self) -> None:
        """Connect to the call's event stream after the last event delivered."""
        conn = self._t.new_connection(timeout=None)
        hdr = {"Accept": "text/event-stream"}
        if self.last_event_id > 0:
            hdr["Last-Event-ID"] = str(self.last_event_id)
        try:
            conn.request("GET", "/v1/calls/" + quote(self.call_id, safe="") + "/events",
                         headers=self._t.headers(hdr))
            resp = conn.getresponse()
        except BaseException:
            conn.close()
            raise
        if resp.status >= 300:
            data = resp.read(1 << 20)
            conn.close()
            raise answer_error(resp.status, data)
        self._conn, self._resp = conn, resp

    def _read(self) -> Iterator[Event]:
        """Yield the events of the current connection until it ends or the call does."""
        resp = self._resp
        assert resp is not None
        event, ident, data = "", "", []
        while True:
            line = resp.readline(MAX_LINE + 1)
            if not line:
                return
            if len(line) > MAX_LINE:
                raise ValueError(f"an event line over {MAX_LINE} bytes")
            s = line.decode("utf-8").rstrip("\r\n")
            if s == "":
                if event or data:
                    ev = self._dispatch(event, ident, "\n".join(data))
                    if ev is not None:
                        yield ev
                    if self._done:
                        return
                event, ident, data = "", "", []
            elif s.startswith("event:"):
                event = s[6:].strip()
            elif s.startswith("id:"):
                ident = s[3:].strip()
            elif s.startswith("data:"):
                d = s[5:]
                data.append(d[1:] if d.startswith(" ") else d)

    def _dispatch(self, event: str, ident: str, data: str) -> Optional[Event]:
        """Handle one event: return it for the caller, or None for skipped and final ones."""
        seq = 0
        if ident.isdigit():
            seq = int(ident)
            if seq <= self.last_event_id and event not in ("done", "failed"):
                return None
            self.last_event_id = seq
        payload: Dict[str, Any] = json.loads(data) if data else {}
        if event == "call":
            self.call_id = payload.get("call_id") or self.call_id
            return None
        if event == "done":
            self.result = Result.from_json(payload)
            self._done = True
            return None
        if event == "failed":
            self._done = True
            err = payload.get("error") or {}
            res = payload.get("result")
            self.result = Result.from_json(res) if res else None
            raise error_for(payload.get("http_status", 0), err.get("code", ""), err.get("message", ""), self.result)
        return Event.from_json(payload, seq)
