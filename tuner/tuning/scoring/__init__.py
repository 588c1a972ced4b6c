"""What "best" means: the weighted objective, and the tie gate that recommends."""
