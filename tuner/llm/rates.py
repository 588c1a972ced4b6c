"""What an endpoint's rate-limit headers say about when to send next: :class:`RateGate`, shared by
the threads that send through one client (:func:`tuner.llm.endpoint.make_client` reports every
HTTP try and every answer to it), and the headers it reads (:func:`retry_after`,
:func:`parse_duration`).
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from typing import Any

#: The longest pause a server's rate-limit headers can impose on one request (a misconfigured
#: server's hour-long Retry-After should not hang a run silently).
MAX_RATE_PAUSE_S = 300.0
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None) -> float | None:
    """Seconds in a rate-limit reset header (``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1.5"``), or None.

    >>> parse_duration("6m0s"), parse_duration("20ms"), parse_duration("1.5"), parse_duration("soon")
    (360.0, 0.02, 1.5, None)
    """
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * scale[unit] for number, unit in parts)


def retry_after(headers: Any) -> float | None:
    """Seconds a server asks to wait (``retry-after-ms``, ``retry-after`` in seconds or as an
    HTTP date), or None.

    >>> retry_after({"retry-after": "2"}), retry_after({"retry-after-ms": "250"}), retry_after({})
    (2.0, 0.25, None)
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


class RateGate:
    """What the endpoint's rate-limit headers say about when to send next, shared by threads.

    * ``Retry-After`` (or ``retry-after-ms``), on a 429 or any answer: nobody sends until then.
    * ``x-ratelimit-remaining-requests: 0``: nobody sends until ``x-ratelimit-reset-requests``.
    * ``x-ratelimit-remaining-tokens``: a request whose tokens exceed what remains waits for
      ``x-ratelimit-reset-tokens`` (:meth:`reserve`); each request sent spends its tokens.

    Pauses are capped at :data:`MAX_RATE_PAUSE_S`. ``paused_s`` sums the time senders waited.
    """

    def __init__(self, clock=time.monotonic, sleep=time.sleep) -> None:
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep
        self._not_before = 0.0
        self._tokens_left: float | None = None
        self._tokens_reset = 0.0
        self.paused_s = 0.0

    def _pause_until(self, when: float) -> None:
        now = self._clock()
        while when > now:
            self._sleep(when - now)
            with self._lock:
                self.paused_s += self._clock() - now
            now = self._clock()

    def wait(self) -> None:
        """Return when sending is allowed (at once unless a server asked to wait)."""
        while True:
            with self._lock:
                when = self._not_before
            if when <= self._clock():
                return
            self._pause_until(when)

    def reserve(self, tokens: int) -> None:
        """Wait, then spend ``tokens`` of the remaining token budget (waiting for its reset when
        the budget known from the last answer is too small)."""
        self.wait()
        with self._lock:
            now = self._clock()
            if self._tokens_left is not None and now >= self._tokens_reset:
                self._tokens_left = None  # the window has reset: the next answer tells the new budget
            short = self._tokens_left is not None and tokens > self._tokens_left
            when = self._tokens_reset
            if not short and self._tokens_left is not None:
                self._tokens_left -= tokens
        if short:
            self._pause_until(when)
            self.wait()

    def observe(self, headers: Any) -> None:
        """Read one answer's rate-limit headers."""
        now = self._clock()
        pause = retry_after(headers)
        remaining = headers.get("x-ratelimit-remaining-requests")
        if remaining is not None and remaining.strip() in ("0", "0.0"):
            reset = parse_duration(headers.get("x-ratelimit-reset-requests"))
            pause = max(pause or 0.0, reset or 1.0)
        with self._lock:
            if pause is not None:
                self._not_before = max(self._not_before, now + min(pause, MAX_RATE_PAUSE_S))
            tokens = headers.get("x-ratelimit-remaining-tokens")
            if tokens is not None:
                try:
                    self._tokens_left = max(0.0, float(tokens))
                except ValueError:
                    return
                reset = parse_duration(headers.get("x-ratelimit-reset-tokens"))
                self._tokens_reset = now + min(reset if reset is not None else 1.0, MAX_RATE_PAUSE_S)
