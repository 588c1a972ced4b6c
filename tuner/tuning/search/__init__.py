"""What a study searches: spaces, samplers, baselines, and what a trial costs."""
