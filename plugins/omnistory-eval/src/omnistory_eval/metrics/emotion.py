"""Equal-weight emotion ensemble (paper App. E.2) over in-process or isolated recognizers.

A member runs in this process unless an interpreter is configured for its backend; then
:class:`WorkerMember` starts ``emotion_backends.py`` under that interpreter (another virtual
environment, e.g. one with torch/torchaudio for SpeechBrain) and exchanges JSON lines, with each
waveform passed as a ``.npy`` file in a private temporary directory.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.components import ComponentError
from omnistory_eval.metrics import emotion_backends
from omnistory_eval.metrics._common import is_missing_checkpoint, model_unavailable
from omnistory_eval.outcomes import EvaluatorUnavailable, is_infrastructure_exception
from omnistory_eval.speech_analysis import canonical_distribution, ensemble_emotion

PAPER_MEMBERS: dict[str, str] = {
    "speechbrain": "speechbrain/emotion-recognition-wav2vec2-IEMOCAP",
    "hubert": "superb/hubert-large-superb-er",
    "emotion2vec": "iic/emotion2vec_plus_large",
}

RawOutput = tuple[list[str], list[float]]


class InProcessMember:
    def __init__(self, backend: str, model: str, device: str):
        self.backend, self.model, self.device = backend, model, device
        self._predict: Any = None

    def start(self) -> None:
        try:
            self._predict = emotion_backends.load_backend(self.backend, self.model, self.device)
        except ImportError as exc:
            raise ComponentError(
                f"skipped: emotion backend {self.backend!r} cannot be imported here ({exc}); "
                f"install it or set emotion_python.{self.backend} to an interpreter that has it"
            ) from exc
        except Exception as exc:
            if is_missing_checkpoint(exc):
                raise model_unavailable(self.model, exc) from exc
            raise

    def predict(self, waves: list[Any]) -> list[RawOutput | Exception]:
        out: list[RawOutput | Exception] = []
        for wave in waves:
            try:
                out.append(self._predict(wave))
            except Exception as exc:  # this item's emotion becomes invalid, not the batch
                out.append(exc)
        return out

    def close(self) -> None:
        self._predict = None


class WorkerMember:
    """A recognizer in another Python environment (see :mod:`emotion_backends`)."""

    def __init__(
        self,
        backend: str,
        model: str,
        device: str,
        python: str,
        workdir: str | None = None,
        timeout_s: float = 600.0,
    ):
        self.backend, self.model, self.device, self.python = backend, model, device, python
        self.workdir = workdir
        self.timeout_s = timeout_s
        self._proc: subprocess.Popen[str] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._counter = 0

    def start(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"omnistory-{self.backend}-")
        log = open(Path(self._tmp.name) / "worker.log", "w", encoding="utf-8")  # noqa: SIM115
        # SpeechBrain's IEMOCAP yaml saves its wav2vec2 copy under a relative path: give the worker
        # a working directory that is not the user's checkout
        cwd = self.workdir or self._tmp.name
        try:
            self._proc = subprocess.Popen(
                [
                    self.python,
                    emotion_backends.__file__,
                    "--backend",
                    self.backend,
                    "--model",
                    self.model,
                    "--device",
                    self.device,
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=cwd,
                bufsize=1,
            )
        except OSError as exc:
            raise ComponentError(
                f"skipped: cannot start {self.backend} worker with {self.python!r}: {exc}"
            ) from exc
        finally:
            log.close()
        first = self._first_line()
        try:
            hello = json.loads(first) if first.strip() else {}
        except ValueError:
            hello = {"fatal": f"unexpected worker output {first!r}"}
        if not hello.get("ready"):
            reason = hello.get("fatal") or (
                f"no answer within {self.timeout_s:g} s ({self._tail_log()})"
                if self._proc.poll() is None
                else f"worker exited ({self._tail_log()})"
            )
            self.close(grace_s=0.0)
            if hello.get("missing_checkpoint"):
                raise ComponentError(
                    f"skipped: {self.model} not available offline; run the prefetch command "
                    f"({reason})"
                )
            raise ComponentError(f"skipped: {self.backend} worker failed to load: {reason}")

    def _first_line(self) -> str:
        """The worker's hello line, or "" if it sends none within ``timeout_s`` (loading hangs)."""
        import select

        assert self._proc is not None and self._proc.stdout is not None
        # the worker writes nothing else before its first request, so no line can be left
        # in Python's buffer where select() would not see it
        ready, _, _ = select.select([self._proc.stdout], [], [], self.timeout_s)
        return self._proc.stdout.readline() if ready else ""

    def _tail_log(self) -> str:
        if self._tmp is None:
            return ""
        path = Path(self._tmp.name) / "worker.log"
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        return text.strip().splitlines()[-1] if text.strip() else "no output"

    def predict(self, waves: list[Any]) -> list[RawOutput | Exception]:
        import numpy as np

        if self._proc is None or self._proc.stdin is None or self._proc.stdout is None:
            raise EvaluatorUnavailable(f"{self.backend} worker is not running")
        assert self._tmp is not None
        ids = []
        for wave in waves:
            self._counter += 1
            path = Path(self._tmp.name) / f"{self._counter}.npy"
            np.save(path, np.asarray(wave, dtype=np.float32))
            self._proc.stdin.write(json.dumps({"id": self._counter, "npy": str(path)}) + "\n")
            ids.append(self._counter)
        self._proc.stdin.flush()
        replies: dict[int, dict[str, Any]] = {}
        while len(replies) < len(ids):
            line = self._proc.stdout.readline()
            if not line:
                raise EvaluatorUnavailable(f"{self.backend} worker died ({self._tail_log()})")
            reply = json.loads(line)
            replies[reply.get("id")] = reply
        out: list[RawOutput | Exception] = []
        for n in ids:
            (Path(self._tmp.name) / f"{n}.npy").unlink(missing_ok=True)
            reply = replies[n]
            if "error" in reply:
                out.append(RuntimeError(f"{self.backend}: {reply['error']}"))
            else:
                out.append(([str(x) for x in reply["labels"]], [float(x) for x in reply["scores"]]))
        return out

    def close(self, grace_s: float = 30.0) -> None:
        """End the worker: EOF on its stdin, then kill it if it has not exited after ``grace_s``."""
        if self._proc is not None:
            if self._proc.stdin:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


@dataclass(frozen=True)
class EmotionPrediction:
    label: str
    probabilities: dict[str, float]
    members: dict[str, dict[str, float]]  # canonical distribution per backend


class EmotionEnsemble:
    """Members in configuration order, equal weights."""

    def __init__(
        self,
        members: dict[str, str],
        device: str = "cpu",
        python: dict[str, str | None] | None = None,
        log_scores: str = "auto",
        workdir: str | None = None,
    ):
        if not members:
            raise ValueError("speech_meta: emotion_models must name at least one recognizer")
        unknown = sorted(set(members) - set(emotion_backends.BACKENDS))
        if unknown:
            raise ValueError(
                f"speech_meta: unknown emotion backend(s) {unknown}; "
                f"known: {sorted(emotion_backends.BACKENDS)}"
            )
        self.members = dict(members)
        self.device = device
        self.python = dict(python or {})
        self.log_scores = log_scores
        self.workdir = workdir
        self._runners: dict[str, InProcessMember | WorkerMember] = {}

    def start(self) -> None:
        try:
            for backend, model in self.members.items():
                interpreter = self.python.get(backend)
                runner: InProcessMember | WorkerMember
                if interpreter:
                    runner = WorkerMember(backend, model, self.device, interpreter, self.workdir)
                else:
                    runner = InProcessMember(backend, model, self.device)
                runner.start()
                self._runners[backend] = runner
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        for runner in self._runners.values():
            runner.close()
        self._runners = {}

    def predict(self, waves: list[Any]) -> list[EmotionPrediction | Exception]:
        per_member: dict[str, list[RawOutput | Exception]] = {}
        for backend, runner in self._runners.items():
            try:
                per_member[backend] = runner.predict(waves)
            except Exception as exc:  # a dead worker fails this member for the whole batch
                per_member[backend] = [exc] * len(waves)
        results: list[EmotionPrediction | Exception] = []
        for n in range(len(waves)):
            dists: dict[str, dict[str, float]] = {}
            errors = []
            unavailable = False
            for backend, outputs in per_member.items():
                raw = outputs[n]
                if isinstance(raw, Exception):
                    errors.append(f"{backend}: {type(raw).__name__}: {raw}")
                    unavailable = unavailable or is_infrastructure_exception(raw)
                    continue
                # only SpeechBrain returns log posteriors; the others return probabilities
                mode = self.log_scores if backend == "speechbrain" else "never"
                try:
                    dists[backend] = canonical_distribution(raw[0], raw[1], backend, mode)
                except ValueError as exc:
                    errors.append(str(exc))
            if errors:
                error_type = EvaluatorUnavailable if unavailable else RuntimeError
                results.append(error_type("; ".join(errors)))
                continue
            label, probs = ensemble_emotion(list(dists.values()))
            results.append(EmotionPrediction(label, probs, dists))
        return results
