"""How good are generated questions? Near copies of excerpts, capping lexical overlap
(docs/results/generated-questions.md)."""
