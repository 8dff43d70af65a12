"""An operation as a call that travels: its arguments and its answer as JSON, read back by its own signature.

Each operation is written once, as a method of its noun's class in :mod:`brain.ops.local` marked
:func:`operation`. The served client (:mod:`brain.ops.served`) is derived from those methods: a call there is
the method's name and its arguments, sent to the one route that runs the same method on the server
(``POST /v1/ops/{noun}/{name}``); the answer is the method's return value. Both sides read the method's
annotations (pydantic's :class:`~pydantic.TypeAdapter`), so what travels is checked against the signature
the caller sees, and a new operation needs no client code.

What cannot travel (a path on the caller's disk, a file's bytes) belongs to methods left unmarked: the served
client gives each of them a body of its own that reads or writes the caller's files around an operation.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from pydantic import PydanticUndefinedAnnotation, TypeAdapter
from pydantic import ValidationError as PydanticError

from brain.model.errors import Problem, ValidationError, joined

#: the attribute :func:`operation` sets on a method
_MARK = "__brain_operation__"


@dataclass(frozen=True)
class OperationSpec:
    """How an operation travels. ``slow``: it may run for minutes (a whole store's work, a model's), so a
    served caller waits without a time limit (the server's own limits apply)."""

    slow: bool = False


F = TypeVar("F", bound=Callable[..., object])


@overload
def operation(fn: F) -> F: ...


@overload
def operation(*, slow: bool = False) -> Callable[[F], F]: ...


def operation(fn: F | None = None, *, slow: bool = False) -> F | Callable[[F], F]:
    """Mark a method of a noun's class as an operation, which a served caller calls by name."""

    def mark(method: F) -> F:
        setattr(method, _MARK, OperationSpec(slow=slow))
        return method

    return mark(fn) if fn is not None else mark


def spec_of(method: object) -> OperationSpec | None:
    return getattr(method, _MARK, None)


def operations_of(cls: type) -> dict[str, Callable[..., object]]:
    """The operations of a noun's class, by name."""
    return {name: member for name, member in vars(cls).items() if spec_of(member) is not None}


@functools.cache
def _deferred_names(module_name: str) -> dict[str, str]:
    """The names a module imports only for the type checker (``if TYPE_CHECKING:``), each with its module:
    its annotations name them, and they are imported when an annotation is first read."""
    module = sys.modules[module_name]
    tree = ast.parse(inspect.getsource(module))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imported in node.body:
                if isinstance(imported, ast.ImportFrom) and imported.module:
                    names.update({alias.asname or alias.name: imported.module for alias in imported.names})
    return names


class _Namespace(dict[str, object]):
    """A module's globals, with its type-checking-only names imported on first use."""

    def __init__(self, module_name: str):
        super().__init__(vars(sys.modules[module_name]))
        self._module_name = module_name

    def __missing__(self, name: str) -> object:
        source = _deferred_names(self._module_name).get(name)
        if source is None:
            raise KeyError(name)
        value = getattr(importlib.import_module(source), name)
        self[name] = value
        return value


def _type_checking_name(name: str) -> object:
    """A name some brain module imports only for the type checker (a result's field names it)."""
    for module_name in [m for m in sys.modules if m.startswith("brain.")]:
        source = _deferred_names(module_name).get(name)
        if source is not None:
            return getattr(importlib.import_module(source), name)
    raise TypeError(f"a result's annotation names {name!r}, which no brain module imports")


def _adapter(hint: Any) -> TypeAdapter[Any]:
    """The adapter of ``hint``, with the names its dataclasses' fields import only for the type checker."""
    adapter: TypeAdapter[Any] = TypeAdapter(hint)
    namespace: dict[str, object] = {}
    while not adapter.pydantic_complete:
        try:
            adapter.rebuild(_types_namespace=namespace)
        except PydanticUndefinedAnnotation as exc:
            if exc.name is None or exc.name in namespace:
                raise
            namespace[exc.name] = _type_checking_name(exc.name)
    return adapter


@dataclass(frozen=True)
class _Shape:
    signature: inspect.Signature
    parameters: dict[str, TypeAdapter[Any]]
    result: TypeAdapter[Any]


@functools.cache
def _shape(method: Callable[..., object]) -> _Shape:
    hints = typing.get_type_hints(method, globalns=_Namespace(method.__module__))
    signature = inspect.signature(method)
    parameters = {name: _adapter(hints.get(name, Any)) for name in signature.parameters if name != "self"}
    return _Shape(signature, parameters, _adapter(hints.get("return", Any)))


def encode_arguments(
    method: Callable[..., object], args: tuple[object, ...], kwargs: Mapping[str, object]
) -> dict[str, object]:
    """The arguments of a call, by name, as JSON: those given only (the server fills in the defaults)."""
    shape = _shape(method)
    try:
        bound = shape.signature.bind(None, *args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{method.__qualname__}(): {exc}") from None
    given = {name: value for name, value in bound.arguments.items() if name != "self"}
    return {name: shape.parameters[name].dump_python(value, mode="json") for name, value in given.items()}


def decode_arguments(method: Callable[..., object], sent: Mapping[str, object]) -> dict[str, object]:
    """The arguments a call sent, checked against the method's signature, every problem named at once."""
    shape = _shape(method)
    problems = [
        Problem(f"args.{name}", f"args.{name}: {method.__name__} takes no argument {name!r}")
        for name in sent
        if name not in shape.parameters
    ]
    decoded: dict[str, object] = {}
    for name, value in sent.items():
        if name not in shape.parameters:
            continue
        try:
            decoded[name] = shape.parameters[name].validate_python(value)
        except PydanticError as exc:
            reason = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
            problems.append(Problem(f"args.{name}", f"args.{name}: {reason}"))
    for name, parameter in shape.signature.parameters.items():
        if name != "self" and parameter.default is inspect.Parameter.empty and name not in sent:
            problems.append(Problem(f"args.{name}", f"args.{name} is required by {method.__name__}"))
    if problems:
        raise ValidationError(joined(problems), problems)
    return decoded


def encode_result(method: Callable[..., object], value: object) -> object:
    return _shape(method).result.dump_python(value, mode="json")


def decode_result(method: Callable[..., object], data: object) -> object:
    return _shape(method).result.validate_python(data)


__all__ = [
    "OperationSpec",
    "decode_arguments",
    "decode_result",
    "encode_arguments",
    "encode_result",
    "operation",
    "operations_of",
    "spec_of",
]
