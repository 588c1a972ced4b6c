"""What a study searches: spaces, samplers, baselines, and what a trial costs."""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .space_file import DEFAULT_SPACE

__all__ = [
    "DEFAULT_SPACE",
]
