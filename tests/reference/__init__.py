"""Reference implementations the tests and benchmarks compare trkx against (not installed)."""
