"""Pure functions of the hyperclova backbone: prompts, answer parsing, response reading."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace

from omnistory_hyperclova import prompts as P

META = {"genre": "Fantasy", "style": "flat shapes", "characters": [{"name": "Lena"}]}
COND = {
    "characters": [
        {
            "name": "Pip",
            "emotion": "urgent",
            "speech_intent": "warn Lena",
            "action": "taps",
            "visibility": "outside",
        },
        {"name": "Lena", "emotion": "", "speech_intent": "stays silent"},
    ],
    "scene": "bedroom at night",
    "text_instruction": "Introduce Pip.",
    "ambient_sound": "crickets",
}


# -- parsing ------------------------------------------------------------------------------------


def test_labelled_pair() -> None:
    got = P.parse_text_answer("NARRATION: Pip knocked.\nSPEECH: Open up!")
    assert (got.narration, got.speech, got.labelled) == ("Pip knocked.", "Open up!", True)


def test_labels_alone_on_their_line_and_decoration() -> None:
    raw = '**NARRATION:**\n\n  Pip   knocked\ton the glass.\n- **SPEECH**:\n> "Open up!"\n'
    got = P.parse_text_answer(raw)
    assert got.narration == "Pip knocked on the glass."
    assert got.speech == '"Open up!"'


def test_first_pair_wins_and_case_insensitive() -> None:
    raw = "narration: one.\nspeech: first!\nNARRATION: two.\nSPEECH: second!"
    got = P.parse_text_answer(raw)
    assert (got.narration, got.speech) == ("one.", "first!")


def test_stage_direction_speech_passed_over() -> None:
    raw = "NARRATION: n.\nSPEECH: (sighs)\nSPEECH: Oh no."
    assert P.parse_text_answer(raw).speech == "Oh no."
    assert P.parse_text_answer("NARRATION: n.\nSPEECH: (sighs)").speech == "(sighs)"


def test_unlabelled_falls_back_to_line_positions() -> None:
    got = P.parse_text_answer("Pip knocked.\n\nOpen up!\nextra")
    assert (got.narration, got.speech, got.labelled) == ("Pip knocked.", "Open up!", False)
    assert P.parse_text_answer("Only one line.").speech == ""
    assert P.parse_text_answer("").narration == ""


def test_missing_speech_is_never_copied_from_narration() -> None:
    got = P.parse_text_answer("NARRATION: Pip knocked.\nHe waited.")
    assert got.narration == "Pip knocked." and got.speech == ""


def test_missing_narration_stays_missing() -> None:
    got = P.parse_text_answer("SPEECH: Open up!")
    assert got.narration == "" and got.speech == "Open up!"


def test_words_starting_with_a_label_are_not_labels() -> None:
    got = P.parse_text_answer("Speechless, Lena stared.\nNARRATION: n.")
    assert got.narration == "n." and got.speech == ""


def test_reasoning_and_special_tokens_stripped() -> None:
    raw = "<think>plan the page</think>\nNARRATION: n.<|im_end|>\nSPEECH: s!"
    assert (P.parse_text_answer(raw).narration, P.parse_text_answer(raw).speech) == ("n.", "s!")
    assert P.strip_reasoning("<think>cut by the limit") == ""
    assert P.strip_reasoning("a</think>b") == "ab"


# -- prompts ------------------------------------------------------------------------------------


def test_text_prompt_carries_inputs_and_format() -> None:
    prompt = P.text_prompt("Lena looked out.", META, COND)
    assert "Lena looked out." in prompt
    assert json.dumps(META, ensure_ascii=False, indent=2) in prompt
    assert json.dumps(COND, ensure_ascii=False, indent=2) in prompt
    assert "NARRATION:" in prompt and "SPEECH:" in prompt
    assert "same language" in prompt and "No JSON" in prompt and "speaker names" in prompt


def test_image_prompt_carries_narration_not_speech() -> None:
    prompt = P.image_prompt("Lena looked out.", "Pip knocked.", META, COND)
    assert "Lena looked out." in prompt and "Pip knocked." in prompt
    assert json.dumps(COND, ensure_ascii=False, indent=2) in prompt


def test_voice_direction_and_speech_prompt() -> None:
    direction = P.voice_direction(COND)
    assert direction.splitlines() == [
        "- Pip; emotion: urgent; speech_intent: warn Lena; action: taps; visibility: outside",
        "- Lena; speech_intent: stays silent",
        "- ambient sound: crickets",
    ]
    prompt = P.speech_prompt("Open up!", COND)
    assert prompt.splitlines()[1] == "Open up!"
    assert direction in prompt
    assert P.speech_prompt("Hi.", {}) == "Speak this line out loud:\nHi."


def test_non_ascii_kept_verbatim() -> None:
    prompt = P.text_prompt("레나는 창밖을 보았다.", {"genre": "판타지"}, {})
    assert "레나는 창밖을 보았다." in prompt and "판타지" in prompt


def test_reasoning_body() -> None:
    assert P.reasoning_body(True, 1024) == {
        "chat_template_kwargs": {"thinking": True},
        "skip_special_tokens": False,
        "thinking_token_budget": 1024,
    }
    assert "thinking_token_budget" not in P.reasoning_body(True, 0)
    assert P.reasoning_body(False, 1024) == {"chat_template_kwargs": {"skip_reasoning": True}}


def test_prompts_digest_is_stable() -> None:
    assert P.prompts_digest() == P.prompts_digest() and len(P.prompts_digest()) == 64


# -- reading answers ----------------------------------------------------------------------------


def _tool_message(token: str, **extra) -> SimpleNamespace:
    call = SimpleNamespace(
        function=SimpleNamespace(
            name="t2i_model_generation", arguments=json.dumps({"discrete_image_token": token})
        )
    )
    return SimpleNamespace(tool_calls=[call], content=None, model_extra=extra)


def test_image_ref_signed_url() -> None:
    ref = P.image_ref(_tool_message("https://s3.example/b/x.png?X-Amz-Signature=abc"))
    assert ref.url == "https://s3.example/b/x.png?X-Amz-Signature=abc" and ref.problem is None


def test_image_ref_unsigned_location_is_final() -> None:
    ref = P.image_ref(_tool_message("s3://bucket/vision-decoder/x.png"))
    assert ref.url is None and ref.final and "does not sign" in ref.problem


def test_image_ref_undecoded_tokens_and_no_call() -> None:
    ref = P.image_ref(_tool_message("<|discrete_image_start|><|vision12|>"))
    assert ref.problem and "vision decoding" in ref.problem and not ref.final
    none = P.image_ref(SimpleNamespace(tool_calls=None, content="I cannot draw.", model_extra={}))
    assert none.problem == "the model did not call the t2i_model_generation tool"


def test_image_ref_content_parts_fallback() -> None:
    parts = [
        {"type": "text", "text": "here"},
        {"type": "image_url", "image_url": {"url": "https://h/x.png?sig=1"}},
    ]
    message = SimpleNamespace(tool_calls=None, content=None, model_extra={"content_parts": parts})
    assert P.image_ref(message).url == "https://h/x.png?sig=1"


def test_audio_ref_urlsafe_base64_url_without_padding() -> None:
    url = "https://s3.example/a/speech.wav?X-Amz-Signature=a~b_c-d"
    data = base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    assert P.audio_ref(SimpleNamespace(audio=SimpleNamespace(data=data))).url == url


def test_audio_ref_inline_wav_and_missing() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt "
    data = base64.b64encode(wav).decode()
    assert P.audio_ref(SimpleNamespace(audio=SimpleNamespace(data=data))).data == wav
    assert P.audio_ref(SimpleNamespace(audio=None)).problem == "the model returned no audio"


def test_redact_url_drops_signature_and_userinfo() -> None:
    assert P.redact_url("https://u:p@h:9/a/b.png?X-Amz-Signature=s#f") == "https://h:9/a/b.png?..."
    assert P.redact_url("http://h/a.wav") == "http://h/a.wav"
