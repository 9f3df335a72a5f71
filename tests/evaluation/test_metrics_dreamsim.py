"""The optional DreamSim plugin distribution (plugins/omnistory-dreamsim).

What is verified here: the distribution installs, its entry point registers ``metric=dreamsim`` and
its config path through the core's plugin loader, the metric's own code (load call, batching,
embedding cache, invalid images, distance) and its offline/absent-package behaviour.  The real
``dreamsim`` package cannot run here: it needs torchvision (which does not import beside this torch
build) and downloads its weights and the DINO backbone from GitHub.  Its API is therefore played by
a small stand-in module with the same call shape (``dreamsim(pretrained, device, cache_dir,
normalize_embeds, dreamsim_type) -> (model with .embed, preprocess)``); the real model is covered
only by the ``weights`` test, skipped without it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from omnistory_core.components import ComponentError, Media

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "omnistory-dreamsim"
sys.path.insert(0, str(PLUGIN / "src"))

from omnistory_dreamsim.metric import DreamSimMetric, cosine_distance  # noqa: E402

STANDIN = textwrap.dedent(
    '''
    """Stand-in for the dreamsim package's public API (tests only)."""
    import numpy as np
    import torch

    CALLS = []


    class _Model:
        def embed(self, batch):
            # a fixed random projection of the pixels, normalized like DreamSim's embeddings
            gen = torch.Generator().manual_seed(0)
            proj = torch.randn(batch[0].numel(), 16, generator=gen)
            emb = batch.reshape(batch.shape[0], -1) @ proj
            emb = emb - emb.mean(dim=1, keepdim=True)
            return emb / emb.norm(dim=1, keepdim=True)


    def dreamsim(pretrained=True, device="cuda", cache_dir="./models", normalize_embeds=True,
                 dreamsim_type="ensemble", use_patch_model=False):
        CALLS.append(dict(pretrained=pretrained, device=device, cache_dir=cache_dir,
                          normalize_embeds=normalize_embeds, dreamsim_type=dreamsim_type))
        if dreamsim_type == "offline":
            raise OSError("<urlopen error [Errno -3] Temporary failure in name resolution>")

        def preprocess(img):
            img = img.convert("RGB").resize((8, 8))
            pixels = np.asarray(img, dtype=np.float32) / 255
            return torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0)

        return _Model(), preprocess
    '''
)


@pytest.fixture
def standin(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    d = tmp_path / "standin"
    (d / "dreamsim").mkdir(parents=True)
    (d / "dreamsim" / "__init__.py").write_text(STANDIN)
    monkeypatch.syspath_prepend(str(d))
    sys.modules.pop("dreamsim", None)
    import dreamsim

    yield dreamsim
    sys.modules.pop("dreamsim", None)


def _image(path: Path, seed: int) -> Media:
    from PIL import Image

    rng = np.random.default_rng(seed)
    Image.fromarray((rng.random((20, 30, 3)) * 255).astype("uint8")).save(path)
    return Media(str(path), hashlib.sha256(path.read_bytes()).hexdigest())


def test_plugin_installs_and_registers_through_the_core_loader(tmp_path):
    target = tmp_path / "site"
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pip.returncode == 0, pip.stderr
    probe = textwrap.dedent(
        """
        import json, sys
        from omnistory_core.plugins import load_plugins
        reg = load_plugins()
        cls = reg.component("metric", "dreamsim")
        mods = [m for m in ("torch", "dreamsim") if m in sys.modules]
        print(json.dumps({"file": sys.modules[cls.__module__].__file__, "key": cls.key(),
                          "paths": reg.config_paths, "heavy": mods,
                          "plugin": reg.plugins["dreamsim"].distribution}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["key"] == "metric/dreamsim"
    assert info["file"].startswith(str(target))
    assert info["plugin"] == "omnistory-dreamsim"
    assert "pkg://omnistory_dreamsim.conf" in info["paths"]
    assert info["heavy"] == []  # registering the plugin imports neither torch nor dreamsim
    assert (target / "omnistory_dreamsim" / "conf" / "metric" / "dreamsim.yaml").exists()


def test_shipped_yaml_builds_the_metric():
    import yaml

    spec = yaml.safe_load((PLUGIN / "src/omnistory_dreamsim/conf/metric/dreamsim.yaml").read_text())
    assert spec.pop("name") == "dreamsim"
    metric = DreamSimMetric(**spec)
    assert metric.params["dreamsim_type"] == "ensemble"
    assert (metric.track, metric.criteria) == ("image", ("distance",))
    # device and cache location do not change scores, so they stay out of the cache key
    assert "device" not in metric.output_params() and "cache_dir" not in metric.output_params()


@pytest.mark.skipif(
    importlib.util.find_spec("dreamsim") is not None, reason="dreamsim is installed here"
)
def test_without_the_package_the_metric_is_skipped_with_the_install_hint():
    with pytest.raises(
        ComponentError,
        match=r"^skipped: the dreamsim package is not installed.*"
        r"omnistory-dreamsim\[model\]",
    ):
        DreamSimMetric(device="cpu").load()


def test_offline_weights_are_reported_as_skipped(standin, tmp_path):
    metric = DreamSimMetric(device="cpu", dreamsim_type="offline", cache_dir=str(tmp_path / "w"))
    with pytest.raises(
        ComponentError,
        match="^skipped: DreamSim offline weights not available offline.*run the prefetch command",
    ):
        metric.load()


def test_distances_batching_cache_and_invalid_images(standin, tmp_path):
    a, b, c = (_image(tmp_path / f"{n}.png", seed) for seed, n in enumerate("abc"))
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"no image")
    bad = Media(str(broken), "bad")
    metric = DreamSimMetric(device="cpu", cache_dir=str(tmp_path / "w"), batch_size=1)
    metric.load()
    assert standin.CALLS[-1] == {
        "pretrained": True,
        "device": "cpu",
        "cache_dir": str(tmp_path / "w"),
        "normalize_embeds": True,
        "dreamsim_type": "ensemble",
    }
    results = metric.run_batch(
        [
            {"candidate_image": a, "reference_image": c},
            {"candidate_image": b, "reference_image": c},
            {"candidate_image": c, "reference_image": c},
            {"candidate_image": bad, "reference_image": c},
        ]
    )
    assert [r.status for r in results] == ["ok", "ok", "ok", "invalid"]
    assert results[2].scores["distance"] == pytest.approx(0.0, abs=1e-6)
    assert 0.0 < results[0].scores["distance"] <= 2.0
    assert "broken.png" in results[3].detail["error"]
    # the same distance as embedding each pair on its own, as model(img_a, img_b) would
    model, preprocess = standin.dreamsim(pretrained=True, device="cpu")
    from PIL import Image

    ea, ec = (model.embed(preprocess(Image.open(m.path)))[0] for m in (a, c))
    assert results[0].scores["distance"] == pytest.approx(cosine_distance(ea, ec), abs=1e-6)
    # gold image c was embedded once and is reused from the cache by the next batch
    assert c.sha256 in metric._cache
    (again,) = metric.run_batch([{"candidate_image": a, "reference_image": c}])
    assert again.scores["distance"] == pytest.approx(results[0].scores["distance"], abs=1e-7)


def test_cosine_distance():
    assert cosine_distance([1.0, 0.0], [1.0, 0.0]) == pytest.approx(0.0)
    assert cosine_distance([1.0, 0.0], [0.0, 2.0]) == pytest.approx(1.0)
    assert cosine_distance([1.0, 0.0], [-3.0, 0.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        cosine_distance([0.0, 0.0], [1.0, 0.0])


@pytest.mark.weights
@pytest.mark.skipif(
    importlib.util.find_spec("dreamsim") is None,
    reason="needs the dreamsim package and its downloaded weights",
)
def test_real_dreamsim_identical_images(tmp_path):
    a = _image(tmp_path / "a.png", 0)
    metric = DreamSimMetric()
    metric.load()
    (res,) = metric.run_batch([{"candidate_image": a, "reference_image": a}])
    assert res.scores["distance"] == pytest.approx(0.0, abs=1e-4)
