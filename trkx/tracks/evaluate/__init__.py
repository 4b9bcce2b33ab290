"""Evaluation of built tracks against truth: matching, efficiency, fake and duplicate rates, the
anchors' count, the TrackML score, binned rates, reports and plots."""
