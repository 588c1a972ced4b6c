"""What "better" means: the sign-flip test, comparisons and the tie gate, the check against the
best baseline, the cross-validated gain of the search, the inner loop and a trial's measures."""


# The names used from outside tuning/ (tests/test_structure.py: they import through here).
from .comparisons import CONFIDENCE
from .measures import trial_attributes
from .significance import sign_flip_test

__all__ = [
    "CONFIDENCE", "sign_flip_test", "trial_attributes",
]
