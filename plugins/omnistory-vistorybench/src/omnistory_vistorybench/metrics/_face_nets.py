"""The face recognition networks of CIDS's ``face_mix`` ensemble, as plain PyTorch modules.

* :class:`InceptionResnetV1` -- FaceNet as the official evaluator vendors it
  (``bench/content/inception_resnet_v1.py``, itself facenet-pytorch's): same module names, so
  the official ``20180402-114759-vggface2.pt`` state dict (with its 8631-class ``logits`` head,
  unused for embeddings) loads strictly.
* :func:`ir_backbone` -- AdaFace's IR ResNet (``mk-minchul/AdaFace`` ``net.py``, ``Backbone``
  with ``BasicBlockIR``); ``ir_backbone(100)`` is the official IR-101 whose
  ``adaface_ir101_webface12m.ckpt`` state dict loads strictly once its ``model.`` prefix is
  stripped.

The layer layouts are written out from those files (their parameter names are the contract
with the checkpoints); only what inference needs is kept.  Imported only when a face encoder
loads (torch at module level).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: classes of the vggface2 FaceNet's training head (present in the official state dict)
VGGFACE2_CLASSES = 8631


# -- FaceNet (InceptionResnetV1) ----------------------------------------------------------------
class BasicConv2d(nn.Module):
    def __init__(
        self,
        in_planes: int,
        out_planes: int,
        kernel_size: int | tuple[int, int],
        stride: int,
        padding: int | tuple[int, int] = 0,
    ):
        super().__init__()
        self.conv = nn.Conv2d(
            in_planes,
            out_planes,
            kernel_size=kernel_size,
            stride=stride,
            padding=padding,
            bias=False,
        )
        # eps as in the TensorFlow original the weights come from
        self.bn = nn.BatchNorm2d(out_planes, eps=0.001, momentum=0.1, affine=True)
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Block35(nn.Module):
    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale
        self.branch0 = BasicConv2d(256, 32, kernel_size=1, stride=1)
        self.branch1 = nn.Sequential(
            BasicConv2d(256, 32, kernel_size=1, stride=1),
            BasicConv2d(32, 32, kernel_size=3, stride=1, padding=1),
        )
        self.branch2 = nn.Sequential(
            BasicConv2d(256, 32, kernel_size=1, stride=1),
            BasicConv2d(32, 32, kernel_size=3, stride=1, padding=1),
            BasicConv2d(32, 32, kernel_size=3, stride=1, padding=1),
        )
        self.conv2d = nn.Conv2d(96, 256, kernel_size=1, stride=1)
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat((self.branch0(x), self.branch1(x), self.branch2(x)), 1)
        return self.relu(self.conv2d(out) * self.scale + x)


class Block17(nn.Module):
    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale
        self.branch0 = BasicConv2d(896, 128, kernel_size=1, stride=1)
        self.branch1 = nn.Sequential(
            BasicConv2d(896, 128, kernel_size=1, stride=1),
            BasicConv2d(128, 128, kernel_size=(1, 7), stride=1, padding=(0, 3)),
            BasicConv2d(128, 128, kernel_size=(7, 1), stride=1, padding=(3, 0)),
        )
        self.conv2d = nn.Conv2d(256, 896, kernel_size=1, stride=1)
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat((self.branch0(x), self.branch1(x)), 1)
        return self.relu(self.conv2d(out) * self.scale + x)


class Block8(nn.Module):
    def __init__(self, scale: float = 1.0, no_relu: bool = False):
        super().__init__()
        self.scale = scale
        self.no_relu = no_relu
        self.branch0 = BasicConv2d(1792, 192, kernel_size=1, stride=1)
        self.branch1 = nn.Sequential(
            BasicConv2d(1792, 192, kernel_size=1, stride=1),
            BasicConv2d(192, 192, kernel_size=(1, 3), stride=1, padding=(0, 1)),
            BasicConv2d(192, 192, kernel_size=(3, 1), stride=1, padding=(1, 0)),
        )
        self.conv2d = nn.Conv2d(384, 1792, kernel_size=1, stride=1)
        if not no_relu:
            self.relu = nn.ReLU(inplace=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.cat((self.branch0(x), self.branch1(x)), 1)
        out = self.conv2d(out) * self.scale + x
        return out if self.no_relu else self.relu(out)


class Mixed6a(nn.Module):
    def __init__(self):
        super().__init__()
        self.branch0 = BasicConv2d(256, 384, kernel_size=3, stride=2)
        self.branch1 = nn.Sequential(
            BasicConv2d(256, 192, kernel_size=1, stride=1),
            BasicConv2d(192, 192, kernel_size=3, stride=1, padding=1),
            BasicConv2d(192, 256, kernel_size=3, stride=2),
        )
        self.branch2 = nn.MaxPool2d(3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((self.branch0(x), self.branch1(x), self.branch2(x)), 1)


class Mixed7a(nn.Module):
    def __init__(self):
        super().__init__()
        self.branch0 = nn.Sequential(
            BasicConv2d(896, 256, kernel_size=1, stride=1),
            BasicConv2d(256, 384, kernel_size=3, stride=2),
        )
        self.branch1 = nn.Sequential(
            BasicConv2d(896, 256, kernel_size=1, stride=1),
            BasicConv2d(256, 256, kernel_size=3, stride=2),
        )
        self.branch2 = nn.Sequential(
            BasicConv2d(896, 256, kernel_size=1, stride=1),
            BasicConv2d(256, 256, kernel_size=3, stride=1, padding=1),
            BasicConv2d(256, 256, kernel_size=3, stride=2),
        )
        self.branch3 = nn.MaxPool2d(3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        parts = (self.branch0(x), self.branch1(x), self.branch2(x), self.branch3(x))
        return torch.cat(parts, 1)


class InceptionResnetV1(nn.Module):
    """FaceNet's embedding network; ``forward`` returns L2-normalised 512-d embeddings (the
    official's ``classify=False``).  ``logits`` is kept so that the vggface2 state dict loads
    strictly; it is not used."""

    def __init__(self, num_classes: int = VGGFACE2_CLASSES):
        super().__init__()
        self.conv2d_1a = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.conv2d_2a = BasicConv2d(32, 32, kernel_size=3, stride=1)
        self.conv2d_2b = BasicConv2d(32, 64, kernel_size=3, stride=1, padding=1)
        self.maxpool_3a = nn.MaxPool2d(3, stride=2)
        self.conv2d_3b = BasicConv2d(64, 80, kernel_size=1, stride=1)
        self.conv2d_4a = BasicConv2d(80, 192, kernel_size=3, stride=1)
        self.conv2d_4b = BasicConv2d(192, 256, kernel_size=3, stride=2)
        self.repeat_1 = nn.Sequential(*[Block35(scale=0.17) for _ in range(5)])
        self.mixed_6a = Mixed6a()
        self.repeat_2 = nn.Sequential(*[Block17(scale=0.10) for _ in range(10)])
        self.mixed_7a = Mixed7a()
        self.repeat_3 = nn.Sequential(*[Block8(scale=0.20) for _ in range(5)])
        self.block8 = Block8(no_relu=True)
        self.avgpool_1a = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.6)
        self.last_linear = nn.Linear(1792, 512, bias=False)
        self.last_bn = nn.BatchNorm1d(512, eps=0.001, momentum=0.1, affine=True)
        self.logits = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (
            self.conv2d_1a,
            self.conv2d_2a,
            self.conv2d_2b,
            self.maxpool_3a,
            self.conv2d_3b,
            self.conv2d_4a,
            self.conv2d_4b,
            self.repeat_1,
            self.mixed_6a,
            self.repeat_2,
            self.mixed_7a,
            self.repeat_3,
            self.block8,
            self.avgpool_1a,
        ):
            x = layer(x)
        x = self.last_bn(self.last_linear(self.dropout(x).view(x.shape[0], -1)))
        return F.normalize(x, p=2, dim=1)


# -- AdaFace (IR ResNet) ------------------------------------------------------------------------
#: units per stage, and stage widths, of AdaFace's IR backbones (``get_blocks``)
IR_UNITS: dict[int, tuple[int, int, int, int]] = {
    18: (2, 2, 2, 2),
    34: (3, 4, 6, 3),
    50: (3, 4, 14, 3),
    100: (3, 13, 30, 3),
}
IR_WIDTHS = (64, 128, 256, 512)


class BasicBlockIR(nn.Module):
    def __init__(self, in_channel: int, depth: int, stride: int):
        super().__init__()
        self.shortcut_layer: nn.Module
        if in_channel == depth:
            self.shortcut_layer = nn.MaxPool2d(1, stride)
        else:
            self.shortcut_layer = nn.Sequential(
                nn.Conv2d(in_channel, depth, (1, 1), stride, bias=False), nn.BatchNorm2d(depth)
            )
        self.res_layer = nn.Sequential(
            nn.BatchNorm2d(in_channel),
            nn.Conv2d(in_channel, depth, (3, 3), (1, 1), 1, bias=False),
            nn.BatchNorm2d(depth),
            nn.PReLU(depth),
            nn.Conv2d(depth, depth, (3, 3), stride, 1, bias=False),
            nn.BatchNorm2d(depth),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res_layer(x) + self.shortcut_layer(x)


class Flatten(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.size(0), -1)  # AdaFace: view (same values; any memory layout)


class IRBackbone(nn.Module):
    """AdaFace's ``Backbone(input_size=(112, 112), num_layers, mode="ir")``; ``forward``
    returns ``(unit-norm embedding, norm)`` as AdaFace does."""

    def __init__(self, num_layers: int = 100):
        super().__init__()
        if num_layers not in IR_UNITS:
            raise ValueError(f"num_layers must be one of {sorted(IR_UNITS)}, got {num_layers}")
        self.input_layer = nn.Sequential(
            nn.Conv2d(3, 64, (3, 3), 1, 1, bias=False), nn.BatchNorm2d(64), nn.PReLU(64)
        )
        modules: list[nn.Module] = []
        in_channel = 64
        for units, depth in zip(IR_UNITS[num_layers], IR_WIDTHS, strict=True):
            # get_block: the first unit of a stage strides by 2, the others by 1
            modules.append(BasicBlockIR(in_channel, depth, 2))
            modules.extend(BasicBlockIR(depth, depth, 1) for _ in range(units - 1))
            in_channel = depth
        self.body = nn.Sequential(*modules)
        self.output_layer = nn.Sequential(
            nn.BatchNorm2d(512),
            nn.Dropout(0.4),
            Flatten(),
            nn.Linear(512 * 7 * 7, 512),
            nn.BatchNorm1d(512, affine=False),
        )

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.output_layer(self.body(self.input_layer(x)))
        norm = torch.norm(x, 2, 1, True)
        return torch.div(x, norm), norm


def ir_backbone(num_layers: int = 100) -> IRBackbone:
    return IRBackbone(num_layers)


__all__ = ["IRBackbone", "InceptionResnetV1", "VGGFACE2_CLASSES", "ir_backbone"]
