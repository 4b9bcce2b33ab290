"""One training driver for the learned stages: options, Trainer factory, fit + export."""

from trkx.training.fit import FitResult, StageFailed, fit_stage, run_folder
from trkx.training.options import TrainerOptions
from trkx.training.trainer import build_trainer

__all__ = ["FitResult", "StageFailed", "TrainerOptions", "build_trainer", "fit_stage",
           "run_folder"]
