"""A throwaway retrieval method with an option of its own, declared in this one file: BM25's ranking
with its first ``skip`` chunks passed over. The option is searchable (a space's ``retrieval: {skip:
...}``), checked, recorded and exported as the method declares it.

Loaded as any extension is (``CHUNKWISE_PLUGINS=throwaway_retrieval``); nothing else in chunkwise names it.
"""

from tuner.retrieval import MethodOption, Ranked, RetrievalMethod, register_method


@register_method
class SkipBM25(RetrievalMethod):
    name = "skip_bm25"
    embeds = False
    lexical = True
    options = (MethodOption("skip", int, 0, low=0, high=3, help="BM25's top chunks passed over"),)

    def rank(self, settings, k, *, dense, lexical, query_vectors, questions):
        skip = settings.option("skip")
        ranked = lexical.search_scored(questions, k + skip)
        return Ranked(ranked.rows[:, skip:skip + k], ranked.scores[:, skip:skip + k])
