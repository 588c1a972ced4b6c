"""Parameter domains of a search space: the values one parameter may take, parsed from YAML,
sampled by Optuna, and the value nearest to a wanted one."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import optuna

from ...chunkers.base import ParamSpec
from ...errors import InvalidParameterError, SearchSpaceError
from ...schema import check_keys, invalid

DOMAIN_TYPES = ("int", "float", "categorical", "fraction")


@dataclass(frozen=True)
class Domain:
    """Values one parameter may take (see the module docstring for the YAML forms)."""

    type: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] | None = None
    of: str | None = None
    constant: Any = None

    @property
    def is_constant(self) -> bool:
        return self.type == "constant"

    def to_dict(self) -> Any:
        if self.is_constant:
            return list(self.constant) if isinstance(self.constant, tuple) else self.constant
        out: dict[str, Any] = {"type": self.type}
        for key in ("low", "high", "step", "of"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.log:
            out["log"] = True
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        """Ask Optuna for a value (for a fraction: the share, not the final value)."""
        if self.is_constant:
            return self.constant
        if self.choices is not None:
            # Optuna stores only scalars: list choices (separators) go by their JSON text.
            labels = [c if isinstance(c, (str, int, float, bool)) else json.dumps(list(c))
                      for c in self.choices]
            return self.choices[labels.index(trial.suggest_categorical(name, labels))]
        if self.type == "int":
            return trial.suggest_int(name, int(self.low), int(self.high),
                                     step=int(self.step or 1), log=self.log)
        return trial.suggest_float(name, float(self.low), float(self.high), step=self.step, log=self.log)

    def nearest(self, value: Any) -> Any:
        """The value of this domain closest to ``value`` (as Optuna stores it: a choice's label
        for categorical domains), or None when no value of the domain is close in kind (a
        string not among the choices).

        >>> Domain("int", low=50, high=1000, log=True).nearest(2000)
        1000
        >>> Domain("int", low=64, high=512, step=64).nearest(300)
        320
        >>> Domain("categorical", choices=(10, 30, 60, 100)).nearest(50)
        60
        """
        if self.is_constant:
            return self.constant
        if self.choices is not None:
            if value in self.choices:
                choice = value
            else:
                numbers = [c for c in self.choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
                if not numbers or not isinstance(value, (int, float)):
                    return None
                choice = min(numbers, key=lambda c: (abs(c - value), c))
            return choice if isinstance(choice, (str, int, float, bool)) else json.dumps(list(choice))
        low, high = float(self.low), float(self.high)
        clipped = min(max(float(value), low), high)
        if self.step is not None and not self.log:
            clipped = min(low + round((clipped - low) / self.step) * self.step, high)
        return round(clipped) if self.type == "int" else clipped

    def grid_values(self, where: str) -> list[Any]:
        """Every value of a discrete domain (for exhaustive grids)."""
        if self.is_constant:
            return [self.constant]
        if self.choices is not None:
            return list(self.choices)
        if self.type == "int" and not self.log:
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is not None and not self.log:
            count = round((self.high - self.low) / self.step)
            return [round(self.low + i * self.step, 12) for i in range(count + 1)]
        raise SearchSpaceError(f"{where} is continuous; a grid needs step or choices")


def fraction_value(share: float, total: int) -> int:
    """The integer a fraction domain yields: ``round(share * total)``, at most ``total - 1``."""
    return max(0, min(round(share * total), total - 1))


def parse_domain(raw: Any, spec: ParamSpec, where: str, earlier: dict[str, Domain]) -> Domain:
    if not (isinstance(raw, dict) and "type" in raw):
        try:
            value = spec.check("", "", raw)
        except InvalidParameterError:
            fail(where, raw, spec.describe())
        return Domain("constant", constant=value)
    kind = raw["type"]
    check_keys(raw, where, ("type", "low", "high", "step", "log", "choices", "of"), SearchSpaceError)
    if kind not in DOMAIN_TYPES:
        raise invalid(f"{where}.type", kind, ", ".join(DOMAIN_TYPES), SearchSpaceError)
    if kind == "categorical":
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices:
            raise SearchSpaceError(f"{where}.choices must be a non-empty list")
        checked = []
        for value in choices:
            try:
                checked.append(spec.check("", "", value))
            except InvalidParameterError:
                fail(f"{where}.choices", value, spec.describe())
        return Domain("categorical", choices=tuple(_hashable(c) for c in checked))
    if kind == "fraction":
        return _parse_fraction(raw, spec, where, earlier)
    if spec.kind not in (int, float) or (kind == "int") != (spec.kind is int):
        raise SearchSpaceError(f"{where}.type: {kind!r} does not fit this parameter ({spec.describe()})")
    if "choices" in raw:
        raise SearchSpaceError(f"{where}: 'choices' belongs to type categorical or fraction")
    low, high = _number(raw, "low", where), _number(raw, "high", where)
    step = raw.get("step")
    log = bool(raw.get("log", False))
    if low > high:
        raise SearchSpaceError(f"{where}: low={low} is greater than high={high}")
    for key, value in (("low", low), ("high", high)):
        if kind == "int" and not _ok_int(value):
            fail(f"{where}.{key}", value, "an integer")
        try:
            spec.check("", "", value)
        except InvalidParameterError:
            fail(f"{where}.{key}", value, spec.describe())
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0):
        fail(f"{where}.step", step, "a positive number")
    if log and (low <= 0 or step is not None):
        raise SearchSpaceError(f"{where}: log=true needs low > 0 and no step")
    return Domain(kind, low, high, step, log)


def _parse_fraction(raw: dict, spec: ParamSpec, where: str, earlier: dict[str, Domain]) -> Domain:
    target = raw.get("of")
    if spec.kind is not int:
        raise SearchSpaceError(f"{where}: type fraction needs an integer parameter ({spec.describe()})")
    if target not in earlier or earlier[target].type == "fraction" or not int_domain(earlier[target]):
        raise SearchSpaceError(
            f"{where}.of: {target!r} must name an integer parameter declared before it "
            f"(declared: {', '.join(earlier) or 'none'})")
    if "choices" in raw:
        choices = raw["choices"]
        if not isinstance(choices, list) or not choices:
            raise SearchSpaceError(f"{where}.choices must be a non-empty list of shares in [0, 1)")
        for value in choices:
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
                fail(f"{where}.choices", value, "a share in [0, 1)")
        return Domain("fraction", choices=tuple(float(c) for c in choices), of=target)
    low, high = _number(raw, "low", where), _number(raw, "high", where)
    if not 0 <= low <= high < 1:
        raise SearchSpaceError(f"{where}: low={low}, high={high} must satisfy 0 <= low <= high < 1")
    step = raw.get("step")
    if step is not None and (not isinstance(step, (int, float)) or step <= 0):
        fail(f"{where}.step", step, "a positive number")
    return Domain("fraction", low, high, step, False, of=target)


def int_domain(domain: Domain) -> bool:
    if domain.is_constant:
        return _ok_int(domain.constant)
    if domain.choices is not None:
        return all(_ok_int(c) for c in domain.choices)
    return domain.type == "int"


def _ok_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(raw: dict, key: str, where: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        fail(f"{where}.{key}", value, "a number")
    return value


def _hashable(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def fail(where: str, value: Any, allowed: str):
    raise invalid(where, value, allowed, SearchSpaceError)
