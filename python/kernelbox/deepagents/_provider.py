"""Creating, finding and deleting kernelbox sandboxes: the sandbox client of Deep Agents'
integrations and the ``SandboxProvider`` of its CLI (``dcode --sandbox kernelbox``).
"""

from __future__ import annotations

import asyncio
import os
import secrets
from typing import Any, Optional

from ._sandbox import KernelboxSandbox
from ._types import (SandboxError, SandboxInstallHint, SandboxNotFoundError, SandboxProvider,
                     SandboxProviderMetadata)
from ..client import Client
from ..errors import InvalidRequest, KernelboxError, NotFound, TransportError

#: The directory the CLI shows as a kernelbox sandbox's working directory: the session
#: directory on docker (on local it is the session's host directory; ``sandbox.root``
#: says which).
WORKING_DIR = "/workspace"


class KernelboxSandboxClient:
    """Creates, finds and deletes kernelbox sandboxes, as Deep Agents' sandbox clients do.

    ``get`` reconnects to an existing session without creating one (an unknown id
    raises :class:`SandboxNotFoundError`); ``delete`` is idempotent.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, template: Optional[str] = None,
                 **sandbox_options: Any):
        self.client = Client(url, token)
        self.template = template
        self.options = sandbox_options
        self._keys: dict = {}  # session id -> the scoped token's id, for delete

    def create(self, *, scoped: bool = False, **kwargs: Any) -> KernelboxSandbox:
        """Create a new sandbox (a new session) and return it.

        With ``scoped=True`` (the client's token must be the admin token) the sandbox
        talks to kernelbox with a scoped token of its own, for its session alone: what
        a coordinator hands a sub-agent, so that a prompt-injected agent can reach no
        other agent's sandbox. ``delete`` revokes that token.
        """
        opts = dict(self.options)
        opts.update(kwargs)
        opts.setdefault("template", self.template)
        if not scoped:
            return KernelboxSandbox(client=self.client, **opts)
        sid = opts.pop("session_id", None) or "da-" + secrets.token_hex(8)
        own = self.client.scoped(sid, name="deepagents-" + sid, template=opts.get("template"))
        self._keys[sid] = own.token_id
        return KernelboxSandbox(client=own, session_id=sid, **opts)

    def get(self, *, sandbox_id: str, **kwargs: Any) -> KernelboxSandbox:
        """Return the sandbox of an existing session; SandboxNotFoundError when there is none."""
        try:
            info = self.client.session(sandbox_id)
        except NotFound as e:
            raise SandboxNotFoundError(f"no kernelbox session {sandbox_id!r}") from e
        opts = dict(self.options)
        opts.update(kwargs)
        opts.setdefault("template", info.template or None)
        return KernelboxSandbox(client=self.client, session_id=sandbox_id, **opts)

    def delete(self, *, sandbox_id: str) -> None:
        """Delete a sandbox (close its session); deleting an unknown one is no error."""
        try:
            self.client.close_session(sandbox_id)
        except NotFound:
            pass
        key = self._keys.pop(sandbox_id, None)
        if key:
            try:
                self.client.revoke_token(key)
            except NotFound:
                pass

    async def acreate(self, *, scoped: bool = False, **kwargs: Any) -> KernelboxSandbox:
        """Async version of create."""
        return await asyncio.to_thread(lambda: self.create(scoped=scoped, **kwargs))

    async def aget(self, *, sandbox_id: str, **kwargs: Any) -> KernelboxSandbox:
        """Async version of get."""
        return await asyncio.to_thread(lambda: self.get(sandbox_id=sandbox_id, **kwargs))

    async def adelete(self, *, sandbox_id: str) -> None:
        """Async version of delete."""
        await asyncio.to_thread(self.delete, sandbox_id=sandbox_id)


class KernelboxProvider(SandboxProvider):  # type: ignore[misc]
    """Deep Agents CLI's sandbox provider for kernelbox (entry point ``kernelbox`` of the
    group ``deepagents_code.sandbox_providers``).

    Constructible with no arguments: the server and token come from the environment
    or the runtime file as :class:`kernelbox.Client` finds them (``KERNELBOX_SERVER``,
    ``KERNELBOX_TOKEN``), the template from ``KERNELBOX_TEMPLATE`` (or the ``template``
    argument of either the constructor or ``get_or_create``). Construction never
    dials: the CLI builds providers to read their metadata.
    """

    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, template: Optional[str] = None,
                 **sandbox_options: Any):
        self.client = Client(url, token)
        self.template = template or os.environ.get("KERNELBOX_TEMPLATE") or None
        self.options = sandbox_options

    @property
    def metadata(self) -> SandboxProviderMetadata:
        """What the CLI's registry shows: sandbox ids and snapshot names are supported."""
        return SandboxProviderMetadata(name="kernelbox", working_dir=WORKING_DIR,
                                       install=SandboxInstallHint(kind="package", name="kernelbox"),
                                       supports_sandbox_id=True, supports_snapshot_name=True,
                                       backend_module="kernelbox.deepagents")

    def _fail(self, what: str, e: Exception) -> SandboxError:
        if isinstance(e, TransportError):
            return SandboxError(f"kernelbox: {what}: no kernelbox server answers at {self.client.server} ({e}); "
                                "start one with `kernelbox serve`, or set KERNELBOX_SERVER to its URL and "
                                "KERNELBOX_TOKEN to its token")
        return SandboxError(f"kernelbox: {what}: {e}")

    def get_or_create(self, *, sandbox_id: Optional[str] = None, **kwargs: Any) -> KernelboxSandbox:
        """Reattach to session sandbox_id when it exists, else create it (or a new session).

        ``template`` names the session's template; an existing session with another
        template is refused (SandboxError), as is an id kernelbox does not accept.
        ``snapshot`` names a session (hibernated, typically) that the new sandbox is
        forked from: files and namespace, without reloading them.
        """
        template = kwargs.pop("template", None) or self.template
        snapshot = kwargs.pop("snapshot", None) or kwargs.pop("snapshot_name", None)
        opts = dict(self.options)
        opts.update(kwargs)
        what = f"sandbox {sandbox_id!r}" if sandbox_id else "new sandbox"
        try:
            if snapshot:
                if sandbox_id:
                    raise SandboxError("kernelbox: a snapshot only starts a new sandbox; give no sandbox_id with it")
                new_id = "da-" + secrets.token_hex(8)
                self._fork(snapshot, new_id)
                return KernelboxSandbox(client=self.client, session_id=new_id,
                                        template=self.client.session(new_id).template or None, **opts)
            if sandbox_id:
                try:
                    info = self.client.session(sandbox_id)
                except NotFound:
                    info = None
                if info is not None and template and info.template != template:
                    raise SandboxError(f"kernelbox: sandbox {sandbox_id!r} exists with template "
                                       f"{info.template!r}, not {template!r}; delete it or ask for its template")
                if info is not None:
                    template = info.template or None
            return KernelboxSandbox(client=self.client, session_id=sandbox_id, template=template, **opts)
        except SandboxError:
            raise
        except InvalidRequest as e:
            raise SandboxError(f"kernelbox: {what}: kernelbox refuses it: {e.message}") from e
        except KernelboxError as e:
            raise self._fail(what, e) from e

    def _fork(self, snapshot: str, new_id: str) -> None:
        try:
            self.client.fork(snapshot, new_id)
        except NotFound as e:
            raise SandboxNotFoundError(f"kernelbox: no session {snapshot!r} to start the sandbox from") from e

    def delete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """Delete a sandbox (close its session and its files); an unknown id is no error."""
        try:
            self.client.close_session(sandbox_id)
        except NotFound:
            pass
        except InvalidRequest as e:
            raise SandboxError(f"kernelbox: sandbox {sandbox_id!r}: kernelbox refuses it: {e.message}") from e
        except KernelboxError as e:
            raise self._fail(f"delete sandbox {sandbox_id!r}", e) from e

    async def aget_or_create(self, *, sandbox_id: Optional[str] = None, **kwargs: Any) -> KernelboxSandbox:
        """Async version of get_or_create."""
        return await asyncio.to_thread(lambda: self.get_or_create(sandbox_id=sandbox_id, **kwargs))

    async def adelete(self, *, sandbox_id: str, **kwargs: Any) -> None:
        """Async version of delete."""
        await asyncio.to_thread(lambda: self.delete(sandbox_id=sandbox_id, **kwargs))


__all__ = ["KernelboxSandboxClient", "KernelboxProvider", "WORKING_DIR"]
