"""How close a simulated event is to a real one: the distributions both should share and their
distance (:mod:`trkx.realism.distributions`), and what the material does to a track
(:mod:`trkx.realism.material`). benchmarks/sim_vs_real.py drives them."""
