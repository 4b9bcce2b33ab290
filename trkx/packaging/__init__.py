"""Shipping a trained pipeline as models of trkx (``trkx package``): the folder of
:mod:`trkx.models` (package), its model card (card) and learning curves (curves)."""
