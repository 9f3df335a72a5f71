"""Requests as sent: page image encoding and the OpenAI / Anthropic message shapes."""

from __future__ import annotations

import base64
import io

import pytest
from omnistory_testkit import demo_planner_items
from PIL import Image

from omnistory_core.components import Media
from omnistory_core.kit.planning.messages import (
    anthropic_messages,
    build_request,
    encode_image,
    openai_chat_messages,
)
from omnistory_core.kit.planning.prompts import SYSTEM_PROMPT, get_variant


def _save(tmp_path, name, fmt, size=(40, 20), mode="RGB"):
    path = tmp_path / name
    Image.new(mode, size, (200, 30, 30)).save(path, format=fmt)
    return path


@pytest.mark.parametrize(
    ("fmt", "mime"),
    [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")],
)
def test_accepted_formats_are_sent_byte_for_byte(tmp_path, fmt, mime):
    path = _save(tmp_path, f"page.{fmt.lower()}", fmt)
    encoded = encode_image(Media(str(path), "x"))
    assert encoded.media_type == mime
    assert encoded.data == path.read_bytes()


def test_other_formats_become_png(tmp_path):
    path = _save(tmp_path, "page.bmp", "BMP")
    encoded = encode_image(path)
    assert encoded.media_type == "image/png"
    with Image.open(io.BytesIO(encoded.data)) as img:
        assert (img.format, img.size) == ("PNG", (40, 20))


def test_max_side_downscales_keeping_aspect(tmp_path):
    path = _save(tmp_path, "big.jpg", "JPEG", size=(400, 100))
    encoded = encode_image(path, max_side=100)
    with Image.open(io.BytesIO(encoded.data)) as img:
        assert (img.format, img.size) == ("PNG", (100, 25))
    assert encode_image(path, max_side=400).data == path.read_bytes()


def test_unreadable_image_names_the_file(tmp_path):
    bad = tmp_path / "page.png"
    bad.write_text("not an image")
    with pytest.raises(ValueError, match=str(bad)):
        encode_image(bad)
    with pytest.raises(ValueError, match="missing.png"):
        encode_image(tmp_path / "missing.png")


def test_openai_messages_carry_the_page_as_data_url():
    item = demo_planner_items(limit=1)[0]
    request = build_request(item, get_variant("default"))
    messages = openai_chat_messages(request, image_detail="low")
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    image_part, text_part = messages[1]["content"]
    url = image_part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == item["current_image"].read_bytes()
    assert image_part["image_url"]["detail"] == "low"
    assert text_part == {"type": "text", "text": request.text}


def test_anthropic_messages_carry_a_base64_image_block():
    item = demo_planner_items(limit=1)[0]
    request = build_request(item, get_variant("paper_like"))
    system, messages = anthropic_messages(request)
    assert system == SYSTEM_PROMPT
    block, text = messages[0]["content"]
    assert block["type"] == "image"
    assert block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == "image/png"
    assert base64.b64decode(block["source"]["data"]) == item["current_image"].read_bytes()
    assert text == {"type": "text", "text": request.text}


def test_request_without_image_is_an_error():
    with pytest.raises(ValueError, match="current_image"):
        build_request(
            {"current_text": "x", "metadata": {}, "conditions": {}}, get_variant("default")
        )
