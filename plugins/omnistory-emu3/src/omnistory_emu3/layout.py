"""The token layout of an image Emu3 generates (pure, no torch).

After the prompt's ``<|image start|>H*W<|image token|>`` header the model writes ``H`` rows of
``W`` visual tokens, each row closed by an end-of-line token, then end-of-frame, end-of-image and
end-of-sequence; anything after that is padding.  Image generation constrains every step to the
token kind this layout expects (prefix-constrained decoding, as transformers' Emu3 documentation
and the upstream ``Emu3PrefixConstrainedLogitsHelper`` do).
"""

from __future__ import annotations

TOKEN_KINDS = ("visual", "eol", "eof", "eoi", "eos", "pad")


def image_sequence_length(height: int, width: int) -> int:
    """Tokens generated for one ``height`` x ``width`` (in tokens) image, end-of-sequence too."""
    return height * (width + 1) + 3


def next_token_kind(offset: int, height: int, width: int) -> str:
    """The kind of the ``offset``-th generated token (1 = the first after the header)."""
    if offset < 1:
        raise ValueError(f"offset counts generated tokens from 1, got {offset}")
    row = width + 1
    body = row * height
    if offset <= body:
        return "eol" if offset % row == 0 else "visual"
    return {body + 1: "eof", body + 2: "eoi", body + 3: "eos"}.get(offset, "pad")


def check_layout(kinds: list[str], height: int, width: int) -> str | None:
    """Why a generated sequence (token kinds, from the first generated token) is not one whole
    image, or ``None``."""
    expected = image_sequence_length(height, width)
    if len(kinds) < expected:
        return f"generation stopped after {len(kinds)} of the {expected} tokens of the image"
    for offset, kind in enumerate(kinds[:expected], start=1):
        want = next_token_kind(offset, height, width)
        if kind != want:
            return f"token {offset} is {kind}, expected {want}"
    return None
