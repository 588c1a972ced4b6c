"""Which chunkers and retrieval methods win? Chunkers, markdown against recursive, dense, BM25 and
hybrid retrieval, objectives and rerankers (docs/results/retrieval.md)."""
