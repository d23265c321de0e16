"""The compile server's requests and replies, defined once for both ends. Each travels as a JSON
object (``frames``) and is read back field by field: a message of any other shape is refused
(``FrameError``).

Every request carries the identity of the install that sends it (``identity``: the version of
these messages and the toolchain a cache key covers), every reply the server's. A server works
only for a request of its own identity, and a client takes only a reply of its own: a server
left running by another install (another slangspec, slangpy or Slang) would otherwise build
kernels that the client stores under the keys of its own toolchain.

A request names no path the server writes: it places what it keeps (Slang's CUDA prelude,
slangpy's library as IR) under its own cache root. The paths it names, the module's and its
include paths, are absolute, and only read, by Slang, for the module's imports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from ...define import frozen
from ...formats import SERVER_PROTOCOL as PROTOCOL
from .frames import FrameError

HEARTBEAT = {"working": True}
"""What the server sends while it works on a request, so a client tells it from a gone one."""

Identity: TypeAlias = dict[str, Any]
Op = Literal["describe", "build", "status", "stop"]
_OPS: dict[str, dict[str, type]] = {
    "describe": {"module": dict, "function": str},
    "build": {"module": dict, "kernels": list, "arch": str},
    "status": {},
    "stop": {},
}
_MODULE = {
    "name": str,
    "path": str,
    "text": str,
    "include_paths": list,
    "defines": dict,
    "library": bool,
    "content": str,
}
_KERNEL = {"name": str, "source": str}


def identity(toolchain: Mapping[str, Any]) -> Identity:
    """The identity of an install whose cache keys cover ``toolchain`` (``toolchain.toolchain``)."""
    return {"protocol": PROTOCOL, "toolchain": dict(toolchain)}


@frozen
class ModuleSource:
    """What a module is compiled from: its name; the absolute path Slang is told its text lies
    at, beside which its own imports are found; its text; the absolute include paths searched
    for its imports; its defines; whether it imports slangpy's Slang library; and ``content``,
    what identifies the files it imports."""

    name: str
    path: str
    text: str
    include_paths: tuple[str, ...]
    defines: dict[str, str]
    library: bool
    content: str


@frozen
class KernelText:
    """A generated kernel: its module name (its entry point's, in the CUDA source) and text."""

    name: str
    source: str


@frozen
class Request:
    """``describe`` ``function`` of ``module``, ``build`` its ``kernels`` for ``arch``
    (``sm_90``) into one cubin, or the server's ``status``, or ``stop``."""

    op: Op
    identity: Identity
    module: ModuleSource | None = None
    function: str = ""
    kernels: tuple[KernelText, ...] = ()
    arch: str = ""

    def to_json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"op": self.op, "identity": self.identity}
        m = self.module
        if m is not None:
            message["module"] = {
                "name": m.name,
                "path": m.path,
                "text": m.text,
                "include_paths": list(m.include_paths),
                "defines": m.defines,
                "library": m.library,
                "content": m.content,
            }
        if self.op == "describe":
            message["function"] = self.function
        if self.op == "build":
            message["kernels"] = [{"name": k.name, "source": k.source} for k in self.kernels]
            message["arch"] = self.arch
        return message

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> Request:
        """The request ``message`` holds; FrameError naming the first field that is missing,
        unknown or of another type, and for a path that is not absolute."""
        op = message.get("op")
        if op not in _OPS:
            raise FrameError(f"request: op {op!r} is none of {', '.join(_OPS)}")
        if op in ("status", "stop"):
            # Answered to any install: to one whose messages carried no identity too.
            fields = _fields({"identity": {}, **message}, "request", {"op": str, "identity": dict})
            return cls(op, fields["identity"])
        fields = _fields(message, "request", {"op": str, "identity": dict, **_OPS[op]})
        m = _fields(fields["module"], "request.module", _MODULE)
        paths = tuple(_strings(m["include_paths"], "request.module.include_paths"))
        defines = m["defines"]
        if not all(isinstance(v, str) for v in defines.values()):
            raise FrameError("request.module.defines: expected strings, by name")
        for path in (m["path"], *paths):
            if not os.path.isabs(path):
                raise FrameError(f"request.module: {path!r} is not an absolute path")
        module = ModuleSource(
            m["name"], m["path"], m["text"], paths, defines, m["library"], m["content"]
        )
        if op == "describe":
            return cls(op, fields["identity"], module, function=fields["function"])
        kernels = tuple(
            KernelText(**_fields(k, "request.kernels[]", _KERNEL)) for k in fields["kernels"]
        )
        return cls(op, fields["identity"], module, kernels=kernels, arch=fields["arch"])


@frozen
class Reply:
    """Whether the server did what was asked; its identity; what it was asked for (``body``:
    a description's overloads, a build's kernels, a status); what went wrong (``error``); and
    whether it leaves after this reply (``leaving``: it could not finish a request within its
    deadline, and leaves that work to the client); Slang's diagnostics where Slang refused the
    module's sources (``diagnostics``)."""

    ok: bool
    identity: Identity
    body: dict[str, Any]
    error: str = ""
    leaving: bool = False
    diagnostics: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "identity": self.identity,
            "body": self.body,
            "error": self.error,
            "leaving": self.leaving,
            "diagnostics": self.diagnostics,
        }

    @classmethod
    def from_json(cls, message: dict[str, Any]) -> Reply:
        """The reply ``message`` holds; FrameError for a field of another type. A server of
        another version may leave fields out, or add some: its identity is then not the
        client's (an empty one for none)."""
        types = {
            "ok": bool,
            "identity": dict,
            "body": dict,
            "error": str,
            "leaving": bool,
            "diagnostics": str,
        }
        for name, kind in types.items():
            if name in message and not isinstance(message[name], kind):
                raise FrameError(f"reply.{name}: expected {kind.__name__}")
        if "ok" not in message:
            raise FrameError("reply: no field 'ok'")
        return cls(
            message["ok"],
            message.get("identity", {}),
            message.get("body", {}),
            message.get("error", ""),
            message.get("leaving", False),
            message.get("diagnostics", ""),
        )


def _fields(message: Any, where: str, types: Mapping[str, type]) -> dict[str, Any]:
    """``message`` checked to be an object of exactly the fields ``types`` names, each of its
    type."""
    if not isinstance(message, dict):
        raise FrameError(f"{where}: expected an object, got {type(message).__name__}")
    unknown = sorted(set(message) - set(types))
    if unknown:
        raise FrameError(f"{where}: unknown field {unknown[0]!r}")
    for name, kind in types.items():
        if name not in message:
            raise FrameError(f"{where}: no field {name!r}")
        if not isinstance(message[name], kind):
            raise FrameError(f"{where}.{name}: expected {kind.__name__}")
    return message


def _strings(values: list[Any], where: str) -> list[str]:
    if not all(isinstance(v, str) for v in values):
        raise FrameError(f"{where}: expected strings")
    return values
