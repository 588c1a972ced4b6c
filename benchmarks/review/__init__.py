"""Does review answer bad input? The fault campaign on `chunkwise review`
(docs/results/review-faults.md)."""
