"""How does it do in other languages? Korean, Chinese and Japanese, stronger English embedders
(docs/results/languages.md)."""
