"""Prompt alignment (``scene``, ``camera``, ``character_action``): the GPT judge, per shot.

As the official evaluator (``bench/prompt_align/prompt_align_evaluator.py`` and its
``gptv_utils.py``): per shot with an output image, three questions, each one user message of
three parts -- the dimension's rubric text, the shot's text for it, and the image (resized to
512x512, RGB, JPEG, base64 data URL) -- sent to an OpenAI-compatible Chat Completions endpoint
(model ``gpt-4.1``, temperature 0, seed 123, max_tokens 512).  The answer is parsed with
``(score|Score):\\s*[a-zA-Z]*\\s*(\\d+)`` (the first match); without a match the question is
asked again with the temperature raised by 0.1, up to 10 tries, after which the official scores
0 (``faithful``) and we can mark the shot ``invalid`` instead.  The official passes
``top_p=0.2`` to its query helper, which never puts it in the request: with ``faithful`` it is
not sent either.

=====================  ===============================  ==========================================
dimension              shot text (loader / story.json)  rubric file (official ``user_prompts/``)
=====================  ===============================  ==========================================
``scene``              ``scene`` / Setting Description  ``user_prompt_environment_text_align.txt``
``character_action``   ``script`` / Static Shot         ``user_prompt_character_text_align.txt``
                       Description
``camera``             ``camera`` / Shot Perspective    ``user_prompt_camera_text_align.txt``
                       Design
=====================  ===============================  ==========================================

The rubric texts are the official project's files and are not shipped here: ``rubric_dir``
points at a checkout's ``vistorybench/bench/prompt_align/user_prompts``; their contents (not
their path) are part of the cache key.  ``user_prompt_single_character_text_align.txt`` is the
rubric of single-character action, which :func:`single_character_messages` builds the question
of (it needs CIDS's matched crops).

Unlike the official, whose helper re-sends a failed HTTP request forever (10 s apart), a
request is retried by the project's retry policy (:mod:`omnistory_core.kit.retry`: 429/5xx,
connection errors, timeouts) a bounded number of times; then the shot is an ``error`` row
(never a silent 0), and once the server has been found unreachable the remaining questions of
the batch fail at once.  An answer shorter than two characters is re-asked at the same
temperature (the official loops on it) up to ``max_retries`` times.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError, EvalResult, Metric, Param
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
)
from omnistory_vistorybench.metrics._common import (
    UNINDEXED,
    media_exists,
    media_path,
    shot_text,
)

#: the official rubric file of each dimension (in ``bench/prompt_align/user_prompts``)
RUBRIC_FILES: dict[str, str] = {
    "scene": "user_prompt_environment_text_align.txt",
    "character_action": "user_prompt_character_text_align.txt",
    "camera": "user_prompt_camera_text_align.txt",
}
#: the rubric of single-character action (asked per matched character crop)
SINGLE_CHARACTER_RUBRIC = "user_prompt_single_character_text_align.txt"
#: the shot field (official loader name) each dimension is judged against
DIMENSION_FIELDS: dict[str, str] = {
    "scene": "scene",
    "character_action": "script",
    "camera": "camera",
}
CRITERIA = ("scene", "camera", "character_action")
SCORE_PATTERN = re.compile(r"(score|Score):\s*[a-zA-Z]*\s*(\d+)")
IMAGE_SIZE = (512, 512)
#: kept of each answer in a row's detail
MAX_DETAIL_CHARS = 2000


def parse_score(text: str | None) -> int | None:
    """The first ``Score: N`` of an answer (the official regex), or None."""
    found = SCORE_PATTERN.findall(text or "")
    return int(found[0][1]) if found else None


def image_base64(image: Any) -> str:
    """A path or PIL image as the official sends it: resized to 512x512 (PIL's default
    filter, in the file's own mode), then RGB, then JPEG at PIL's default quality, base64."""
    from PIL import Image

    if isinstance(image, str | os.PathLike):
        with Image.open(image) as img:
            return image_base64(img)
    img = image.resize(IMAGE_SIZE)
    if img.mode != "RGB":
        img = img.convert("RGB")
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image_part(b64: str, detail: str | None = None) -> dict[str, Any]:
    url: dict[str, Any] = {"url": f"data:image/jpeg;base64,{b64}"}
    if detail:
        url["detail"] = detail
    return {"type": "image_url", "image_url": url}


def shot_messages(rubric: str, text: str, b64: str) -> list[dict[str, Any]]:
    """The one user message of a prompt-alignment question."""
    content = [{"type": "text", "text": rubric}, {"type": "text", "text": text}, image_part(b64)]
    return [{"role": "user", "content": content}]


def single_character_messages(
    rubric: str, script: str, character_name: str, crop_b64: str
) -> list[dict[str, Any]]:
    """The single-character-action question: the rubric as the system message, then the shot's
    script, the character's name and its crop (``detail: low``, as the official sends crops)."""
    return [
        {"role": "system", "content": [{"type": "text", "text": rubric}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": script},
                {"type": "text", "text": f"Evaluated Character Name is {character_name}"},
                image_part(crop_b64, detail="low"),
            ],
        },
    ]


def read_rubrics(rubric_dir: str | None, names: Mapping[str, str] = RUBRIC_FILES) -> dict[str, str]:
    """The rubric texts by dimension, or a ``skipped:`` ComponentError naming what is missing."""
    hint = "set rubric_dir= to <ViStoryBench checkout>/vistorybench/bench/prompt_align/user_prompts"
    if not rubric_dir:
        raise ComponentError(f"skipped: metric=prompt_align needs its rubric files; {hint}")
    folder = Path(os.path.expanduser(rubric_dir))
    missing = [f for f in names.values() if not (folder / f).is_file()]
    if missing:
        raise ComponentError(f"skipped: {folder} lacks {', '.join(missing)}; {hint}")
    return {dim: (folder / f).read_text(encoding="utf-8") for dim, f in names.items()}


def chat_base_url(base_url: str | None) -> str | None:
    """What the SDK takes as ``base_url``: the official posts to ``{base}/chat/completions`` when
    ``base`` ends in ``/v1`` and to ``{base}/v1/chat/completions`` otherwise."""
    if not base_url:
        return None
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


@dataclass
class Verdict:
    """One question's outcome: ``status`` is ``ok`` (parsed), ``unparsed`` (no score in
    ``tries`` answers) or ``error`` (the request failed)."""

    status: str
    score: int | None = None
    tries: int = 0
    temperatures: tuple[float, ...] = ()
    response: str = ""
    error: str = ""

    def detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "tries": self.tries}
        out["temperatures"] = list(self.temperatures)
        if self.response:
            out["response"] = self.response[:MAX_DETAIL_CHARS]
        if self.error:
            out["error"] = self.error
        return out


class JudgeCallError(Exception):
    """A request that failed after its retries."""


class AlignmentJudge:
    """The official query loop over the ``openai`` SDK."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str = "gpt-4.1",
        temperature: float = 0.0,
        temperature_step: float = 0.1,
        top_p: float | None = None,
        seed: int | None = 123,
        max_tokens: int = 512,
        max_tries: int = 10,
        timeout: float = 120.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.base_url = chat_base_url(base_url)
        self.api_key = api_key
        self.model = model
        self.temperature = temperature
        self.temperature_step = temperature_step
        self.top_p = top_p
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_tries = max_tries
        self.timeout = timeout
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.client: Any = None
        self._unreachable: str | None = None
        self._lock = threading.Lock()

    def load(self) -> AlignmentJudge:
        import openai

        # the SDK's own retries are off: the project's retry policy is the only one
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=self.timeout
        )
        self._unreachable = None
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def request(self, messages: list[dict[str, Any]], temperature: float) -> dict[str, Any]:
        """The Chat Completions arguments of one try (public for audits and tests)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        return kwargs

    def _classify(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )

    def complete(self, messages: list[dict[str, Any]], temperature: float) -> str:
        """One answer's text; raises :class:`JudgeCallError` after the retries."""
        import openai

        if self.client is None:
            self.load()
        text = ""
        for _ in range(self.policy.max_retries + 1):
            with self._lock:
                if self._unreachable:
                    raise JudgeCallError(f"server unreachable earlier: {self._unreachable}")
            kwargs = self.request(messages, temperature)
            outcome = call_with_retries(
                lambda kw=kwargs: self.client.chat.completions.create(**kw),
                self._classify,
                self.policy,
                sleep=self.sleep,
            )
            if outcome.error is not None:
                exc = outcome.exception
                if isinstance(exc, openai.APIConnectionError) and not isinstance(
                    exc, openai.APITimeoutError
                ):
                    with self._lock:
                        self._unreachable = outcome.error.message
                raise JudgeCallError(outcome.error.message)
            choices = getattr(outcome.value, "choices", None) or []
            text = (choices[0].message.content if choices else None) or ""
            if len(text) >= 2:  # the official re-asks shorter answers at the same temperature
                break
        return text

    def ask(self, messages: list[dict[str, Any]]) -> Verdict:
        """Ask until an answer parses, raising the temperature after each unparsable one."""
        temperature = self.temperature
        temperatures: list[float] = []
        text = ""
        for attempt in range(self.max_tries):
            temperatures.append(temperature)
            try:
                text = self.complete(messages, temperature)
            except JudgeCallError as exc:
                return Verdict("error", None, attempt + 1, tuple(temperatures), text, str(exc))
            score = parse_score(text)
            if score is not None:
                return Verdict("ok", score, attempt + 1, tuple(temperatures), text)
            temperature += self.temperature_step
        return Verdict("unparsed", None, self.max_tries, tuple(temperatures), text)


class PromptAlignMetric(Metric):
    """``prompt_align``: how well a shot's image follows its text, 0-4 per dimension (GPT judge).

    Reads (item scope), per shot::

        {"candidate_image": Media | None,    # the shot's output image
         "shot": {"index": int, "scene": ..., "script": ..., "camera": ..., ...}}

    Shot texts by the loader's names or story.json's (``Setting Description``, ``Static Shot
    Description``, ``Shot Perspective Design``), strings or ``{"en", "ch"}`` (English with
    ``faithful``, as the official scores every run in English; ``language`` otherwise).  The
    story value is the mean over its scored shots (:func:`.math.story_mean`).

    A row is ``ok`` with the three scores; ``invalid`` when the shot has no image or lacks a
    text, or (``faithful=false``) when a dimension never parsed; ``error`` when a request
    failed after its retries (not cached: the next run asks again).  ``detail`` keeps each
    dimension's tries, temperatures and last answer.

    Parameters: ``base_url`` (the endpoint; null: the SDK's default), ``api_key_env``
    (environment variable with the key; unset: a placeholder for local servers), ``model``
    (gpt-4.1), ``rubric_dir`` (the official rubric files, see the module docstring),
    ``temperature`` (0), ``temperature_step`` (0.1), ``max_tries`` (10), ``top_p`` (0.2, sent
    only with ``faithful=false``), ``seed`` (123), ``max_tokens`` (512), ``language``,
    ``faithful``; runtime: ``timeout``, ``max_retries``, ``retry_base_delay_s``,
    ``max_retry_wait_s``, ``concurrency``.
    """

    name = "prompt_align"
    version = "1"
    track = "prompt"
    criteria = CRITERIA
    scope = "item"
    reads = ("candidate_image", "shot")
    default_batch_size = 8
    description = "prompt alignment (scene, camera, character action) by a GPT-4.1 judge"
    parameters = (
        Param("base_url", (str, None), None, "OpenAI-compatible endpoint (null: SDK default)"),
        Param("api_key_env", str, "OPENAI_API_KEY", "environment variable holding the API key"),
        Param("model", str, "gpt-4.1", "judge model (the official: gpt-4.1)"),
        Param(
            "rubric_dir",
            (str, None),
            None,
            "the official user_prompts folder (its files' contents are in the cache key)",
            runtime=True,
        ),
        Param("temperature", float, 0.0, "first try's temperature (the official: 0)", ge=0),
        Param("temperature_step", float, 0.1, "added after each unparsable answer", ge=0),
        Param("max_tries", int, 10, "answers asked for before giving up (the official: 10)", ge=1),
        Param(
            "top_p",
            (float, None),
            0.2,
            "sent only with faithful=false (the official never sends it)",
        ),
        Param("seed", (int, None), 123, "request seed (the official: 123)"),
        Param("max_tokens", int, 512, "answer length limit (the official: 512)", ge=1),
        Param(
            "language", str, "en", "shot text language with faithful=false", choices=("en", "ch")
        ),
        Param("faithful", bool, True, "keep the official quirks (see math.FIDELITY)"),
        Param("timeout", float, 120.0, "seconds per request", runtime=True, gt=0),
        Param("max_retries", int, 5, "retries of a failed request", runtime=True, ge=0),
        Param("retry_base_delay_s", float, 1.0, "first backoff wait", runtime=True, ge=0),
        Param("max_retry_wait_s", float, 60.0, "longest single wait", runtime=True, ge=0),
        Param("concurrency", int, 4, "questions in flight at most", runtime=True, ge=1),
        Param(
            "prices",
            (dict, None),
            None,
            "the dry run's price table {model: {input_per_mtok, output_per_mtok}} (null: the"
            " reference table)",
            runtime=True,
        ),
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        self._judge: AlignmentJudge | None = None
        self._rubrics: dict[str, str] = {}

    def output_params(self) -> dict[str, Any]:
        """The key parameters plus the rubric files' hashes (their path is runtime)."""
        out = super().output_params()
        try:
            rubrics = self._rubrics or read_rubrics(self.params.get("rubric_dir"))
        except ComponentError:
            return out
        out["rubric_sha256"] = {
            dim: hashlib.sha256(text.encode("utf-8")).hexdigest() for dim, text in rubrics.items()
        }
        return out

    def preflight_needs(self) -> list[dict[str, str]]:
        """The rubric files, the judge's server and its key, checked by ``evaluate`` before
        scoring anything (the key only for the SDK's default endpoint: a local server needs
        none)."""
        needs: list[dict[str, str]] = []
        try:
            read_rubrics(self.params.get("rubric_dir"))
        except ComponentError as exc:
            needs.append(
                {
                    "check": "config",
                    "target": "metric.prompt_align.rubric_dir",
                    "remedy": "--set metric.prompt_align.rubric_dir=<ViStoryBench checkout>"
                    "/vistorybench/bench/prompt_align/user_prompts",
                    "detail": str(exc).removeprefix("skipped: ").split(";")[0],
                }
            )
        base_url = chat_base_url(self.params.get("base_url"))
        env = str(self.params.get("api_key_env") or "")
        if base_url:
            needs.append(
                {
                    "check": "server",
                    "target": base_url,
                    "remedy": "start the judge's server or correct metric.prompt_align.base_url",
                }
            )
        elif env:
            needs.append(
                {
                    "check": "key",
                    "target": env,
                    "remedy": f"export {env}=<key> (metric.prompt_align.api_key_env), or"
                    " --set metric.prompt_align.base_url=http://HOST:PORT/v1 for a local server",
                }
            )
        return needs

    # -- the dry run's estimates -------------------------------------------------------------
    def pricing(self) -> Any:
        """The judge model's price (``prices``, else the reference table); None for a server on
        this machine (``base_url`` on a loopback host), which bills nothing."""
        from urllib.parse import urlparse

        from omnistory_core.kit.planning.usage import price_of

        base_url = self.params.get("base_url")
        host = urlparse(str(base_url)).hostname if base_url else None
        if host in ("localhost", "127.0.0.1", "::1"):
            return None
        where = f"metric.{self.name}.prices"
        return price_of(str(self.params["model"]), self.params.get("prices"), where)

    def estimate(
        self, inputs: dict[str, Any], pricing: Any, output_tokens: int | None
    ) -> dict[str, Any]:
        """One shot's three questions: input tokens of each rubric, shot text and the 512x512
        image; output tokens ``output_tokens`` each, else ``max_tokens`` (an upper bound).  A
        re-asked unparsable answer is not counted; unknown rubrics leave the input unknown."""
        from omnistory_core.kit.planning.usage import count_tokens

        media = inputs.get("candidate_image")
        texts = self._texts(inputs.get("shot") or {})
        if media is None or any(t is None for t in texts.values()):
            return {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}  # no request
        per_answer = output_tokens if output_tokens is not None else int(self.params["max_tokens"])
        tokens_out = per_answer * len(CRITERIA)
        try:
            rubrics = self._rubrics or read_rubrics(self.params.get("rubric_dir"))
        except ComponentError:
            return {"input_tokens": None, "output_tokens": tokens_out}
        image = -(-IMAGE_SIZE[0] * IMAGE_SIZE[1] // 750)  # what the judge is sent, resized
        tokens_in = sum(
            count_tokens(rubrics[dim]) + count_tokens(texts[dim] or "") + image for dim in CRITERIA
        )
        estimate: dict[str, Any] = {"input_tokens": tokens_in, "output_tokens": tokens_out}
        if pricing is not None and getattr(pricing, "price", None) is not None:
            estimate["cost_usd"] = pricing.price.cost(tokens_in, tokens_out)
        return estimate

    def load(self) -> None:
        self._rubrics = read_rubrics(self.params.get("rubric_dir"))
        faithful = bool(self.params.get("faithful", True))
        env = str(self.params.get("api_key_env") or "")
        policy = RetryPolicy(
            max_retries=int(self.params["max_retries"]),
            base_delay_s=float(self.params["retry_base_delay_s"]),
            max_delay_s=float(self.params["max_retry_wait_s"]),
            max_retry_after_s=float(self.params["max_retry_wait_s"]),
        )
        self._judge = AlignmentJudge(
            base_url=self.params.get("base_url"),
            api_key=(os.environ.get(env) if env else None) or "EMPTY",
            model=str(self.params["model"]),
            temperature=float(self.params["temperature"]),
            temperature_step=float(self.params["temperature_step"]),
            top_p=None if faithful else self.params.get("top_p"),
            seed=self.params.get("seed"),
            max_tokens=int(self.params["max_tokens"]),
            max_tries=int(self.params["max_tries"]),
            timeout=float(self.params["timeout"]),
            policy=policy,
        ).load()

    def unload(self) -> None:
        if self._judge is not None:
            self._judge.close()
        self._judge = None

    def _texts(self, shot: Mapping[str, Any]) -> dict[str, str | None]:
        faithful = bool(self.params.get("faithful", True))
        language = "en" if faithful else str(self.params.get("language") or "en")
        return {dim: shot_text(shot, f, language) for dim, f in DIMENSION_FIELDS.items()}

    def run_batch(self, items: list[dict[str, Any]]) -> list[EvalResult]:
        if self._judge is None:
            self.load()
        judge = self._judge
        assert judge is not None
        results: list[EvalResult | None] = [None] * len(items)
        questions: list[tuple[int, str, list[dict[str, Any]]]] = []
        for i, item in enumerate(items):
            media = item.get("candidate_image")
            texts = self._texts(item.get("shot") or {})
            lacking = [d for d, t in texts.items() if t is None]
            if media is None and (item.get("shot") or {}).get(UNINDEXED):
                results[i] = self._unindexed()
                continue
            if media is None or not media_exists(media):
                results[i] = _row_invalid(f"no output image ({media_path(media)})")
                continue
            if lacking:
                results[i] = _row_invalid(f"the shot has no text for {', '.join(lacking)}")
                continue
            try:
                b64 = image_base64(str(media_path(media)))
            except Exception as exc:  # unreadable image: this shot only
                results[i] = _row_invalid(f"{media_path(media)}: cannot open image: {exc}")
                continue
            for dim in CRITERIA:
                text = texts[dim] or ""
                questions.append((i, dim, shot_messages(self._rubrics[dim], text, b64)))
        verdicts = map_bounded(
            lambda q: judge.ask(q[2]), questions, int(self.params.get("concurrency") or 1)
        )
        by_item: dict[int, dict[str, Verdict]] = {}
        for (i, dim, _), verdict in zip(questions, verdicts, strict=True):
            if isinstance(verdict, BaseException):
                verdict = Verdict("error", error=f"{type(verdict).__name__}: {verdict}")
            by_item.setdefault(i, {})[dim] = verdict
        for i, per_dim in by_item.items():
            results[i] = self._row(per_dim)
        return [r if r is not None else _row_invalid("not scored") for r in results]

    def _unindexed(self) -> EvalResult:
        """A shot of a story whose folder has images but none at a story.json index: the
        official story mean over no scored shot is 0 (``faithful``), else not scored."""
        reason = "the story's output folder has images, none at a story.json index"
        if bool(self.params.get("faithful", True)):
            return EvalResult(dict.fromkeys(CRITERIA, 0.0), detail={"note": f"{reason}: 0"})
        return _row_invalid(reason)

    def _row(self, per_dim: Mapping[str, Verdict]) -> EvalResult:
        faithful = bool(self.params.get("faithful", True))
        scores: dict[str, float | None] = {}
        for dim in CRITERIA:
            verdict = per_dim[dim]
            if verdict.status == "ok":
                scores[dim] = float(verdict.score or 0)
            elif verdict.status == "unparsed" and faithful:
                scores[dim] = 0.0  # the official's score after 10 unparsable answers
            else:
                scores[dim] = None
        statuses = {v.status for v in per_dim.values()}
        if "error" in statuses:
            status = "error"
        elif "unparsed" in statuses and not faithful:
            status = "invalid"
        else:
            status = "ok"
        return EvalResult(scores, status=status, detail={d: v.detail() for d, v in per_dim.items()})


def _row_invalid(reason: str) -> EvalResult:
    return EvalResult(dict.fromkeys(CRITERIA), status="invalid", detail={"error": reason})


__all__ = [
    "AlignmentJudge",
    "CRITERIA",
    "DIMENSION_FIELDS",
    "JudgeCallError",
    "PromptAlignMetric",
    "RUBRIC_FILES",
    "SCORE_PATTERN",
    "SINGLE_CHARACTER_RUBRIC",
    "Verdict",
    "chat_base_url",
    "image_base64",
    "parse_score",
    "read_rubrics",
    "shot_messages",
    "single_character_messages",
]
