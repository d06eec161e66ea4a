"""A tiny randomly initialised SAM3 (model and tokenizer) for the segmentation tests."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import CLIPTokenizer, Sam3Config, Sam3Model


def tiny_sam3_config() -> Sam3Config:
    """SAM3 shrunk to a 56-pixel input, one or two layers of width 32 and ten queries."""
    hidden = 32
    small = {"hidden_size": hidden, "num_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 64}
    return Sam3Config(
        vision_config={
            "backbone_config": {
                "model_type": "sam3_vit_model", "hidden_size": hidden, "intermediate_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 56,
                "patch_size": 14, "window_size": 2, "global_attn_indexes": [1],
                "pretrain_image_size": 28,
            },
            "fpn_hidden_size": hidden,
            "backbone_feature_sizes": [[16, 16], [8, 8], [4, 4]],
        },
        text_config={
            "vocab_size": 64, "hidden_size": hidden, "intermediate_size": 64,
            "projection_dim": hidden, "num_hidden_layers": 1, "num_attention_heads": 2,
            "max_position_embeddings": 32,
        },
        geometry_encoder_config=dict(small),
        detr_encoder_config=dict(small),
        detr_decoder_config={**small, "num_queries": 10},
        mask_decoder_config={"hidden_size": hidden, "num_attention_heads": 2},
    )


def tiny_tokenizer() -> CLIPTokenizer:
    """A CLIP tokenizer over single letters (with and without end-of-word) and no merges."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = {c: i for i, c in enumerate(letters)}
    vocab.update({c + "</w>": len(letters) + i for i, c in enumerate(letters)})
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def save_tiny_sam3(path: Path) -> Path:
    """Save the tiny model (seeded with 0) and its tokenizer to ``path``; return ``path``."""
    torch.manual_seed(0)
    Sam3Model(tiny_sam3_config()).save_pretrained(path)
    tiny_tokenizer().save_pretrained(path)
    return path
