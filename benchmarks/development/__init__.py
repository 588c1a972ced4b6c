"""Development: how far a study's settings travel through the code (docs/results/development.md)."""
