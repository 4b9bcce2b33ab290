"""Mark steps of a `trkx run` recipe that were made elsewhere as done, so `trkx run` goes on
from them: a stage trained on a GPU machine (scripts/gpu_retrain.sh) whose model file was copied
into WORKDIR/checkpoints/, or graphs made by the recipe's own commands run by hand.

    python scripts/adopt_steps.py RECIPE.yaml WORKDIR STEP[=SECONDS] [STEP[=SECONDS] ...]

Each STEP (a name `trkx run RECIPE --workdir WORKDIR --dry-run` lists, e.g. train-embedding)
must have its output in place; its marker records the step's current command fingerprint (so a
later change of the recipe still reruns it) and SECONDS, the time it took where it was made
(the model card adds them up). `trkx run` keeps an adopted step when its inputs are made again
(trkx.pipeline.runner.adopt), so a recipe whose records are gone is adopted and run in one
go. Example, a recipe whose embedding and filter were trained on a GPU (MODELS: their folder):

    cp MODELS/{embedding,filter}.pt runs/pu200_cells_far/checkpoints/
    python scripts/adopt_steps.py configs/recipes/pu200_cells_far.yaml runs/pu200_cells_far \\
        train-embedding=182 train-filter=130
"""

from __future__ import annotations

import sys
from pathlib import Path

from trkx.pipeline.config import load_pipeline_config
from trkx.pipeline.runner import adopt, fingerprints
from trkx.pipeline.steps import plan_steps


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        usage = next(line for line in __doc__.splitlines() if "STEP[=SECONDS]" in line)
        print(f"usage: {usage.strip()}", file=sys.stderr)
        return 2
    recipe, work = Path(argv[0]), Path(argv[1])
    steps = {step.name: step for step in plan_steps(load_pipeline_config(recipe), work)}
    prints = fingerprints(list(steps.values()))
    for item in argv[2:]:
        name, _, seconds = item.partition("=")
        if name not in steps:
            print(f"adopt_steps: no step {name!r} in {recipe} (steps: {', '.join(steps)})",
                  file=sys.stderr)
            return 2
        try:
            marker = adopt(steps[name], work, prints[name], float(seconds or 0.0))
        except FileNotFoundError as error:
            print(f"adopt_steps: {error}", file=sys.stderr)
            return 2
        print(f"adopted {name} ({marker})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
