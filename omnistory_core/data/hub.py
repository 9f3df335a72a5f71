"""Find a local Omni-StoryBench release; download it from the Hugging Face Hub if allowed."""

from __future__ import annotations

import os
from pathlib import Path

from omnistory_core.data.errors import DatasetError
from omnistory_core.data.schema import HF_REPO_ID, PARQUET_RELATIVE_PATH

_WHAT_TO_DO = (
    "Either pass dataset.root=PATH to a local copy of the release (the folder that holds "
    f"{PARQUET_RELATIVE_PATH}), or install the hub extra (pip install 'omnistory-core[hub]') "
    "and run with network access so it can be downloaded."
)


def resolve_root(
    root: str | os.PathLike[str] | None,
    *,
    repo_id: str = HF_REPO_ID,
    download: bool = True,
) -> Path:
    """Return the root folder of a local Omni-StoryBench release.

    * ``root`` exists: it is used as is (the parquet file itself is also accepted and mapped to
      its release root).
    * ``root`` is ``None``: the dataset ``repo_id`` is fetched with
      ``huggingface_hub.snapshot_download`` into the Hub cache (a cached copy is reused, also
      offline).
    * ``root`` does not exist yet: the dataset is downloaded into that folder.

    Raises :class:`DatasetError` saying what to do when downloading is disabled,
    ``huggingface_hub`` is not installed, or the Hub cannot be reached.
    """
    target: Path | None = None
    if root is not None and str(root).strip():
        target = Path(root).expanduser()
        if target.is_file() and target.name == Path(PARQUET_RELATIVE_PATH).name:
            return target.resolve().parent.parent
        if target.exists():
            if not target.is_dir():
                raise DatasetError(f"dataset root {target} is not a directory. {_WHAT_TO_DO}")
            return target.resolve()
    where = f"dataset root {target} does not exist" if target else "no dataset root was given"
    if not download:
        raise DatasetError(
            f"{where} and downloading is disabled (dataset.download=false). {_WHAT_TO_DO}"
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise DatasetError(
            f"{where}, and huggingface_hub is not installed, so {repo_id} cannot be "
            f"downloaded. {_WHAT_TO_DO}"
        ) from exc
    try:
        local = snapshot_download(
            repo_id,
            repo_type="dataset",
            local_dir=str(target) if target is not None else None,
        )
    except Exception as exc:  # offline mode, no route, auth, missing repo: all mean the same here
        raise DatasetError(
            f"{where}, and downloading the dataset {repo_id} from the Hugging Face Hub failed "
            f"({type(exc).__name__}: {exc}). {_WHAT_TO_DO}"
        ) from exc
    path = Path(str(local))
    if not (path / PARQUET_RELATIVE_PATH).is_file():
        raise DatasetError(
            f"the download of {repo_id} at {path} has no {PARQUET_RELATIVE_PATH}; "
            f"is {repo_id} the Omni-StoryBench release? {_WHAT_TO_DO}"
        )
    return path
