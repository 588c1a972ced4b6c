"""How faithful is document conversion? Speed and fidelity per format, real pages and PDFs, body
text per documentation generator (docs/results/conversion.md)."""
