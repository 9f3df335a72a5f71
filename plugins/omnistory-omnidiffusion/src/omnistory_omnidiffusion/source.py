"""Omni-Diffusion's git-only code: a checkout of VITA-MLLM/Omni-Diffusion with its GLM-4-Voice
submodule, imported from its root.

The model itself is remote code in the hub checkpoint (``AutoModel`` with ``trust_remote_code``);
what only the git repository holds is the glue around it: the MAGVIT-v2 image tokenizer class and
the image transform (``omni_diffusion/``), and the GLM-4-Voice flow-matching + HiFT speech decoder
(``third_party/GLM-4-Voice/flow_inference.py``, which needs CosyVoice and Matcha-TTS from the same
submodule).  Nothing of it is vendored: ``load()`` puts the checkout on ``sys.path`` the way the
official runner does and imports those modules.  Checking, digesting and importing are
:mod:`omnistory_core.kit.checkout`'s; the submodule hint is this plugin's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import CheckoutError as SourceError
from omnistory_core.kit.checkout import Checkout, git_revision

REPOSITORY = "https://github.com/VITA-MLLM/Omni-Diffusion.git"
#: the newest upstream commit when this plugin was written (its GLM-4-Voice submodule is
#: shenyunhang/GLM-4-Voice 54d6672, whose Matcha-TTS submodule is dd9105b)
PINNED_COMMIT = "c4f4625f84197a72d556ea00f10e5b2775524252"

GLM = Path("third_party") / "GLM-4-Voice"
MATCHA = GLM / "third_party" / "Matcha-TTS"
#: files of the checkout this plugin imports
REQUIRED_FILES: tuple[str, ...] = (
    "omni_diffusion/data/processor/image_processor.py",
    "omni_diffusion/models/magvit/modeling_magvitv2.py",
    (GLM / "flow_inference.py").as_posix(),
)
#: the nested submodule the speech decoder's config imports from
REQUIRED_DIRS: tuple[str, ...] = ((MATCHA / "matcha").as_posix(),)
#: top-level module names the checkout provides on ``sys.path``
PACKAGES: tuple[str, ...] = (
    "omni_diffusion",
    "flow_inference",
    "cosyvoice",
    "speech_tokenizer",
    "matcha",
)

CHECKOUT = Checkout(
    component="backbone=omnidiffusion",
    name="Omni-Diffusion",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    code="image and speech tokenizer code",
    git_steps=("submodule update --init --recursive",),
    required_files=REQUIRED_FILES,
    required_dirs=REQUIRED_DIRS,
    packages=PACKAGES,
    # the identity of the code in the cache key: omni_diffusion/ and the GLM-4-Voice submodule
    # (with Matcha-TTS)
    digest_dirs=("omni_diffusion", GLM.as_posix()),
    # the checkout root, GLM-4-Voice and Matcha-TTS first; GLM-4-Voice's ``cosyvoice`` directory,
    # which the official runner also puts on the path, last (its subpackages have generic names
    # such as ``utils``)
    path_first=(".", GLM.as_posix(), MATCHA.as_posix()),
    path_last=((GLM / "cosyvoice").as_posix(),),
)
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = CHECKOUT.env
GET_IT = CHECKOUT.get_it()

tree_digest = CHECKOUT.digest
search_path = CHECKOUT.search_path


def check_source_dir(value: Any) -> Path:
    """The checkout's directory, or a :class:`SourceError` naming the parameter and the commands
    (only the submodule command when just the submodule is missing)."""
    path = CHECKOUT.locate(value)
    missing = CHECKOUT.missing(path)
    if missing:
        submodule = any(name.startswith("third_party/") for name in missing)
        hint = (
            "the GLM-4-Voice submodule is not checked out: run `git -C "
            f"{path} submodule update --init --recursive`"
            if submodule and not any(name.startswith("omni_diffusion/") for name in missing)
            else GET_IT
        )
        raise SourceError(
            f"backbone=omnidiffusion: backbone.source_dir={str(value)!r} is not a complete "
            f"checkout of {CHECKOUT.slug} (no {', '.join(missing)}); {hint}"
        )
    return path.resolve()


@dataclass(frozen=True)
class Upstream:
    """The upstream names the backbone uses."""

    #: ``image_transform(pil_image, resolution)`` -> (3, r, r) tensor in [-1, 1]
    image_transform: Any
    #: MAGVIT-v2: ``from_pretrained(dir)``, ``get_code(pixels)``, ``decode_code(codes)``
    MAGVITv2: Any
    #: GLM-4-Voice: ``AudioDecoder(config_path, flow_ckpt_path, hift_ckpt_path, device)``
    AudioDecoder: Any


def import_upstream(root: Path) -> Upstream:
    """Import the image tokenizer, the image transform and the speech decoder from ``root``
    (modules of the checkout's top-level names imported from elsewhere are dropped first)."""
    processor, magvit, flow = CHECKOUT.import_modules(
        root,
        "omni_diffusion.data.processor.image_processor",
        "omni_diffusion.models.magvit.modeling_magvitv2",
        "flow_inference",
    )
    return Upstream(
        image_transform=processor.image_transform,
        MAGVITv2=magvit.MAGVITv2,
        AudioDecoder=flow.AudioDecoder,
    )


__all__ = [
    "CHECKOUT",
    "GET_IT",
    "PINNED_COMMIT",
    "REPOSITORY",
    "REQUIRED_DIRS",
    "REQUIRED_FILES",
    "SOURCE_ENV",
    "SourceError",
    "Upstream",
    "check_source_dir",
    "git_revision",
    "import_upstream",
    "search_path",
    "tree_digest",
]
