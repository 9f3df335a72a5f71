"""The age/gender network of ``audeering/wav2vec2-large-robust-24-ft-age-gender``.

That checkpoint has no AutoModel class: its card describes a wav2vec2 encoder whose hidden states
are mean-pooled over time and fed to two heads, ``age`` (1 output) and ``gender`` (3 outputs,
softmax over female, male, child), each dropout -> dense -> tanh -> dropout -> out_proj.  The
attribute names below are the checkpoint's parameter names, so ``from_pretrained`` finds every
weight; any ``Wav2Vec2Config`` builds it, which is how tests make a tiny random instance.

This module imports torch at import time: import it only from a ``load()``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Wav2Vec2Config, Wav2Vec2Model, Wav2Vec2PreTrainedModel

GENDER_LABELS = ("female", "male", "child")


class AgeGenderHead(nn.Module):
    def __init__(self, config: Wav2Vec2Config, num_labels: int):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.final_dropout)
        self.out_proj = nn.Linear(config.hidden_size, num_labels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        x = self.dropout(features)
        x = torch.tanh(self.dense(x))
        return self.out_proj(self.dropout(x))


class AgeGenderModel(Wav2Vec2PreTrainedModel):
    """wav2vec2 encoder + mean pooling + age regression and 3-way gender heads."""

    def __init__(self, config: Wav2Vec2Config):
        super().__init__(config)
        self.wav2vec2 = Wav2Vec2Model(config)
        self.age = AgeGenderHead(config, 1)
        self.gender = AgeGenderHead(config, len(GENDER_LABELS))
        self.post_init()

    def forward(
        self, input_values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns (pooled hidden states, age, gender probabilities [female, male, child])."""
        hidden = self.wav2vec2(input_values)[0].mean(dim=1)
        return hidden, self.age(hidden), torch.softmax(self.gender(hidden), dim=-1)
