"""Tiny random stand-ins of the metric checkpoints, built offline, for tests and benchmarks.

Each ``build_tiny_*`` writes a complete checkpoint directory (config, random weights, tokenizer /
processor / feature-extractor files) that the metric loads through exactly the same
``from_pretrained`` path as the real hub checkpoint.  Scores from them are meaningless; they exist
to exercise loading, batching, output handling and throughput without any download.
Requires torch, transformers and tokenizers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_CORPUS = [
    "the little fox ran to the river and saw a boat",
    "look a boat said mina and she laughed",
    "the bird sang a song in the tall green tree",
    "grandmother told a story about the moon and the stars",
]


def _bpe(directory: Path, vocab_size: int, special_tokens: list[str]) -> tuple[str, str]:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _CORPUS * 5,
        vocab_size=vocab_size,
        min_frequency=1,
        special_tokens=special_tokens,
        show_progress=False,
    )
    bpe.save_model(str(directory))
    return str(directory / "vocab.json"), str(directory / "merges.txt")


def _token_id(value: object) -> int:
    """A tokenizer's id for one special token (transformers types it int | str | list | None)."""
    if not isinstance(value, int):
        raise TypeError(f"expected one token id, got {value!r}")
    return value


def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def _fresh(directory: str | Path, seed: int) -> Path:
    """``directory`` created (parents too) and torch seeded: where every builder starts."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _seed(seed)
    return d


def build_tiny_roberta(directory: str | Path, seed: int = 0, layers: int = 3) -> Path:
    """A 3-layer RoBERTa with a byte-level BPE tokenizer (bert_score's RoBERTa code path)."""
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    d = _fresh(directory, seed)
    vocab, merges = _bpe(d, 300, ["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tok = RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=64)
    tok.save_pretrained(d)
    cfg = RobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
        pad_token_id=_token_id(tok.pad_token_id),
        bos_token_id=_token_id(tok.bos_token_id),
        eos_token_id=_token_id(tok.eos_token_id),
    )
    RobertaModel(cfg).save_pretrained(d)
    return d


def build_tiny_clip(directory: str | Path, seed: int = 0, image_size: int = 32) -> Path:
    """A tiny CLIPModel with a full CLIPProcessor (image processor + tokenizer)."""
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        CLIPProcessor,
        CLIPTokenizer,
    )

    d = _fresh(directory, seed)
    vocab, merges = _bpe(d, 280, ["<|startoftext|>", "<|endoftext|>"])
    tok = CLIPTokenizer(vocab=vocab, merges=merges)
    images = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    CLIPProcessor(image_processor=images, tokenizer=tok).save_pretrained(d)
    cfg = CLIPConfig(
        text_config=dict(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            max_position_embeddings=16,
            bos_token_id=tok.convert_tokens_to_ids("<|startoftext|>"),
            eos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
            pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        ),
        vision_config=dict(
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=image_size,
            patch_size=8,
        ),
        projection_dim=8,
    )
    CLIPModel(cfg).save_pretrained(d)
    return d


WHISPER_SPECIALS = [
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|en|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nospeech|>",
    "<|notimestamps|>",
]


def build_tiny_whisper(directory: str | Path, seed: int = 0) -> Path:
    """A 1-layer Whisper with Whisper's special/timestamp token layout and alignment heads, so the
    ASR pipeline's ``return_timestamps="word"`` path runs end to end."""
    from transformers import (
        AddedToken,
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    d = _fresh(directory, seed)
    vocab, merges = _bpe(d, 300, [])
    tok = WhisperTokenizer(vocab=vocab, merges=merges, pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": WHISPER_SPECIALS[1:]})
    # timestamp tokens follow <|notimestamps|> directly, 0.02 s apart, as in the real vocabulary
    tok.add_tokens(
        [AddedToken(f"<|{i * 0.02:.2f}|>", lstrip=False, rstrip=False) for i in range(1501)]
    )
    ids = {s: _token_id(tok.convert_tokens_to_ids(s)) for s in WHISPER_SPECIALS}
    WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tok
    ).save_pretrained(d)
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    cfg = WhisperConfig(
        vocab_size=len(tok),
        num_mel_bins=80,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_source_positions=1500,
        max_target_positions=64,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=sot,
        begin_suppress_tokens=None,
        suppress_tokens=None,
    )
    model = WhisperForConditionalGeneration(cfg)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        eos_token_id=eot,
        pad_token_id=eot,
        bos_token_id=eot,
        max_length=10,
        no_timestamps_token_id=ids["<|notimestamps|>"],
        prev_sot_token_id=ids["<|startofprev|>"],
        is_multilingual=True,
        lang_to_id={"<|en|>": ids["<|en|>"]},
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        alignment_heads=[[0, 0], [0, 1]],
        max_initial_timestamp_index=50,
        suppress_tokens=[],
        begin_suppress_tokens=[eot],
    )
    model.save_pretrained(d)
    return d


def _tiny_wav2vec2_kwargs() -> dict[str, Any]:
    # default 7-layer feature encoder (stride 320, as the real models) with 8 channels
    return dict(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(8,) * 7,
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        feat_extract_norm="layer",
        do_stable_layer_norm=True,
    )


def _save_extractor(d: Path) -> None:
    from transformers import Wav2Vec2FeatureExtractor

    Wav2Vec2FeatureExtractor(
        feature_size=1,
        sampling_rate=16000,
        padding_value=0.0,
        do_normalize=True,
        return_attention_mask=True,
    ).save_pretrained(d)


def build_tiny_hubert_er(directory: str | Path, seed: int = 0) -> Path:
    """A tiny HubertForSequenceClassification with superb/hubert-large-superb-er's label set."""
    from transformers import HubertConfig, HubertForSequenceClassification

    d = _fresh(directory, seed)
    labels = ["neu", "hap", "ang", "sad"]
    # four labels: id2label sets num_labels
    cfg = HubertConfig(
        **_tiny_wav2vec2_kwargs(),
        classifier_proj_size=8,
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
    )
    HubertForSequenceClassification(cfg).save_pretrained(d)
    _save_extractor(d)
    return d


def build_tiny_age_gender(directory: str | Path, seed: int = 0) -> Path:
    """A tiny instance of the audeering age/gender architecture (custom heads included)."""
    from omnistory_eval.metrics._age_gender_nn import AgeGenderModel
    from transformers import Wav2Vec2Config

    d = _fresh(directory, seed)
    AgeGenderModel(Wav2Vec2Config(**_tiny_wav2vec2_kwargs())).save_pretrained(d)
    _save_extractor(d)
    return d


def build_tiny_wav2vec2(directory: str | Path, seed: int = 0) -> Path:
    """A tiny plain ``Wav2Vec2Model`` with its feature extractor (an encoder for stand-ins)."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    d = _fresh(directory, seed)
    Wav2Vec2Model(Wav2Vec2Config(**_tiny_wav2vec2_kwargs())).save_pretrained(d)
    _save_extractor(d)
    return d


# --- stand-ins that need another environment (SpeechBrain: torchaudio; emotion2vec: funasr) ----

_SPEECHBRAIN_INTERFACE = '''
"""Stand-in of the IEMOCAP repository's custom interface (same class name and call shape)."""
import torch
from speechbrain.inference.interfaces import Pretrained


class CustomEncoderWav2vec2Classifier(Pretrained):
    MODULES_NEEDED = ["wav2vec2", "avg_pool", "output_mlp"]

    def encode_batch(self, wavs, wav_lens=None):
        if wavs.dim() == 1:
            wavs = wavs.unsqueeze(0)
        if wav_lens is None:
            wav_lens = torch.ones(wavs.shape[0], device=self.device)
        feats = self.mods.wav2vec2(wavs.to(self.device).float())
        pooled = self.mods.avg_pool(feats, wav_lens.to(self.device))
        return pooled.view(pooled.shape[0], -1)

    def classify_batch(self, wavs, wav_lens=None):
        out_prob = self.hparams.softmax(self.mods.output_mlp(self.encode_batch(wavs, wav_lens)))
        score, index = torch.max(out_prob, dim=-1)
        return out_prob, score, index, self.hparams.label_encoder.decode_torch(index)
'''

_SPEECHBRAIN_HPARAMS = """\
# Stand-in of the IEMOCAP inference hyperparameters: same module names and label encoder,
# tiny local wav2vec2 encoder.
wav2vec2_hub: {encoder}
pretrained_path: {directory}
wav2vec2: !new:speechbrain.lobes.models.huggingface_transformers.wav2vec2.Wav2Vec2
    source: !ref <wav2vec2_hub>
    output_norm: True
    freeze: True
    save_path: wav2vec2_checkpoints
avg_pool: !new:speechbrain.nnet.pooling.StatisticsPooling
    return_std: False
output_mlp: !new:speechbrain.nnet.linear.Linear
    input_size: 16
    n_neurons: 4
    bias: False
model: !new:torch.nn.ModuleList
    - [!ref <output_mlp>]
modules:
    wav2vec2: !ref <wav2vec2>
    output_mlp: !ref <output_mlp>
    avg_pool: !ref <avg_pool>
softmax: !new:speechbrain.nnet.activations.Softmax
    apply_log: True
label_encoder: !new:speechbrain.dataio.encoder.CategoricalEncoder
pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        model: !ref <model>
        label_encoder: !ref <label_encoder>
    paths:
        model: !ref <pretrained_path>/model.ckpt
        label_encoder: !ref <pretrained_path>/label_encoder.txt
"""


def build_speechbrain_iemocap_standin(directory: str | Path, seed: int = 0) -> Path:
    """A local SpeechBrain source laid out like ``speechbrain/emotion-recognition-wav2vec2-IEMOCAP``
    (``hyperparams.yaml``, ``custom_interface.py`` with ``CustomEncoderWav2vec2Classifier``,
    ``model.ckpt``, ``label_encoder.txt`` in the label order neu, ang, hap, sad) around a tiny
    wav2vec2.  Needs speechbrain (hence torchaudio): run it in the environment that has them."""
    import torch

    # speechbrain is installed in the speech environment only, not where the package is checked
    from speechbrain.dataio.encoder import CategoricalEncoder  # pyright: ignore[reportMissingImports]
    from speechbrain.nnet.linear import Linear  # pyright: ignore[reportMissingImports]

    d = Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    encoder = build_tiny_wav2vec2(d / "encoder", seed)
    _seed(seed)
    torch.save(
        torch.nn.ModuleList([Linear(input_size=16, n_neurons=4, bias=False)]).state_dict(),
        d / "model.ckpt",
    )
    labels = CategoricalEncoder()
    for label in ("neu", "ang", "hap", "sad"):
        labels.add_label(label)
    labels.save(d / "label_encoder.txt")
    (d / "custom_interface.py").write_text(_SPEECHBRAIN_INTERFACE.lstrip(), encoding="utf-8")
    (d / "hyperparams.yaml").write_text(
        _SPEECHBRAIN_HPARAMS.format(encoder=encoder, directory=d), encoding="utf-8"
    )
    return d


EMOTION2VEC_TOKENS = [
    "生气/angry",
    "厌恶/disgusted",
    "恐惧/fearful",
    "开心/happy",
    "中立/neutral",
    "其他/other",
    "难过/sad",
    "吃惊/surprised",
    "<unk>",
]


def build_tiny_emotion2vec(directory: str | Path, seed: int = 0) -> Path:
    """A local funasr model directory (``config.yaml``, ``model.pt``, ``tokens.txt``) of a tiny
    ``Emotion2vec`` with the nine emotion2vec+ classes.  Needs funasr: run it where funasr is."""
    import torch

    # funasr is installed in the speech environment only, not where the package is checked
    from funasr.models.emotion2vec.model import Emotion2vec  # pyright: ignore[reportMissingImports]

    audio = dict(
        type="AUDIO",
        feature_encoder_spec="[(16, 10, 5)] + [(16, 3, 2)] * 4 + [(16, 2, 2)] * 2",
        extractor_mode="layer_norm",
        conv_pos_depth=1,
        conv_pos_width=4,
        conv_pos_groups=2,
        conv_pos_pre_ln=False,
        start_drop_path_rate=0.0,
        end_drop_path_rate=0.0,
        prenet_depth=1,
        prenet_layerdrop=0.0,
        prenet_dropout=0.0,
        decoder=None,
        num_extra_tokens=0,
        init_extra_token_zero=True,
        use_alibi_encoder=True,
        learned_alibi=False,
        alibi_max_pos=None,
        learned_alibi_scale=True,
        learned_alibi_scale_per_head=True,
        learned_alibi_scale_per_layer=False,
        num_alibi_heads=2,
        model_depth=1,
        local_grad_mult=1.0,
        alibi_scale=1.0,
        mask_noise_std=0.01,
        keep_masked_pct=0.0,
        inverse_mask=False,
        mask_prob=0.0,
        mask_prob_min=None,
        mask_length=5,
        mask_dropout=0.0,
        add_masks=False,
        mask_channel_prob=0.0,
        mask_channel_length=64,
        encoder_zero_mask=True,
        ema_local_encoder=False,
        mask_prob_adjust=0.0,
        remove_masks=False,
    )
    conf = dict(
        loss_beta=0.0,
        loss_scale=None,
        depth=1,
        start_drop_path_rate=0.0,
        end_drop_path_rate=0.0,
        num_heads=2,
        norm_eps=1e-5,
        norm_affine=True,
        encoder_dropout=0.0,
        post_mlp_drop=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        dropout_input=0.0,
        layerdrop=0.0,
        embed_dim=16,
        mlp_ratio=2.0,
        layer_norm_first=False,
        average_top_k_layers=1,
        end_of_block_targets=False,
        clone_batch=1,
        normalize=True,
        modalities=dict(audio=audio),
    )
    d = _fresh(directory, seed)
    model = Emotion2vec(model_conf=conf, vocab_size=len(EMOTION2VEC_TOKENS))
    torch.save(model.state_dict(), d / "model.pt")
    (d / "tokens.txt").write_text("\n".join(EMOTION2VEC_TOKENS) + "\n", encoding="utf-8")
    config = {
        "model": "Emotion2vec",
        "model_conf": conf,
        "tokenizer": "CharTokenizer",
        "tokenizer_conf": {"unk_symbol": "<unk>", "split_with_space": True},
    }
    # JSON is valid YAML, and needs no yaml library in that environment
    (d / "config.yaml").write_text(
        json.dumps(config, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    return d


def build_all(directory: str | Path, seed: int = 0) -> dict[str, Path]:
    """Every stand-in under ``directory``; keys: roberta, clip, whisper, hubert, age_gender."""
    root = Path(directory)
    return {
        "roberta": build_tiny_roberta(root / "roberta", seed),
        "clip": build_tiny_clip(root / "clip", seed),
        "whisper": build_tiny_whisper(root / "whisper", seed),
        "hubert": build_tiny_hubert_er(root / "hubert", seed),
        "age_gender": build_tiny_age_gender(root / "age_gender", seed),
    }


def synthetic_voice(
    f0_hz: float,
    seconds: float = 1.0,
    sample_rate: int = 16000,
    syllables_per_second: float = 0.0,
    seed: int = 0,
) -> Any:
    """A voiced, harmonic-rich float32 signal with known F0 (5 harmonics, 1/k amplitudes); with
    ``syllables_per_second`` > 0 it is gated into bursts separated by silence."""
    import numpy as np

    t = np.arange(int(seconds * sample_rate)) / sample_rate
    wave = sum((1.0 / k) * np.sin(2 * np.pi * k * f0_hz * t) for k in range(1, 6))
    wave = 0.3 * wave / np.max(np.abs(wave))
    if syllables_per_second > 0:
        gate = (np.sin(2 * np.pi * syllables_per_second * t) > 0).astype(float)
        wave = wave * gate
    rng = np.random.default_rng(seed)
    wave = wave + 1e-4 * rng.standard_normal(wave.shape)
    return wave.astype(np.float32)


def write_wav(path: str | Path, wave: Any, sample_rate: int = 16000) -> Path:
    import soundfile as sf

    path = Path(path)
    sf.write(str(path), wave, sample_rate, subtype="PCM_16")
    return path


def tiny_speech_meta_params(models: dict[str, Path]) -> dict[str, Any]:
    """``speech_meta`` parameters that use the stand-ins (HuBERT as the only emotion member)."""
    return {
        "whisper_model": str(models["whisper"]),
        "gender_model": str(models["age_gender"]),
        "emotion_models": {"hubert": str(models["hubert"])},
        "asr_num_beams": 1,  # greedy: the stand-in's transcripts are noise anyway
        "device": "cpu",
    }


def describe(directory: str | Path) -> str:
    """One line per stand-in with its parameter count (for benchmark output)."""
    lines = []
    for cfg in sorted(Path(directory).glob("*/config.json")):
        data = json.loads(cfg.read_text())
        lines.append(f"{cfg.parent.name}: {data.get('model_type')}")
    return "\n".join(lines)
