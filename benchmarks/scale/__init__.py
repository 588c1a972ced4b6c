"""What does it cost at 20 MB? Multi-fidelity rungs, the late-chunking proxy and its decision bar,
one pass on a GPU (docs/results/scale.md)."""
