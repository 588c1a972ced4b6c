"""The core of a study, below everything else in ``tuning/``: what a trial records and how it is
read back (:mod:`.records`), and the objective it is scored by: weights, scales, rates and
constraints (:mod:`.objective`). Scoring, search, the study, the outcome and the run all stand on it.
"""
