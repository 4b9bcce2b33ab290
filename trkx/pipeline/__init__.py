"""The end-to-end pipeline: configuration, steps and the resumable runner."""
