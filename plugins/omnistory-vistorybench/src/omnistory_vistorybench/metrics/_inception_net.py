"""Inception v3 (Szegedy et al., 2016) with torchvision's parameter names, for classification.

Imports torch at module level: only :mod:`.inception` imports it, inside ``load()``.

:func:`build_inception_v3` is used when torchvision cannot be imported (a CPU-only torch with
torchvision's CUDA wheel, for one: its C++ ops fail to load and so does the package).  The
module tree and parameter names are those of ``torchvision.models.inception_v3`` with
``aux_logits=True`` (``Conv2d_1a_3x3`` ... ``Mixed_7c``, ``AuxLogits``, ``fc``), so the ImageNet
file the official evaluator gets from torch hub (``inception_v3_google-0cc3c7bd.pth``) loads
strictly into either; in eval mode the forward pass is the same computation (BatchNorm eps 1e-3,
``transform_input=False``, the auxiliary head unused).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class _Conv(nn.Module):
    """Convolution without bias, BatchNorm (eps 1e-3), ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int], **kwargs: object):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=kernel, bias=False, **kwargs)  # type: ignore[arg-type]
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


def _pool_avg(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1)


class _BlockA(nn.Module):
    """35x35: 1x1, 5x5, double 3x3 and pooled branches."""

    def __init__(self, cin: int, pool_features: int):
        super().__init__()
        self.branch1x1 = _Conv(cin, 64, 1)
        self.branch5x5_1 = _Conv(cin, 48, 1)
        self.branch5x5_2 = _Conv(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = _Conv(cin, 64, 1)
        self.branch3x3dbl_2 = _Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = _Conv(96, 96, 3, padding=1)
        self.branch_pool = _Conv(cin, pool_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch1x1(x)
        b = self.branch5x5_2(self.branch5x5_1(x))
        c = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        d = self.branch_pool(_pool_avg(x))
        return torch.cat([a, b, c, d], 1)


class _BlockB(nn.Module):
    """35x35 -> 17x17 reduction."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3 = _Conv(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = _Conv(cin, 64, 1)
        self.branch3x3dbl_2 = _Conv(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = _Conv(96, 96, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch3x3(x)
        b = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([a, b, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class _BlockC(nn.Module):
    """17x17 with factorised 7x7 convolutions."""

    def __init__(self, cin: int, channels_7x7: int):
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = _Conv(cin, 192, 1)
        self.branch7x7_1 = _Conv(cin, c7, 1)
        self.branch7x7_2 = _Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = _Conv(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = _Conv(cin, c7, 1)
        self.branch7x7dbl_2 = _Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = _Conv(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = _Conv(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = _Conv(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = _Conv(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch1x1(x)
        b = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        c = self.branch7x7dbl_1(x)
        for layer in (
            self.branch7x7dbl_2,
            self.branch7x7dbl_3,
            self.branch7x7dbl_4,
            self.branch7x7dbl_5,
        ):
            c = layer(c)
        d = self.branch_pool(_pool_avg(x))
        return torch.cat([a, b, c, d], 1)


class _BlockD(nn.Module):
    """17x17 -> 8x8 reduction."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3_1 = _Conv(cin, 192, 1)
        self.branch3x3_2 = _Conv(192, 320, 3, stride=2)
        self.branch7x7x3_1 = _Conv(cin, 192, 1)
        self.branch7x7x3_2 = _Conv(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = _Conv(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = _Conv(192, 192, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch3x3_2(self.branch3x3_1(x))
        b = self.branch7x7x3_1(x)
        for layer in (self.branch7x7x3_2, self.branch7x7x3_3, self.branch7x7x3_4):
            b = layer(b)
        return torch.cat([a, b, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class _BlockE(nn.Module):
    """8x8 with split 1x3 / 3x1 outputs."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch1x1 = _Conv(cin, 320, 1)
        self.branch3x3_1 = _Conv(cin, 384, 1)
        self.branch3x3_2a = _Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = _Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = _Conv(cin, 448, 1)
        self.branch3x3dbl_2 = _Conv(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = _Conv(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = _Conv(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = _Conv(cin, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch1x1(x)
        b = self.branch3x3_1(x)
        b = torch.cat([self.branch3x3_2a(b), self.branch3x3_2b(b)], 1)
        c = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        c = torch.cat([self.branch3x3dbl_3a(c), self.branch3x3dbl_3b(c)], 1)
        d = self.branch_pool(_pool_avg(x))
        return torch.cat([a, b, c, d], 1)


class _Aux(nn.Module):
    """The auxiliary classifier: kept for the checkpoint's keys, used only in training."""

    def __init__(self, cin: int, num_classes: int):
        super().__init__()
        self.conv0 = _Conv(cin, 128, 1)
        self.conv1 = _Conv(128, 768, 5)
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


class InceptionV3(nn.Module):
    """(N, 3, 299, 299) ImageNet-normalised pixels -> (N, num_classes) logits (eval mode)."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.Conv2d_1a_3x3 = _Conv(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = _Conv(32, 32, 3)
        self.Conv2d_2b_3x3 = _Conv(32, 64, 3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = _Conv(64, 80, 1)
        self.Conv2d_4a_3x3 = _Conv(80, 192, 3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = _BlockA(192, pool_features=32)
        self.Mixed_5c = _BlockA(256, pool_features=64)
        self.Mixed_5d = _BlockA(288, pool_features=64)
        self.Mixed_6a = _BlockB(288)
        self.Mixed_6b = _BlockC(768, channels_7x7=128)
        self.Mixed_6c = _BlockC(768, channels_7x7=160)
        self.Mixed_6d = _BlockC(768, channels_7x7=160)
        self.Mixed_6e = _BlockC(768, channels_7x7=192)
        self.AuxLogits = _Aux(768, num_classes)
        self.Mixed_7a = _BlockD(768)
        self.Mixed_7b = _BlockE(1280)
        self.Mixed_7c = _BlockE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=0.5)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in (
            "Conv2d_1a_3x3",
            "Conv2d_2a_3x3",
            "Conv2d_2b_3x3",
            "maxpool1",
            "Conv2d_3b_1x1",
            "Conv2d_4a_3x3",
            "maxpool2",
            "Mixed_5b",
            "Mixed_5c",
            "Mixed_5d",
            "Mixed_6a",
            "Mixed_6b",
            "Mixed_6c",
            "Mixed_6d",
            "Mixed_6e",
            "Mixed_7a",
            "Mixed_7b",
            "Mixed_7c",
            "avgpool",
        ):
            x = getattr(self, name)(x)
        return self.fc(torch.flatten(self.dropout(x), 1))


def build_inception_v3(num_classes: int = 1000) -> nn.Module:
    """The network torchvision's ``inception_v3(weights=None, aux_logits=True,
    init_weights=False, transform_input=False)`` builds, without torchvision."""
    return InceptionV3(num_classes)


__all__ = ["InceptionV3", "build_inception_v3"]
