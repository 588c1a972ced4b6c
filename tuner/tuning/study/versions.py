"""Documents that change: a study's next version, re-tuned warm (issue 62).

A team tunes once, exports, and its documents go on changing. A run on a corpus (or a question
set) whose content changed since its study was made, with every other setting the same, does not
start from nothing and does not mix the two versions: it opens the corpus's *next version*, a
study of its own (``RUN/CORPUS@2``, then ``@3``: :func:`~.lookup.study_name`), that records its
corpus and questions and the study it continues (:attr:`~.settings.StudySettings.previous`), and
continues from what is still true:

- the earlier version's best configurations (its recommendation, the configurations tied with
  its best, then the highest scores, :data:`WARM_CONFIGURATIONS` in all) are queued first, beside
  the baselines, and evaluated on the new version
  (:func:`~tuner.tuning.outcome.versions.queue_warm_start`): Optuna's documented warm start
  (``enqueue_trial``), so the sampler learns from them as scored *now* rather than from scores of
  documents that are gone;
- chunks whose text did not change come from the embedding cache (keyed by text and model), so
  the unchanged pages cost nothing to embed again;
- the summary says what changed (:func:`~tuner.tuning.outcome.versions.version_change`): the
  recommendation kept or replaced, and its recall then and now.

Anything else that changed (the space, the weights, the embedder, the converters, the language...)
is still refused as before: results under other settings are not comparable.
"""

from __future__ import annotations

from .lookup import corpus_version, split_study_name, study_name
from .settings import StudySettings

#: What a changed corpus may change in its study's settings: its text, its questions, the held-out
#: split drawn from them and the documents' conversion records (not the converters).
CONTENT_SETTINGS = frozenset({"corpus_sha256", "evaluation_set_sha256", "validation", "conversion"})

#: How many of the earlier version's configurations a warm re-tune evaluates first.
WARM_CONFIGURATIONS = 10


def content_changed(stored: StudySettings, settings: StudySettings) -> bool:
    """Whether ``settings`` differ from a study's ``stored`` ones in its corpus or questions, and in
    nothing else a result depends on (the converters included): a new version, not a refusal."""
    before, now = stored.compared(), settings.compared()
    differing = {key for key in before.keys() | now.keys() if before.get(key) != now.get(key)}
    return (bool(differing & {"corpus_sha256", "evaluation_set_sha256"}) and differing <= CONTENT_SETTINGS
            and stored.converters == settings.converters)


def next_version_name(name: str) -> str:
    """The study of the version after study ``name``'s (``run/handbook`` -> ``run/handbook@2``)."""
    run, part = split_study_name(name)
    corpus, version = corpus_version(part or "")
    return study_name(run, corpus, version + 1)
