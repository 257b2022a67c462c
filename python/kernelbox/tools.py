"""A ready ``sandbox_execute`` tool for agent frameworks (OpenAI/Anthropic-style tool calling).

``sandbox_execute(code, session_id, inputs=[])`` runs Python in a stateful kernelbox
session and returns a compact text answer within :data:`DEFAULT_BUDGET` bytes, as
kernelbox's MCP tools do: status, state_lost, stdout/stderr/value (long text loses its
middle, with a note), the error, artifact paths and notes. :data:`SANDBOX_EXECUTE_SCHEMA`
is its JSON schema; :func:`openai_tool` and :func:`anthropic_tool` wrap it in each
vendor's envelope; :func:`bind` returns the function for a given client.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from .client import Client
from .errors import KernelboxError
from .types import Result

#: The most bytes of text an answer carries (UTF-8), notes and headers included.
DEFAULT_BUDGET = 20_000

DESCRIPTION = (
    "Run Python code in a stateful sandbox kernel. Each session_id is one long-lived kernel: variables, "
    "imports, loaded data and files persist between calls with the same session_id; an answer saying "
    "state_lost means the variables are gone (re-run setup). inputs are host file paths copied to inputs/ "
    "before the code runs. Files written to outputs/ come back as artifact paths. Print summaries rather "
    "than whole data: long output loses its middle.")

#: The tool's parameters as JSON schema (the session id rule is the server's).
SANDBOX_EXECUTE_SCHEMA: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "Python source to run in the session's kernel."},
        "session_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$",
                       "description": "The session (kernel) to run in: 1-64 characters of A-Z, a-z, 0-9, '_' and '-'."},
        "inputs": {"type": "array", "items": {"type": "string"}, "default": [],
                   "description": "Host file paths to copy into the session's inputs/ directory first."},
    },
    "required": ["code", "session_id"],
    "additionalProperties": False,
}


def openai_tool() -> Dict[str, Any]:
    """Return the tool in OpenAI's function-calling form."""
    return {"type": "function", "function": {"name": "sandbox_execute", "description": DESCRIPTION,
                                             "parameters": SANDBOX_EXECUTE_SCHEMA}}


def anthropic_tool() -> Dict[str, Any]:
    """Return the tool in Anthropic's tool-use form."""
    return {"name": "sandbox_execute", "description": DESCRIPTION, "input_schema": SANDBOX_EXECUTE_SCHEMA}


def clip(text: str, budget: int) -> str:
    """Return text within budget UTF-8 bytes: its middle dropped with a note saying how much."""
    b = text.encode("utf-8")
    if len(b) <= budget:
        return text
    note = f"\n[... {len(b) - budget:,} of {len(b):,} bytes dropped here ...]\n"
    keep = max(0, budget - len(note.encode()))
    head = b[:keep // 2].decode("utf-8", "ignore")
    tail = b[len(b) - (keep - keep // 2):].decode("utf-8", "ignore")
    return head + note + tail


def format_result(r: Result, budget: int = DEFAULT_BUDGET) -> str:
    """Return the compact text answer for a Result, at most budget bytes."""
    head = f"status: {r.status} | session: {r.session_id} | duration: {r.duration_ms} ms\n"
    if r.state_lost:
        head += "state_lost: true - the session's variables are gone (its kernel was restarted); re-run setup. Files are kept.\n"
    if r.state_restored:
        sr = r.state_restored
        where = sr.get("from", "")
        if where == "checkpoint":
            where = f"the checkpoint taken after call {sr.get('after_call', 0)}"
        head += f"state_restored: true - the session's variables were restored from {where}\n"
    tail = ""
    if r.error:
        tb = "\n".join(r.error.traceback[-6:])
        tail += f"\nerror: {r.error.ename}: {r.error.evalue}\n" + (tb + "\n" if tb else "")
    if r.artifacts:
        tail += "\nartifacts:\n" + "".join(f"- {a.path} ({a.mime}, {a.size} bytes)\n" for a in r.artifacts[:50])
        if len(r.artifacts) > 50:
            tail += f"- ... and {len(r.artifacts) - 50} more\n"
    notes = list(r.notes)
    if r.truncated and r.truncation_note:
        notes.append(r.truncation_note)
    if notes:
        tail += "\nnotes:\n- " + "\n- ".join(notes) + "\n"
    fixed = head + tail
    # Fixed parts get at most half the budget; the output shares what is left.
    fixed = clip(fixed, budget // 2)
    parts = [(k, v) for k, v in (("stdout", r.stdout), ("stderr", r.stderr), ("value", r.result)) if v]
    room = budget - len(fixed.encode()) - 40 * len(parts)
    # Small parts are kept whole; what they leave goes to the bigger ones.
    shares: Dict[str, int] = {}
    left = max(0, room)
    for n, (k, v) in enumerate(sorted(parts, key=lambda kv: len(kv[1].encode()))):
        shares[k] = min(len(v.encode()), left // (len(parts) - n))
        left -= shares[k]
    body = ""
    for k, v in parts:
        body += f"\n{k}:\n" + clip(v, shares[k]) + ("" if v.endswith("\n") else "\n")
    out = head + body + tail if len((head + body + tail).encode()) <= budget else fixed + body
    return clip(out, budget)


def bind(client: Client, budget: int = DEFAULT_BUDGET, timeout: Optional[float] = None) -> Callable[..., str]:
    """Return ``sandbox_execute`` bound to client (and a budget, and a per-call timeout)."""

    def sandbox_execute(code: str, session_id: str, inputs: Sequence[str] = ()) -> str:
        """Run Python code in a stateful sandbox session; return a compact text answer."""
        try:
            r = client.execute(session_id, code, inputs=list(inputs or []), timeout=timeout)
        except KernelboxError as e:
            return clip(f"status: failed | session: {session_id}\nerror: {e}\n", budget)
        return format_result(r, budget)

    sandbox_execute.schema = SANDBOX_EXECUTE_SCHEMA  # type: ignore[attr-defined]
    return sandbox_execute


_default: Optional[Callable[..., str]] = None


def sandbox_execute(code: str, session_id: str, inputs: List[str] = []) -> str:  # noqa: B006 (read only)
    """Run Python code in a stateful kernelbox session; return a compact text answer.

    The server and token come from the same defaults as :class:`kernelbox.Client`
    (``$KERNELBOX_SERVER``, ``$KERNELBOX_TOKEN`` or the runtime file); the client is
    made on first use and kept.
    """
    global _default
    if _default is None:
        _default = bind(Client())
    return _default(code, session_id, inputs)


sandbox_execute.schema = SANDBOX_EXECUTE_SCHEMA  # type: ignore[attr-defined]
