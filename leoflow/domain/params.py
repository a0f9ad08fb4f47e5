"""A DAG's ``params``: the run conf a trigger takes, typed, as Airflow's ``params``.

Each param has a type (``string``, ``integer``, ``number``, ``boolean``, ``array``,
``object``), an optional default, description, choices (``enum``) and bounds. A
trigger's conf is checked against them (``resolve_conf``): a missing param takes its
default, one without a default is required, and a value of the wrong type is refused
with the field named. Keys the params do not name are kept (the JSON editor is the
expert's way to pass more). The web UI draws its trigger form from them.

Pure: no I/O, nothing above the domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ParamType = Literal["string", "integer", "number", "boolean", "array", "object"]
PARAM_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,99}$"

_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
}


class ParamError(ValueError):
    """A conf value that does not fit its param; ``field``: ``conf.<name>``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "…"
        return f"the string {shown!r}"
    return "a list" if isinstance(value, list) else "an object"


def _fits(kind: str, value: Any) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    return isinstance(value, list) if kind == "array" else isinstance(value, dict)


class Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: ParamType = "string"
    default: Any = None
    description: str | None = Field(None, max_length=2000)
    title: str | None = Field(None, max_length=200)
    enum: tuple[Any, ...] | None = Field(None, min_length=1, max_length=200)
    minimum: float | None = None
    maximum: float | None = None
    # Without a default a param is required unless it says otherwise.
    required: bool | None = None

    @model_validator(mode="after")
    def _check(self) -> Param:
        for choice in self.enum or ():
            if not _fits(self.type, choice):
                raise ValueError(f"enum: {_json_type(choice)} is not {_WORDS[self.type]}")
        if self.default is not None:
            problem = self.problem(self.default)
            if problem is not None:
                raise ValueError(f"default: {problem}")
        return self

    @property
    def needed(self) -> bool:
        return self.default is None if self.required is None else self.required

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this param, or None."""
        if not _fits(self.type, value):
            return f"expected {_WORDS[self.type]}, got {_json_type(value)}"
        if self.enum is not None and value not in self.enum:
            return f"expected one of {list(self.enum)}, got {_json_type(value)}"
        if self.type in ("integer", "number"):
            if self.minimum is not None and value < self.minimum:
                return f"expected at least {self.minimum:g}, got {value}"
            if self.maximum is not None and value > self.maximum:
                return f"expected at most {self.maximum:g}, got {value}"
        return None


def resolve_conf(params: Mapping[str, Param], conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` with each missing param's default; raises ParamError naming the first
    field (in the params' order) that is missing or of the wrong kind."""
    out = dict(conf)
    for name, param in params.items():
        if name not in out or out[name] is None:
            if param.default is not None:
                out[name] = param.default
            elif param.needed:
                raise ParamError(f"conf.{name}", f"required ({_WORDS[param.type]})")
            continue
        problem = param.problem(out[name])
        if problem is not None:
            raise ParamError(f"conf.{name}", problem)
    return out
