"""Dispatch policies: the order routes are tried in, per op kind, from four places.

Policies: ``prefer-native`` (default: native, then common-IR, then rewritten), ``force-common``
(common-IR, then rewritten; native only for kinds that have no decomposition, i.e. primitives
that *are* the common IR) and ``force-native`` (native, then rewrites into natively claimed
forms; never common-IR).

Where a policy comes from, first match wins for each op kind:

    1. the compile's ``options.policy`` per-kind entry   {"softmax": "force-common"}
    2. the compile's ``options.policy`` default          "force-common" / {"default": ...}
    3. ``set_policy(...)`` per-kind entry, then its default
    4. the ``RLX_POLICY`` environment variable           "force-common;gelu=force-native"
    5. prefer-native
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import RlxError

PREFER_NATIVE = "prefer-native"
FORCE_COMMON = "force-common"
FORCE_NATIVE = "force-native"
POLICIES: tuple[str, ...] = (PREFER_NATIVE, FORCE_COMMON, FORCE_NATIVE)

NATIVE, COMMON, REWRITTEN, UNSUPPORTED = "native", "common-IR", "rewritten", "unsupported"
ROUTES: tuple[str, ...] = (NATIVE, COMMON, REWRITTEN)

ROUTE_ORDER: dict[str, tuple[str, ...]] = {
    PREFER_NATIVE: (NATIVE, COMMON, REWRITTEN),
    FORCE_COMMON: (COMMON, REWRITTEN, NATIVE),  # native: only where no decomposition exists
    FORCE_NATIVE: (NATIVE, REWRITTEN),
}

ENV_VAR = "RLX_POLICY"


class PolicyError(RlxError):
    """A policy name or mapping that is not understood."""

    code = "RLX-L009"


@dataclass(frozen=True)
class Policy:
    """A default policy (or None: defer to the next source) and per-kind overrides."""

    default: str | None = None
    per_kind: tuple[tuple[str, str], ...] = ()

    def for_kind(self, kind: str) -> str | None:
        for k, v in self.per_kind:
            if k == kind:
                return v
        return self.default

    def describe(self) -> str:
        parts = [self.default or PREFER_NATIVE] + [f"{k}={v}" for k, v in self.per_kind]
        return ";".join(parts)


def _check_name(name: object, where: str) -> str:
    if not isinstance(name, str) or name not in POLICIES:
        raise PolicyError(f"unknown dispatch policy {name!r} ({where})",
                          hint=f"use one of: {', '.join(POLICIES)}")
    return name


def parse_policy(spec: Any, where: str = "policy") -> Policy:
    """A Policy from None, a name, a mapping ``{kind: name, "default": name}``, a Policy, or the
    text form ``"force-common;softmax=prefer-native,gelu=force-native"``."""
    if spec is None:
        return Policy()
    if isinstance(spec, Policy):
        return spec
    if isinstance(spec, Mapping):
        default = spec.get("default")
        per_kind = tuple(sorted((str(k), _check_name(v, f"{where}[{k!r}]"))
                                for k, v in spec.items() if k != "default"))
        return Policy(None if default is None else _check_name(default, where), per_kind)
    if isinstance(spec, str):
        default: str | None = None
        per_kind_list: list[tuple[str, str]] = []
        for part in (p.strip() for chunk in spec.split(";") for p in chunk.split(",")):
            if not part:
                continue
            if "=" in part:
                kind, _, name = part.partition("=")
                per_kind_list.append((kind.strip(), _check_name(name.strip(), where)))
            else:
                default = _check_name(part, where)
        return Policy(default, tuple(sorted(per_kind_list)))
    raise PolicyError(f"a policy must be a name or a mapping, got {type(spec).__name__} ({where})",
                      hint='e.g. policy="force-common" or policy={"softmax": "force-common"}')


_GLOBAL = Policy()


def set_policy(spec: Any) -> Policy:
    """Set the process-wide policy (None resets it); returns the previous one."""
    global _GLOBAL
    previous, _GLOBAL = _GLOBAL, parse_policy(spec, "set_policy")
    return previous


def get_policy() -> Policy:
    return _GLOBAL


@dataclass(frozen=True)
class ResolvedPolicy:
    """The layered policy of one compile: answers ``name_for(kind)`` and ``routes_for(kind)``."""

    layers: tuple[Policy, ...]

    def name_for(self, kind: str) -> str:
        for layer in self.layers:  # per-kind entries of a layer beat its default, layer by layer
            hit = layer.for_kind(kind)
            if hit is not None:
                return hit
        return PREFER_NATIVE

    def routes_for(self, kind: str) -> tuple[str, ...]:
        return ROUTE_ORDER[self.name_for(kind)]

    def describe(self) -> str:
        for layer in self.layers:
            if layer.default is not None or layer.per_kind:
                return layer.describe()
        return PREFER_NATIVE


def resolve_policy(spec: Any = None, env: Mapping[str, str] | None = None) -> ResolvedPolicy:
    """Layer the compile's policy over the global one over ``RLX_POLICY``."""
    environ = os.environ if env is None else env
    env_policy = parse_policy(environ.get(ENV_VAR) or None, f"environment variable {ENV_VAR}")
    return ResolvedPolicy((parse_policy(spec), _GLOBAL, env_policy))
