"""Where each utility of the weighted score is one half (:mod:`.objective`): the modelled latency's
and cost's, and each registered metric's that declares a half.

A metric declares its own half (:class:`~tuner.evaluation.registry.Metric`'s ``half``); a study's
``scales`` may set another under ``<metric>_half`` (``scales: {iou_half: 0.1}``), read when a
:class:`Scales` is made, as :class:`~.objective.Weights` reads the metrics it may weigh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...evaluation.registry import metrics
from ...schema import ParamSpec, check_keys, check_value, invalid

#: Where the modelled terms' utilities are one half, with their defaults (the metrics declare their own).
MODELLED_SCALES = {"latency_half_s": 1.0, "cost_half_usd": 1.0}


def scale_keys() -> tuple[str, ...]:
    """What a study's ``scales`` may set, in the order a score adds the terms (as :func:`weighable`):
    the halves of the metrics weighed by default, the modelled latency's and cost's, then those of
    every other registered metric that declares a half (``<metric>_half``).

    >>> scale_keys()[:4]
    ('iou_half', 'latency_half_s', 'cost_half_usd', 'context_tokens_half')
    """
    declared = [m for m in metrics() if m.half is not None]
    return (*(m.scale for m in declared if m.default_weight > 0), *MODELLED_SCALES,
            *(m.scale for m in declared if m.default_weight <= 0))


def _default_scale(key: str) -> float:
    if key in MODELLED_SCALES:
        return MODELLED_SCALES[key]
    return next(m.half for m in metrics() if m.half is not None and m.scale == key)


@dataclass(frozen=True, init=False, eq=False)
class Scales:
    """Where each utility is one half (see the module docstring): ``latency_half_s`` and
    ``cost_half_usd`` for the modelled terms, and ``<metric>_half`` for every registered metric that
    declares a half (:class:`~tuner.evaluation.registry.Metric`, whose ``half`` is the default), read
    when a value is made (as :class:`Weights` reads :func:`weighable`), so a metric added from
    outside brings its own scale. A key left out keeps its default.

    The halves every study stored before metrics declared their own are also dataclass fields
    (``dataclasses.asdict`` reads them); :meth:`as_dict` gives every one.

    >>> Scales(iou_half=0.1).as_dict()
    {'iou_half': 0.1, 'latency_half_s': 1.0, 'cost_half_usd': 1.0, 'context_tokens_half': 1000.0}
    >>> Scales(iou_half=0)
    Traceback (most recent call last):
    ...
    tuner.errors.InvalidParameterError: scales.iou_half=0 is invalid; allowed: a number > 0
    """

    iou_half: float
    latency_half_s: float
    cost_half_usd: float
    context_tokens_half: float

    _SPEC = ParamSpec(float, above=0)

    def __init__(self, **halves: float) -> None:
        keys = scale_keys()
        check_keys(halves, "scales", keys)
        values = {key: check_value(self._SPEC, halves.get(key, _default_scale(key)), f"scales.{key}") for key in keys}
        object.__setattr__(self, "_values", values)
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, values.get(field.name))

    def __getattr__(self, name: str) -> float:
        if name.startswith("__") or name == "_values":
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scales) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(self._values.items()))

    def __repr__(self) -> str:
        return f"Scales({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled by value (a worker process receives it)
        return _scales_from_items, (tuple(self._values.items()),)

    def half(self, key: str) -> float:
        """The value at which the utility of scale ``key`` (``iou_half``, ``latency_half_s``) is one half."""
        if key in self._values:
            return self._values[key]
        if key in scale_keys():  # a metric registered after these scales were made: its declared half
            return _default_scale(key)
        raise invalid("scale", key, ", ".join(self._values))

    def as_dict(self) -> dict[str, float]:
        """Every half, as a study stores them."""
        return dict(self._values)

    @classmethod
    def from_dict(cls, data: Any, where: str = "scales") -> Scales:
        if data is None:
            return cls()
        return cls(**check_keys(data, where, scale_keys()))


def _scales_from_items(items: tuple[tuple[str, float], ...]) -> Scales:
    return Scales(**dict(items))
