"""The stand-in model's scripted answers: demo pages 0-3, recognised by their scene."""

from __future__ import annotations

import json


def answer(text: str, quote: str, t2i: str, speaker: dict | None = None, **extra) -> str:
    obj = {"text": text, "quote": quote, "t2i": t2i, **extra}
    if speaker is not None:
        obj["speech_metadata"] = {"speaker": speaker}
    return json.dumps(obj, ensure_ascii=False)


# Demo pages 0-3 (lena-and-the-lost-moon), recognised by their scene in the prompt.
PAGE0 = answer(
    'Pip tapped on the glass. "The moon fell behind the hill!" he cried.',
    "The moon fell behind the hill!",
    "Storybook illustration of a small orange fox tapping on a bedroom window at night, "
    "a girl turning around",
    {
        "name": "Pip",
        "line": "The moon fell behind the hill!",
        "emotion": "sad",
        "speed": "fast",
        "pitch": "high",
        "gender": "male",
    },
)
# prose around a fenced block; the quote is missing from the text, two labels are not labels
PAGE1 = (
    "Here is the next page:\n```json\n"
    + answer(
        "Lena took her lantern and ran after Pip",
        "\u201cWait for me, Pip!\u201d",
        "A girl with a yellow lantern running across a dark meadow after a fox, warm light",
        {
            "name": "Lena",
            "emotion": "excited",
            "speed": "fast",
            "pitch": "High",
            "gender": "female",
        },
    )
    + "\n```"
)
# the t2i "prompt" is a line of speech: unusable
PAGE2 = answer(
    'They found the moon in the oak. "Who tied me up?" it grumbled.',
    "Who tied me up?",
    "Oh no, the moon is stuck in the tree!",
    {"name": "The Moon", "emotion": "angry", "speed": "slow", "pitch": "low", "gender": "male"},
)
# fine, but the stand-in's T2I pass crashes on "zigzag"
PAGE3 = answer(
    'The moon rose again. "Thank you, friends!" it beamed.',
    "Thank you, friends!",
    "Storybook illustration of a zigzag path up a hill under a starry sky, a smiling moon",
    {"name": "The Moon", "emotion": "happy", "speed": "normal", "pitch": "low", "gender": "male"},
)
SCRIPTS = [
    ("Scene: Lena's dark bedroom", PAGE0),
    ("Scene: a dark meadow", PAGE1),
    ("big old oak", PAGE2),
    ("Scene: the top of Tall Hill", PAGE3),
    ("", "I am sorry, I cannot help with that."),
]
