"""The benchmark corpora nobody tuned chunkwise on: builders of realdocs, the Rust book, Valgrind's
manual and the 20 MB bigdocs, and the realdocs study runs (docs/results/search.md, scale.md)."""
