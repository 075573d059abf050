"""CompileTrace: the record of one compile (IR snapshots, pass steps, rule firings, dispatch
decisions, kernels, arena plan, profile, cache). The explorer's only input; JSON-serialisable.

Recording is opt-in: passes receive ``trace=None`` when it is off and skip all recording work.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_VERSION = 1


def code_location(fn: Callable[..., Any]) -> tuple[str, int]:
    """(file, first line) of a function: where a rule or pass is written."""
    code = getattr(fn, "__code__", None)
    if code is None:
        # a callable object: its __call__ method carries the code (callable() says nothing of it)
        code = getattr(getattr(fn, "__call__", None), "__code__", None)  # noqa: B004
    if code is None:
        return ("", 0)
    return (_relative(code.co_filename), code.co_firstlineno)


def _relative(path: str) -> str:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return os.path.relpath(path, root) if path.startswith(root) else path


@dataclass
class RuleApplication:
    """One rule firing: which rule (and where it is written), the nodes it replaced and made."""

    rule: str
    file: str
    line: int
    before: list[str]  # node lines in text form
    after: list[str]
    node: str = ""  # the value name the rule matched at


@dataclass
class PassStep:
    """One pass over the graph: the IR text before and after, and the rules that fired."""

    name: str
    file: str
    line: int
    level_before: str
    level_after: str
    before: str
    after: str
    rules: list[RuleApplication] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class CompileTrace:
    """Everything the compiler did for one (function, target) compile."""

    function: str = ""
    target: str = ""
    policy: str = ""
    source: dict[str, Any] = field(default_factory=dict)  # file, line, text of the user function
    snapshots: dict[str, str] = field(default_factory=dict)  # level -> IR text
    steps: list[PassStep] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)  # dispatch Decision records
    kernels: dict[str, str] = field(default_factory=dict)  # kernel name -> generated source
    plan: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    errors: list[dict[str, Any]] = field(default_factory=list)

    # ---- recording API used by passes -------------------------------------------------------
    def rule(self, rule: Callable[..., Any] | str, before: list[str], after: list[str],
             node: str = "", name: str | None = None) -> None:
        file, line = code_location(rule) if callable(rule) else ("", 0)
        label = name or (rule if isinstance(rule, str) else getattr(rule, "__name__", str(rule)))
        self._open_rules.append(RuleApplication(label, file, line, before, after, node))

    @property
    def _open_rules(self) -> list[RuleApplication]:
        if not hasattr(self, "_pending"):
            self._pending: list[RuleApplication] = []
        return self._pending

    def take_rules(self) -> list[RuleApplication]:
        rules, self._pending = self._open_rules, []
        return rules

    # ---- serialisation ----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        data["schema"] = SCHEMA_VERSION
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CompileTrace:
        data = dict(data)
        data.pop("schema", None)
        steps = [PassStep(**{**s, "rules": [RuleApplication(**r) for r in s.get("rules", [])]})
                 for s in data.pop("steps", [])]
        return cls(steps=steps, **data)
