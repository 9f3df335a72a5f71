"""The two ways to run a GGUF: llama-cpp-python and transformers, both held to the Plan schema.

Both take the same chat (a system and a user message), decode greedily unless a temperature is
set, re-seed before every call and return the raw text with its token counts, so that an item's
answer depends only on its prompt, the parameters and the library versions.  Nothing here is
imported before :meth:`load`.

* :class:`LlamaCppBackend`: ``llama_cpp.Llama`` on the file, the chat template the GGUF carries,
  and the Plan schema compiled to a GBNF grammar (:func:`plan_grammar`), so every answer that is
  not cut by ``max_tokens`` is a schema-valid plan.  The KV cache is reset before each call: a
  prefix shared with the previous prompt would otherwise be reused, which makes the answer depend
  on the previous item.  llama-cpp-python has no binary wheel on PyPI (it is built from source).
* :class:`TransformersBackend`: ``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)``,
  which dequantizes the GGUF to float32 (about 4x the file in memory) and needs no compiler.  The
  same schema constrains it through llguidance (:class:`SchemaMask`, a logits processor: a binary
  wheel on PyPI), so its answers are schema-valid plans too; with ``grammar=false`` its JSON is
  whatever the model writes, and the engine's plan parser applies its rule-based repairs.
  Generation stops as soon as the first JSON object is closed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import json_object_end, plan_json_schema


@dataclass(frozen=True)
class Reply:
    """What one call gave: the raw text, token counts, and whether the token limit cut it."""

    text: str
    input_tokens: int
    output_tokens: int
    truncated: bool


@dataclass(frozen=True)
class Sampling:
    """Decoding settings shared by both backends (``temperature`` 0: greedy)."""

    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int
    #: > 1 penalizes tokens already in the context (greedy small models otherwise loop inside a
    #: string until max_tokens, which a grammar cannot prevent)
    repeat_penalty: float = 1.0


def grammar_schema() -> dict[str, Any]:
    """The Plan schema in the subset llama.cpp's schema converter accepts.

    The converter only takes anchored patterns and renders them as raw characters (a ``"`` or a
    newline would then be allowed inside a string), so each non-empty ``pattern`` becomes
    ``minLength: 1``; a string of only spaces is still possible and is rejected by the engine's
    plan parser as for every planner.
    """

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: convert(v) for k, v in node.items() if k not in ("$schema", "$id", "pattern")}
            if "pattern" in node:
                out["minLength"] = 1
            return out
        if isinstance(node, list):
            return [convert(v) for v in node]
        return node

    return convert(plan_json_schema())


# llama.cpp's JSON string character: anything but a quote or a backslash, or an escape.  Raw
# control characters (a literal newline) are not valid JSON inside a string, so they are excluded.
_CHAR_RULE = re.compile(r"^char ::= .*$", re.MULTILINE)
_STRICT_CHAR = (
    r'char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]'
    r" [0-9a-fA-F])"
)


def plan_grammar() -> str:
    """The GBNF grammar of a Plan (llama-cpp-python's converter, with strict JSON strings)."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(grammar_schema()))
    if not _CHAR_RULE.search(gbnf):  # a converter that words the rule differently: keep its own
        return gbnf
    return _CHAR_RULE.sub(lambda _: _STRICT_CHAR, gbnf, count=1)


class LlamaCppBackend:
    """A GGUF through llama-cpp-python."""

    name = "llama_cpp"
    has_grammar = True

    def __init__(self, path: Path, *, n_ctx: int, threads: int | None, grammar: bool):
        # llama.cpp's CPU threads are OpenMP threads, which by default spin while they wait for
        # each other; on a shared machine whose cores are busy that spinning starves the thread
        # being waited for (a 0.5B plan took 235 s with 2 spinning threads and 80 s with 1
        # passive thread at load average 8 on 2 cores).  Passive waiting costs little on an idle
        # machine.  Read when the library
        # loads, so only a process that has not loaded llama_cpp yet is affected; an explicit
        # setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        from llama_cpp import Llama, LlamaGrammar

        self.llm = Llama(
            model_path=str(path),
            n_ctx=int(n_ctx),
            n_threads=threads,
            n_gpu_layers=0,
            verbose=False,
        )
        self.grammar = LlamaGrammar.from_string(plan_grammar(), verbose=False) if grammar else None

    def generate(self, system: str, user: str, sampling: Sampling) -> Reply:
        self.llm.reset()  # no prefix reuse: the answer must not depend on the previous prompt
        response = self.llm.create_chat_completion(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            seed=sampling.seed,
            repeat_penalty=sampling.repeat_penalty,
            grammar=self.grammar,
        )
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Reply(
            text=str(choice["message"].get("content") or ""),
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
            truncated=choice.get("finish_reason") == "length",
        )

    def close(self) -> None:
        close = getattr(self.llm, "close", None)
        if callable(close):
            close()
        self.llm = None


def json_closed(text: str) -> bool:
    """Whether ``text`` holds a complete top-level JSON object (from its first ``{``)."""
    start = text.find("{")
    return start >= 0 and json_object_end(text, start) is not None


# The prompt written when a GGUF carries no chat template (base models, some conversions).
_PLAIN_TEMPLATE = "{system}\n\n{user}\n\nAnswer (JSON):\n"


class SchemaMask:
    """A transformers logits processor that allows only the tokens that keep the answer a valid
    Plan (:func:`grammar_schema`), through llguidance's JSON-schema matcher.

    One matcher per call: it consumes each generated token and masks the next logits; once the
    object is complete only the end-of-sequence token remains.  A token the matcher refuses (which
    the mask should make impossible) raises instead of decoding on unconstrained.
    """

    def __init__(self, tokenizer: Any, grammar: str, start: int):
        import llguidance

        self.matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        self.start = start
        self.consumed = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import numpy as np
        import torch

        new = input_ids[0, self.start :].tolist()
        for token in new[self.consumed :]:
            if not self.matcher.consume_token(int(token)):
                raise RuntimeError(f"the Plan grammar refused token {token}: {self._error()}")
        self.consumed = len(new)
        if self.matcher.is_error():
            raise RuntimeError(f"the Plan grammar failed: {self._error()}")
        bits = np.unpackbits(
            np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8), bitorder="little"
        ).astype(bool)
        vocab = scores.shape[-1]
        allowed = np.zeros(vocab, dtype=bool)  # logits past the tokenizer's vocabulary: padding
        allowed[: min(vocab, bits.size)] = bits[:vocab]
        return scores.masked_fill(~torch.from_numpy(allowed), float("-inf"))

    def _error(self) -> str:
        return str(self.matcher.get_error() or "no detail")


def schema_grammar() -> str:
    """The Plan schema as an llguidance grammar (compact separators, as llama.cpp's)."""
    import llguidance

    return llguidance.LLMatcher.grammar_from_json_schema(
        grammar_schema(), defaults={"whitespace_flexible": False}
    )


@contextmanager
def one_gguf_reader() -> Iterator[dict[tuple[str, str], Any]]:
    """Within it, ``gguf.GGUFReader`` opens each file once.  transformers reads a GGUF three
    times to load one model (its tokenizer, its config, its weights), and each read parses every
    metadata field in Python: for Qwen2.5's 151,936-token vocabulary and its merges, 34.6 s of
    CPU for the whole load against 22.8 s with one reader, the same weights and tokenizer.  The
    reader is only read from; yields the readers opened, by (path, mode)."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = reader
    try:
        yield readers
    finally:
        gguf.GGUFReader = original


class TransformersBackend:
    """A GGUF through transformers' GGUF loader (dequantized to float32 on the CPU), held to the
    Plan schema by llguidance unless ``grammar`` is off."""

    name = "transformers"

    def __init__(self, path: Path, *, threads: int | None, grammar: bool = True):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if threads:
            torch.set_num_threads(int(threads))
        folder, name = str(path.parent), path.name
        with one_gguf_reader():
            self.tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            self.model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.float32
            )
        self.model.eval()
        self.has_grammar = bool(grammar)
        self.grammar_tokenizer: Any = None
        self.grammar = ""
        if self.has_grammar:
            import llguidance.hf

            # about a second for a 150k vocabulary: once per load, not per call
            self.grammar_tokenizer = llguidance.hf.from_tokenizer(self.tokenizer)
            self.grammar = schema_grammar()

    def prompt_ids(self, system: str, user: str) -> Any:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if getattr(self.tokenizer, "chat_template", None):
            encoded = self.tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )
            return encoded["input_ids"]
        text = _PLAIN_TEMPLATE.format(system=system, user=user)
        return self.tokenizer(text, return_tensors="pt")["input_ids"]

    def generate(self, system: str, user: str, sampling: Sampling) -> Reply:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

        ids = self.prompt_ids(system, user)
        start = ids.shape[1]
        tokenizer = self.tokenizer

        class ObjectClosed(StoppingCriteria):
            """Stop once the answer holds a closed JSON object: the rest would be discarded."""

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                text = tokenizer.decode(input_ids[0, start:], skip_special_tokens=True)
                done = json_closed(text)
                return torch.full((input_ids.shape[0],), done, dtype=torch.bool)

        kwargs: dict[str, Any] = {
            "max_new_tokens": sampling.max_tokens,
            "repetition_penalty": sampling.repeat_penalty,
        }
        if self.has_grammar:
            mask = SchemaMask(self.grammar_tokenizer, self.grammar, start)
            kwargs["logits_processor"] = LogitsProcessorList([mask])
        if sampling.temperature > 0:
            kwargs.update(
                do_sample=True,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k,
            )
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        eos = tokenizer.eos_token_id
        torch.manual_seed(sampling.seed)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                stopping_criteria=StoppingCriteriaList([ObjectClosed()]),
                pad_token_id=eos if eos is not None else 0,
                **kwargs,
            )
        new = out[0, start:]
        text = tokenizer.decode(new, skip_special_tokens=True)
        ended = eos is not None and new.numel() > 0 and int(new[-1]) == eos
        return Reply(
            text=text,
            input_tokens=int(start),
            output_tokens=int(new.numel()),
            truncated=int(new.numel()) >= sampling.max_tokens
            and not ended
            and not json_closed(text),
        )

    def close(self) -> None:
        self.model = self.tokenizer = self.grammar_tokenizer = None


__all__ = [
    "LlamaCppBackend",
    "Reply",
    "Sampling",
    "SchemaMask",
    "TransformersBackend",
    "grammar_schema",
    "json_closed",
    "plan_grammar",
    "schema_grammar",
]
