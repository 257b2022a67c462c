"""kernelbox: a Python client for ``kernelbox serve`` (stateful Jupyter kernels for agents).

Standard library only. Start at :class:`Client`::

    import kernelbox
    kb = kernelbox.Client()            # $KERNELBOX_SERVER, token found as the CLI finds it
    r = kb.execute("s1", "x = 21 * 2; x")
    print(r.status, r.result)          # ok 42

:mod:`kernelbox.deepagents` is a Deep Agents sandbox backend and
:mod:`kernelbox.tools` a ready ``sandbox_execute`` tool for agent frameworks.
"""

from .client import Client
from .errors import *  # noqa: F401,F403 (the error table's classes)
from .errors import ERRORS, APIError, KernelboxError, StreamError, TransportError
from .stream import Stream
from .types import (Artifact, CallInfo, DetachedCall, ErrorInfo, Event, FileBatchResult, FileEntry, FileListing,
                    FileResult, Health, NotebookRun, Result, SessionInfo, TemplateInfo)

__all__ = ["Client", "Stream", "ERRORS", "APIError", "KernelboxError", "StreamError", "TransportError",
           "Artifact", "CallInfo", "DetachedCall", "ErrorInfo", "Event", "FileBatchResult", "FileEntry",
           "FileListing", "FileResult", "Health", "NotebookRun", "Result", "SessionInfo", "TemplateInfo"]
__version__ = "0.1.0"
