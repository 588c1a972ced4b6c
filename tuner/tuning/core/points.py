"""The points of a trial's inner loop (:mod:`tuner.tuning.scoring.inner`), as a user names one: how
its settings are read (:func:`read_point`, before any study is opened) and which of the points a
trial scored they name (:func:`find_point`). :meth:`.records.TrialRecord.at_point` reads the trial
at that point.
"""

from __future__ import annotations

from typing import Any

from ...errors import StudyError, as_json, option
from ...retrieval.config import query_time_settings, retrieval_spec
from ...retrieval.methods import dependent_options
from ...schema import invalid


def read_point(wanted: dict[str, Any]) -> dict[str, Any]:
    """The settings of a point of an inner loop (:meth:`.records.TrialRecord.at_point`), each read as its
    kind (``{"k": "3"}`` as ``{"k": 3}``); an unknown setting or a value that does not read is one
    message naming it and what is allowed, before any study is opened.

    >>> read_point({"k": "3", "alpha": "0.5"})
    {'k': 3, 'alpha': 0.5}
    >>> read_point({"k": "abc"})
    Traceback (most recent call last):
    ...
    tuner.errors.StudyError: point['k']='abc' is invalid; allowed: an integer >= 1, as in point={'k': 3}
    """
    settings = query_time_settings()  # the settings that name a point, and how a value given as text reads
    unknown = sorted(set(wanted) - set(settings))
    if unknown:
        raise StudyError(f"unknown point setting(s) {', '.join(unknown)}; a point is named by "
                         f"{', '.join(settings)}")
    given = {}
    for name, value in wanted.items():
        kind, shown_example = settings[name]
        try:
            given[name] = kind(value)
        except (TypeError, ValueError):
            example = {name: shown_example}
            written = option("point", f"{name}={example[name]}", python=f"point={example}")
            allowed = f"{retrieval_spec(name).allowed()}, as in {written}"
            raise invalid(option("point", name, python=f"point[{name!r}]"), value, allowed, StudyError) from None
    return given


def find_point(number: int, points: list[dict[str, Any]] | None, retrieval: dict[str, Any] | None,
               wanted: dict[str, Any]) -> dict[str, Any]:
    """The point of trial ``number``'s inner loop that ``wanted`` names (:func:`read_point`), among the
    ``points`` it scored (each its query-time settings and metrics); a setting left out is the trial's
    own (``retrieval``, its configuration's), and a fusion given without its parameter takes none of
    the trial's. A trial that scored no inner loop, or no such point, is one message saying which it
    scored.

    >>> scored = [{"k": 3, "score": 0.5}, {"k": 5, "score": 0.6}]
    >>> find_point(7, scored, {"method": "dense", "k": 5}, {"k": "3"})
    {'k': 3, 'score': 0.5}
    """
    given = read_point(wanted)
    if not points or retrieval is None:
        raise StudyError(f"trial {number} scored no inner loop: its one point is its own configuration")
    settings, dependent = query_time_settings(), dependent_options(given)  # a fusion given: none of the trial's
    own = {name: value for name, value in retrieval.items() if name in settings and name not in dependent}
    target = {**own, **given}

    def same(point: dict[str, Any]) -> bool:
        return all(name in point and (abs(point[name] - value) < 1e-9 if isinstance(value, float)
                                      else point[name] == value) for name, value in target.items())

    match = next((point for point in points if same(point) and set(point) & set(settings) == set(target)), None)
    if match is None:
        seen = {name: sorted({point[name] for point in points if name in point}) for name in settings}
        allowed = "; ".join(f"{name} {', '.join(map(str, values))}" for name, values in seen.items() if values)
        raise StudyError(f"trial {number} scored no point {as_json(target)} (its points: {allowed})")
    return match
