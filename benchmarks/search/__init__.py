"""What does the search add? Its cross-validated gain, what "significant" means, fresh questions,
the sampler against an exhaustive grid (docs/results/search.md)."""
