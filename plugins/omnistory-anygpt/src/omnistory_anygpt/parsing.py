"""Reading AnyGPT's answers (pure functions, no model).

The generated sequence is decoded together with its prompt; the answer is what follows the chat
model's role tag (``[MMGPT]:``).  Media come as tagged runs of tokens: ``<soim><👀12>...<eoim>`` for
an image (SEED codes), ``<sosp><🗣️7>...<eosp>`` for speech (SpeechTokenizer semantic codes); the
numbers inside a run are the codes.

The narration and the spoken line of the text pass are read the way the benchmark's runner reads
them, in this order:

1. media runs are cut out and one leading colon dropped;
2. a JSON object anywhere in the text gives ``narration`` and ``speech`` (or ``speech_text``);
3. ``Narration:`` / ``Speech:`` labels override them: the narration runs up to a line starting with
   ``Speech:``, the spoken line to the end of the text;
4. without a spoken line, the last quoted span (``"..."``, curly quotes or ``'...'``) is taken;
5. without a narration, the first non-empty line is the narration and the second the spoken line;
6. wrapping quotes are removed from both, a first sentence that talks about the task ("Here is the
   narration. ...") is dropped, and the quoted spoken line is cut out of the narration;
7. an empty narration falls back to the whole cleaned text.

``mode="official"`` reproduces one detail of the runner exactly: it collapses all whitespace,
newlines included, *before* looking for labels, so a label counts only at the very start of the
answer.  A ``Speech:`` line after the narration then stays inside the narration (and the spoken line
comes only from a quoted span).  ``mode="lines"`` keeps the line breaks, so both labels are found
where they are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

#: AnyGPT's media tags (``m_utils.anything2token.modal_special_str``): modality -> (start, end)
MEDIA_TAGS: dict[str, tuple[str, str]] = {
    "image": ("<soim>", "<eoim>"),
    "speech": ("<sosp>", "<eosp>"),
    "music": ("<somu>", "<eomu>"),
}
#: the role tag of AnyGPT-chat's answers and the two tags that end an answer
ASSISTANT_TAG = "[MMGPT]"
ANSWER_ENDS = ("<eos>", "<eom>")
PARSE_MODES = ("official", "lines")

#: first sentences that describe the task instead of telling the story (dropped)
META_OPENINGS = (
    "write a sentence",
    "write one sentence",
    "describe the next page",
    "describe the scene",
    "generate the next page",
    "here is the narration",
)

_SPACES = re.compile(r"\s+")
_QUOTED = re.compile(r'"([^"]+)"|“([^”]+)”|\'([^\']+)\'')
_LABEL = re.compile(r"^\s*(narration|speech)\s*:\s*", re.IGNORECASE)


def squash(text: str) -> str:
    """All runs of whitespace (newlines too) -> one space, trimmed."""
    return _SPACES.sub(" ", text or "").strip()


def media_tags(
    special: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, tuple[str, str]]:
    """``{modality: (start, end)}`` from the checkout's ``modal_special_str`` (or the defaults)."""
    if not special:
        return dict(MEDIA_TAGS)
    return {name: (str(tags["sos"]), str(tags["eos"])) for name, tags in special.items()}


def assistant_payload(decoded: str, role: str = ASSISTANT_TAG) -> str:
    """The answer inside a decoded prompt + generation.

    If the text ends with an end-of-answer tag, the answer runs from the first ``[MMGPT]:`` to that
    final tag; otherwise it is whatever follows the last ``[MMGPT]`` (a leading colon dropped).
    Generation runs until ``max_new_tokens`` (the generation settings carry no stop token), so what
    follows the model's own end tag stays in the answer, as in the benchmark's runner.
    """
    ends = "|".join(re.escape(tag) for tag in ANSWER_ENDS)
    match = re.search(rf"{re.escape(role)}\s*:\s*(.*?)(?:{ends})\s*$", decoded, flags=re.DOTALL)
    if match:
        return match.group(1).strip()
    tail = decoded.rsplit(role, 1)[-1] if role in decoded else decoded
    return re.sub(r"^\s*:\s*", "", tail, count=1).strip()


def media_segments(
    answer: str, modality: str, tags: Mapping[str, tuple[str, str]] = MEDIA_TAGS
) -> list[str]:
    """Every complete ``<start>...<end>`` run of one modality, in order (the text between)."""
    start, end = tags[modality]
    return re.findall(re.escape(start) + r"(.*?)" + re.escape(end), answer, flags=re.DOTALL)


def segment_codes(segment: str) -> list[int]:
    """The codes of one media run: every decimal number in it, in order."""
    return [int(number) for number in re.findall(r"\d+", segment)]


def strip_media(answer: str, tags: Mapping[str, tuple[str, str]] = MEDIA_TAGS) -> str:
    """The answer without media runs (each replaced by a space) and without one leading colon."""
    text = answer
    for start, end in tags.values():
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), " ", text, flags=re.DOTALL)
    return re.sub(r"^\s*:\s*", "", text, count=1)


def unquote(text: str) -> str:
    text = (text or "").strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1].strip()
    return text


def drop_meta_opening(text: str) -> str:
    """Drop a first sentence that talks about the task rather than telling the story."""
    text = squash(text)
    parts = re.split(r"(?<=[.!?])\s+", text, maxsplit=1)
    if len(parts) == 2 and parts[0].lower().startswith(META_OPENINGS):
        return parts[1].strip()
    return text


def _clean(answer: str, tags: Mapping[str, tuple[str, str]], mode: str) -> str:
    text = strip_media(answer, tags)
    if mode == "official":
        return squash(text)
    lines = [squash(line) for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def _from_json(text: str) -> tuple[str, str]:
    match = re.search(r"\{.*\}", text, flags=re.DOTALL)
    if not match:
        return "", ""
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return "", ""
    if not isinstance(data, dict):
        return "", ""

    def field(*keys: str) -> str:
        for key in keys:
            if key in data:
                value = data[key]
                return squash(value) if isinstance(value, str) else ""
        return ""

    return field("narration"), field("speech", "speech_text")


def _labelled(lines: list[str], label: str) -> int | None:
    for index, line in enumerate(lines):
        found = _LABEL.match(line)
        if found and found.group(1).lower() == label:
            return index
    return None


def _from_labels(text: str) -> tuple[str, str]:
    """Narration: from its label line up to a line starting with ``Speech:`` (or the end);
    spoken line: from its label line to the end of the text."""
    lines = text.split("\n")
    narration = speech = ""
    first = _labelled(lines, "narration")
    if first is not None:
        stop = _labelled(lines[first + 1 :], "speech")
        end = len(lines) if stop is None else first + 1 + stop
        body = [_LABEL.sub("", lines[first], count=1), *lines[first + 1 : end]]
        narration = squash(" ".join(body))
    said = _labelled(lines, "speech")
    if said is not None:
        body = [_LABEL.sub("", lines[said], count=1), *lines[said + 1 :]]
        speech = squash(" ".join(body))
    return narration, speech


def parse_text_answer(
    answer: str,
    tags: Mapping[str, tuple[str, str]] = MEDIA_TAGS,
    mode: str = "official",
) -> tuple[str, str]:
    """``(narration, spoken line)`` of the text pass; the spoken line may be empty."""
    if mode not in PARSE_MODES:
        raise ValueError(f"mode must be one of {PARSE_MODES}, got {mode!r}")
    clean = _clean(answer, tags, mode)
    narration, speech = _from_json(clean)
    labelled_narration, labelled_speech = _from_labels(clean)
    narration = labelled_narration or narration
    speech = labelled_speech or speech
    if not speech:
        spans = [squash("".join(groups)) for groups in _QUOTED.findall(clean)]
        spans = [span for span in spans if span]
        if spans:
            speech = spans[-1]
    if not narration:
        lines = [squash(_LABEL.sub("", line, count=1)) for line in clean.split("\n")]
        lines = [line for line in lines if line]
        if lines:
            narration = lines[0]
        if len(lines) > 1 and not speech:
            speech = lines[1]
    narration = drop_meta_opening(unquote(narration))
    speech = unquote(speech)
    if speech and narration:
        for quoted in (f'"{speech}"', f"“{speech}”"):
            narration = narration.replace(quoted, "")
        narration = squash(narration)
    return narration or clean, speech


__all__ = [
    "ANSWER_ENDS",
    "ASSISTANT_TAG",
    "MEDIA_TAGS",
    "META_OPENINGS",
    "PARSE_MODES",
    "assistant_payload",
    "drop_meta_opening",
    "media_segments",
    "media_tags",
    "parse_text_answer",
    "segment_codes",
    "squash",
    "strip_media",
    "unquote",
]
