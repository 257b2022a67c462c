"""A Deep Agents sandbox backend on kernelbox: one kernelbox session is one sandbox.

:class:`KernelboxSandbox` has the shape of Deep Agents' ``SandboxBackendProtocol``
(deepagents 0.7): ``id``, ``execute`` (a shell command run through the session's
kernel, in the session directory, stdout and stderr combined, the real exit code),
``upload_files``/``download_files`` with per-file results in input order, and
``ls``, ``read``, ``write``, ``edit``, ``grep``, ``glob``, ``delete``, each with an
``a``-prefixed async twin, answering as Deep Agents' own ``BaseSandbox`` does (its
fields, error codes and messages; docs/python.md lists the few deliberate
differences). Paths are absolute. :meth:`KernelboxSandbox.run_python` runs Python in
the same stateful kernel. :class:`KernelboxSandboxClient` creates, finds and deletes
sandboxes as Deep Agents' sandbox clients do; :class:`KernelboxProvider` is the
``SandboxProvider`` of Deep Agents' CLI (``dcode --sandbox kernelbox``).

When deepagents (and deepagents-code) is installed its types are used and the
classes subclass its base classes; otherwise same-named stand-ins are.

Where to read: ``_provider`` (client and CLI provider), ``_sandbox`` (the sandbox,
transfers), ``_files`` (the file tools), ``_kernel`` (the code run in the kernel),
``_paths`` (path checks, the glob contract), ``_types`` (result types). Each module
imports only modules listed after it, never back: the package has no cycle.
"""

from ._paths import STAGING, check_path
from ._provider import KernelboxProvider, KernelboxSandboxClient
from ._sandbox import KernelboxSandbox
from ._types import (HAVE_DEEPAGENTS, DeleteResult, EditResult, ExecuteResponse, FileDownloadResponse,
                     FileUploadResponse, GlobResult, GrepResult, LsResult, ReadResult, SandboxError,
                     SandboxNotFoundError, SandboxProviderMetadata, WriteResult)

__all__ = ["KernelboxSandbox", "KernelboxSandboxClient", "KernelboxProvider", "SandboxError", "SandboxNotFoundError",
           "SandboxProviderMetadata", "ExecuteResponse", "FileDownloadResponse", "FileUploadResponse", "ReadResult",
           "WriteResult", "EditResult", "DeleteResult", "LsResult", "GrepResult", "GlobResult", "HAVE_DEEPAGENTS",
           "STAGING", "check_path"]
