"""What a built track is: its helix fit, its parameters and table, and the quality decision on
it."""
