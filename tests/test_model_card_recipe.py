"""The model card names the commit its recipe came from (trkx.packaging.card.recipe_commit) and
the tree the run was made with (tree_commit): a recipe edited after its models shipped (a new
long stretch), or a later simulator (other events from the same seed), no longer reproduces
them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trkx.packaging.card import (
    _reproduce_note,
    recipe_commit,
    reproduce_commands,
    tree_changes,
    tree_commit,
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_the_card_names_the_recipes_last_commit_and_an_edit_since(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    recipe = tmp_path / "configs" / "recipe.yaml"
    recipe.parent.mkdir()
    recipe.write_text("stages: {}\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "recipe")
    first = git(tmp_path, "log", "-1", "--format=%h")
    (tmp_path / "other.txt").write_text("later work\n")          # a later commit elsewhere
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "other")
    later = git(tmp_path, "log", "-1", "--format=%h")
    assert recipe_commit(recipe) == (first, False)
    assert tree_commit(recipe) == later
    note = _reproduce_note(recipe)[0]
    assert f"git checkout {later}`" in note and f"last changed in commit {first}" in note

    recipe.write_text("stages: {gnn: {}}\n")
    assert recipe_commit(recipe) == (first, True)
    assert "uncommitted changes" in _reproduce_note(recipe)[0]


def test_an_untracked_recipe_names_no_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("stages: {}\n")
    assert recipe_commit(recipe) == (None, False)
    assert _reproduce_note(recipe) == []


def test_uncommitted_code_is_named_and_the_shipped_folder_is_not(tmp_path: Path) -> None:
    """Code changed since the commit (the simulator, a stage) is in no commit the card can
    name: the note says so and names the files; the models being written are not code."""
    git(tmp_path, "init", "-q")
    recipe = tmp_path / "configs" / "recipe.yaml"
    code = tmp_path / "trkx" / "simulate.py"
    shipped = tmp_path / "trkx" / "models" / "set"
    for path, text in ((recipe, "stages: {}\n"), (code, "SCATTER = 1.0\n"),
                       (shipped / "gnn.pt", "old")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "all")
    (shipped / "gnn.pt").write_text("new")                       # the re-ship being packaged
    assert tree_changes(recipe, shipped) == []
    assert "uncommitted" not in _reproduce_note(recipe, shipped)[0]
    assert tree_changes(recipe) == ["trkx/models/set/gnn.pt"]

    code.write_text("SCATTER = 5.0\n")
    assert tree_changes(recipe, shipped) == ["trkx/simulate.py"]
    note = _reproduce_note(recipe, shipped)[0]
    assert "uncommitted changes" in note and "`trkx/simulate.py`" in note


def test_adopted_models_are_marked_done_before_the_run() -> None:
    """A run that adopted the shipped embedding and filter reproduces only when they are
    adopted again first: without the line, `trkx run` would train them from nothing."""
    recipe, work, out = Path("configs/r.yaml"), Path("runs/r"), Path("trkx/models/r")
    lines = reproduce_commands(recipe, work, out, ["train-embedding", "train-filter"])
    code = lines[lines.index("```bash") + 1:]
    assert code[0] == ("python scripts/adopt_steps.py configs/r.yaml runs/r "
                       "train-embedding train-filter")
    assert code[1] == "trkx run configs/r.yaml --workdir runs/r"
    plain = reproduce_commands(recipe, work, out, [])
    assert plain[0] == "```bash" and not any("adopt_steps" in line for line in plain)
