"""How exact is it? Scores against Chroma's own code, faster precisions against the decision bar,
documents that change (docs/results/exactness.md)."""
