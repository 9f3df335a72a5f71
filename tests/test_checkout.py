"""omnistory_core.kit.checkout: model code that exists only as a git repository.

Everything runs on real files in ``tmp_path``: checkouts are folders the tests write, git
repositories are made with the real ``git`` binary, imports go through the real import system.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from omnistory_core.kit.checkout import (
    Checkout,
    CheckoutError,
    drop_foreign_modules,
    git_revision,
    module_inside,
    source_env,
    tree_digest,
)

SHA = "0123456789abcdef0123456789abcdef01234567"

DEMO = Checkout(
    component="backbone=demo-omni",
    name="Demo-Omni",
    repository="https://github.com/example/Demo-Omni.git",
    commit=SHA,
    required_files=("models/__init__.py", "training/utils.py"),
    required_dirs=("third_party/sub/pkg",),
    packages=("models", "training"),
    digest_dirs=("models",),
    digest_files=("training/utils.py",),
    git_steps=("submodule update --init --recursive",),
)


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def demo_tree(root: Path) -> Path:
    write(
        root,
        {
            "models/__init__.py": "from .core import NAME\n",
            "models/core.py": "NAME = 'demo'\n",
            "models/deep/nested.py": "X = 1\n",
            "training/utils.py": "def transform(x):\n    return x\n",
            "README.md": "not code\n",
        },
    )
    (root / "third_party/sub/pkg").mkdir(parents=True)
    return root


def error_of(checkout: Checkout, value: object) -> str:
    with pytest.raises(CheckoutError) as info:
        checkout.check_dir(value)
    message = str(info.value)
    assert "\n" not in message, "checkout errors are one line"
    assert message.startswith("backbone=demo-omni: backbone.source_dir")
    return message


# -- names ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("component", "env"),
    [
        ("backbone=mmada", "OMNISTORY_SOURCE_BACKBONE_MMADA"),
        ("backbone=omnidiffusion", "OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION"),
        ("backbone=emu3", "OMNISTORY_SOURCE_BACKBONE_EMU3"),
        ("image=flux-dev", "OMNISTORY_SOURCE_IMAGE_FLUX_DEV"),
        ("tts=voice.v2", "OMNISTORY_SOURCE_TTS_VOICE_V2"),
    ],
)
def test_env_name_is_group_and_name_upper_case(component: str, env: str) -> None:
    assert source_env(component) == env
    assert Checkout(component=component, name="X", repository="r", commit="c").env == env


def test_parameter_slug_and_commands() -> None:
    assert DEMO.parameter == "backbone.source_dir"
    assert DEMO.slug == "example/Demo-Omni"
    assert DEMO.commands() == (
        "git clone https://github.com/example/Demo-Omni.git Demo-Omni"
        f" && git -C Demo-Omni checkout {SHA}"
        " && git -C Demo-Omni submodule update --init --recursive"
    )
    other = Checkout(
        component="processor=emu3", name="Emu3", repository="u/", commit="c", param="code_dir"
    )
    assert other.parameter == "processor.code_dir"


@pytest.mark.parametrize(
    ("dist", "module", "yaml"),
    [
        ("omnistory-mmada", "omnistory_mmada", "mmada.yaml"),
        ("omnistory-anygpt", "omnistory_anygpt", "anygpt.yaml"),
        ("omnistory-omnidiffusion", "omnistory_omnidiffusion", "omnidiffusion.yaml"),
        ("omnistory-dynin", "omnistory_dynin", "dynin.yaml"),
    ],
)
def test_shipped_configs_read_the_variable_their_checkout_names(dist, module, yaml) -> None:
    """A message telling users to export a variable the config does not read would be a trap."""
    source = pytest.importorskip(f"{module}.source", reason=f"{dist} is not installed")
    config = resources.files(module).joinpath("conf", "backbone", yaml).read_text(encoding="utf-8")
    assert f"source_dir: ${{oc.env:{source.SOURCE_ENV},null}}" in config
    assert source.SOURCE_ENV == source.CHECKOUT.env
    assert f"export {source.SOURCE_ENV}=" in source.GET_IT
    assert issubclass(source.SourceError, CheckoutError)


# -- check_dir -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   "])
def test_unset_names_parameter_env_and_commands(value) -> None:
    message = error_of(DEMO, value)
    assert "backbone.source_dir is not set" in message
    assert "Demo-Omni's model code is a git repository" in message
    assert DEMO.commands() in message
    assert "pass backbone.source_dir=$PWD/Demo-Omni" in message
    assert "export OMNISTORY_SOURCE_BACKBONE_DEMO_OMNI=$PWD/Demo-Omni" in message


def test_not_a_path() -> None:
    message = error_of(DEMO, 42)
    assert message == "backbone=demo-omni: backbone.source_dir must be a path, got 42"


def test_not_a_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    message = error_of(DEMO, str(missing))
    assert f"backbone.source_dir={str(missing)!r} is not a directory" in message
    assert DEMO.commands() in message and DEMO.env in message

    a_file = write(tmp_path, {"file.txt": "x"}) / "file.txt"
    assert "is not a directory" in error_of(DEMO, a_file)


def test_missing_files_are_listed_in_declaration_order(tmp_path: Path) -> None:
    root = demo_tree(tmp_path / "demo")
    (root / "models/__init__.py").unlink()
    (root / "training/utils.py").unlink()
    message = error_of(DEMO, str(root))
    assert (
        f"backbone.source_dir={str(root)!r} is not a checkout of example/Demo-Omni "
        "(no models/__init__.py, training/utils.py);"
    ) in message
    assert DEMO.commands() in message and DEMO.env in message


def test_missing_required_dir_is_listed(tmp_path: Path) -> None:
    root = demo_tree(tmp_path / "demo")
    shutil.rmtree(root / "third_party")
    message = error_of(DEMO, root)
    assert "(no third_party/sub/pkg)" in message
    # a file where a directory must be is not enough
    write(root, {"third_party/sub/pkg": "not a dir"})
    assert "(no third_party/sub/pkg)" in error_of(DEMO, root)


def test_complete_checkout_is_resolved(tmp_path: Path, monkeypatch) -> None:
    root = demo_tree(tmp_path / "demo")
    assert DEMO.check_dir(str(root)) == root.resolve()
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)
    assert DEMO.check_dir(link) == root.resolve()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert DEMO.check_dir("~/demo") == root.resolve()


# -- digest --------------------------------------------------------------------------------------


def test_digest_is_equal_for_copies_at_different_paths(tmp_path: Path) -> None:
    one = demo_tree(tmp_path / "machine-a" / "Demo-Omni")
    two = tmp_path / "elsewhere" / "copy"
    shutil.copytree(one, two)
    assert DEMO.digest(one) == DEMO.digest(two)
    assert len(DEMO.digest(one)) == 64


def test_digest_changes_with_the_code(tmp_path: Path) -> None:
    root = demo_tree(tmp_path / "demo")
    before = DEMO.digest(root)
    write(root, {"models/deep/nested.py": "X = 2\n"})
    changed_dir_file = DEMO.digest(root)
    assert changed_dir_file != before
    write(root, {"training/utils.py": "def transform(x):\n    return -x\n"})
    assert DEMO.digest(root) != changed_dir_file
    # a renamed file is different code even with the same bytes
    renamed = DEMO.digest(root)
    (root / "models/core.py").rename(root / "models/core2.py")
    assert DEMO.digest(root) != renamed
    # a new module in a digested folder counts too
    added = DEMO.digest(root)
    write(root, {"models/extra.py": ""})
    assert DEMO.digest(root) != added


def test_digest_ignores_caches_git_and_other_files(tmp_path: Path) -> None:
    root = demo_tree(tmp_path / "demo")
    before = DEMO.digest(root)
    write(
        root,
        {
            "models/__pycache__/core.cpython-311.py": "stale",
            "models/deep/__pycache__/nested.py": "stale",
            "models/.git/hooks/pre-commit.py": "hook",
            "models/weights.bin": "binary",
            "models/notes.md": "text",
            "README.md": "changed\n",
            "training/other.py": "not declared\n",
        },
    )
    assert DEMO.digest(root) == before


def test_tree_digest_order_and_missing_parts(tmp_path: Path) -> None:
    root = write(tmp_path, {"a/x.py": "1", "b/y.py": "2", "f.py": "3"})
    assert tree_digest(root, ["a", "b"]) != tree_digest(root, ["b", "a"])
    # a missing folder contributes nothing; a missing declared file is an error
    assert tree_digest(root, ["a", "absent"], ["f.py"]) == tree_digest(root, ["a"], ["f.py"])
    with pytest.raises(OSError):
        tree_digest(root, ["a"], ["absent.py"])


# -- git_revision --------------------------------------------------------------------------------

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs the git binary")


# the user's and the system's git configuration (hooks, signing, templates) stay out
GIT_ENV = {
    **{key: value for key, value in os.environ.items() if not key.startswith("GIT_")},
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str) -> str:
    config = [
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "-c",
        "commit.gpgsign=false",
        "-c",
        "init.defaultBranch=main",
    ]
    out = subprocess.run(
        [GIT, "-C", str(repo), *config, *args],
        check=True,
        capture_output=True,
        text=True,
        env=GIT_ENV,
    )
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository on branch ``main`` with two commits: (path, first sha, head sha)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    write(root, {"a.py": "1"})
    git(root, "add", "a.py")
    git(root, "commit", "-qm", "one")
    first = git(root, "rev-parse", "HEAD")
    write(root, {"a.py": "2"})
    git(root, "commit", "-qam", "two")
    return root, first, git(root, "rev-parse", "HEAD")


@needs_git
def test_revision_of_a_loose_branch_ref(repo) -> None:
    root, _, head = repo
    assert (root / ".git/refs/heads/main").is_file()
    assert git_revision(root) == head


@needs_git
def test_revision_of_a_detached_head(repo) -> None:
    root, first, _ = repo
    git(root, "checkout", "-q", "--detach", first)
    assert git_revision(root) == first


@needs_git
def test_revision_from_packed_refs(repo) -> None:
    root, _, head = repo
    git(root, "tag", "-a", "v1", "-m", "annotated: packed-refs gets a peeled ^ line")
    git(root, "pack-refs", "--all")
    assert not (root / ".git/refs/heads/main").exists()
    assert "^" in (root / ".git/packed-refs").read_text()
    assert git_revision(root) == head


@needs_git
def test_revision_of_a_linked_worktree(repo, tmp_path: Path) -> None:
    root, first, head = repo
    tree = tmp_path / "worktree"
    git(root, "worktree", "add", "-q", "-b", "side", str(tree), first)
    assert (tree / ".git").is_file()
    # the branch ref lives in the main repository, not in the worktree's git dir
    assert git_revision(tree) == first
    git(root, "pack-refs", "--all")
    assert git_revision(tree) == first
    assert git_revision(root) == head


@needs_git
def test_no_revision_without_commits(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q")
    assert git_revision(root) is None


def test_no_revision_without_git(tmp_path: Path) -> None:
    assert git_revision(demo_tree(tmp_path / "demo")) is None
    write(tmp_path, {"odd/.git": "not a gitdir line"})
    assert git_revision(tmp_path / "odd") is None


# -- importing -----------------------------------------------------------------------------------

PACKAGES = ("models", "training")


def owned(name: str) -> bool:
    return name.split(".", 1)[0] in PACKAGES


@pytest.fixture
def clean_imports():
    """Restore ``sys.path`` and the ``models``/``training`` entries of ``sys.modules``."""
    path = list(sys.path)
    saved = {name: module for name, module in sys.modules.items() if owned(name)}
    for name in saved:
        del sys.modules[name]
    yield
    sys.path[:] = path
    for name in [name for name in sys.modules if owned(name)]:
        del sys.modules[name]
    sys.modules.update(saved)
    importlib.invalidate_caches()


def stand_in(root: Path, label: str) -> Path:
    """A checkout with the generic top-level names upstream repositories use."""
    return write(
        root,
        {
            "models/__init__.py": f"LABEL = {label!r}\n",
            "models/core.py": f"LABEL = {label!r}\n",
            "training/utils.py": f"LABEL = {label!r}\n",  # a namespace package (no __init__)
        },
    )


STANDIN = Checkout(
    component="backbone=standin",
    name="Standin",
    repository="https://example.com/Standin",
    commit="c",
    packages=PACKAGES,
)


def test_the_last_checkout_imported_wins(tmp_path: Path, clean_imports) -> None:
    a = stand_in(tmp_path / "A", "a")
    b = stand_in(tmp_path / "B", "b")

    models, core, utils = STANDIN.import_modules(a, "models", "models.core", "training.utils")
    assert (models.LABEL, core.LABEL, utils.LABEL) == ("a", "a", "a")
    assert module_inside(sys.modules["training"], a.resolve())

    models_b, core_b, utils_b = STANDIN.import_modules(b, "models", "models.core", "training.utils")
    assert (models_b.LABEL, core_b.LABEL, utils_b.LABEL) == ("b", "b", "b")
    for name in ("models", "models.core", "training.utils"):
        assert module_inside(sys.modules[name], b.resolve()), name
        assert not module_inside(sys.modules[name], a.resolve()), name
    # a namespace package spans every checkout on sys.path; this one's portion comes first
    assert Path(list(sys.modules["training"].__path__)[0]) == b.resolve() / "training"
    assert sys.path[0] == str(b.resolve())

    # and back: A's names resolve to A again, not to B's cached modules
    (models_again,) = STANDIN.import_modules(a, "models")
    assert models_again.LABEL == "a" and models_again is not models
    assert "models.core" not in sys.modules  # B's submodule was dropped with its package


def test_modules_of_this_checkout_are_kept(tmp_path: Path, clean_imports) -> None:
    a = stand_in(tmp_path / "A", "a")
    (first,) = STANDIN.import_modules(a, "models.core")
    (second,) = STANDIN.import_modules(a, "models.core")
    assert first is second
    assert sys.path.count(str(a.resolve())) == 1


def test_drop_foreign_modules_drops_only_foreign_ones(tmp_path: Path, clean_imports) -> None:
    a = stand_in(tmp_path / "A", "a")
    b = stand_in(tmp_path / "B", "b")
    STANDIN.import_modules(a, "models.core", "training.utils")
    assert drop_foreign_modules(PACKAGES, a) == []
    dropped = drop_foreign_modules(PACKAGES, b)
    assert sorted(dropped) == ["models", "models.core", "training", "training.utils"]
    assert not any(owned(name) for name in sys.modules)


def test_search_path_order(tmp_path: Path, clean_imports) -> None:
    root = write(
        tmp_path / "multi",
        {
            "src/first_mod.py": "WHERE = 'src'\n",
            "first_mod.py": "WHERE = 'root'\n",
            "vendor/low_mod.py": "WHERE = 'vendor'\n",
        },
    )
    checkout = Checkout(
        component="backbone=multi",
        name="Multi",
        repository="r",
        commit="c",
        packages=("first_mod", "low_mod"),
        path_first=("src", "."),
        path_last=("vendor",),
    )
    first, last = checkout.search_path(root.resolve())
    assert first == [str(root.resolve() / "src"), str(root.resolve())]
    assert last == [str(root.resolve() / "vendor")]
    try:
        mod, low = checkout.import_modules(root, "first_mod", "low_mod")
        assert (mod.WHERE, low.WHERE) == ("src", "vendor")
        assert sys.path[:2] == first
        assert sys.path[-1] == last[0]
    finally:
        sys.modules.pop("first_mod", None)
        sys.modules.pop("low_mod", None)
