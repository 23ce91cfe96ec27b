"""Benchmarks: relayvm side by side with its peers, reported as ratios. Not timed tests."""
