"""What "better" means: the sign-flip test, comparisons and the tie gate, the check against the
best baseline, the cross-validated gain of the search, the inner loop and a trial's measures."""
