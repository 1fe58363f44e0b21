"""Masking the strings by which a reply identifies its model, before an annotator reads it.

Three kinds of string are replaced, in this order:

1. self-descriptions: "As an AI model developed by OpenAI", "I am Claude",
   "I'm a large language model trained by Google" → ``[self-description]``;
2. the audited runs' own model names in their usual spellings
   (``gpt-5.5``, ``GPT 5.5``, ``Qwen3-VL-8B-Instruct``) and any extra strings
   given → ``[model]``;
3. vendor names (OpenAI, Anthropic, Google, …) → ``[vendor]``, and product
   families (GPT, Qwen, LLaVA, …) → ``[model]``.

Names that are also ordinary words of art and culture — Claude (Monet,
Lorrain), Gemini (the constellation), Bard, Llama, Mistral, Phi, Grok,
Florence, Spark — are masked only where they plainly name a model: followed by a version or a tier ("Claude Opus 4.6", "Gemini 3.1
Pro", "Llama-3"), or inside a self-description. A reply's reasoning about a
Claude Lorrain landscape stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MODEL_MARK = "[model]"
VENDOR_MARK = "[vendor]"
SELF_MARK = "[self-description]"

#: Companies and labs that make models; always masked (case-insensitive, whole words).
VENDORS = (
    "Google DeepMind", "DeepMind", "Google", "OpenAI", "Anthropic", "Alibaba Cloud", "Alibaba", "Qwen Team",
    "Meta AI", "Microsoft", "Mistral AI", "xAI", "Zhipu AI", "Zhipu", "Moonshot AI", "Baidu", "ByteDance", "Tencent",
    "Shanghai AI Laboratory", "Shanghai AI Lab", "OpenGVLab", "Hugging Face", "HuggingFace", "NVIDIA", "01.AI",
    "Cohere", "Stability AI", "Allen Institute for AI", "AI2", "X-PLUG", "DAMO Academy", "iFlytek", "SenseTime",
)
#: Product and model families that are no ordinary word; always masked, with any attached version.
FAMILIES = (
    "ChatGPT", "GPT", "Qwen", "Tongyi Qianwen", "Tongyi", "LLaVA", "InternVL", "InternLM", "mPLUG-Owl", "mPLUG",
    "ChatGLM", "CogVLM", "CogAgent", "GLM", "Mixtral", "Pixtral", "DeepSeek", "Doubao", "Hunyuan", "MiniCPM",
    "Idefics", "Molmo", "Gemma", "PaliGemma", "ArtiMuse", "ArtQuant", "AesExpert", "Q-SiT", "Q-Instruct",
    "Co-Instruct", "UniPercept", "Kimi", "SenseNova", "Yi-VL", "InstructBLIP", "BLIP",
)
#: Families that are also ordinary words: masked only with a version or tier, or in a self-description.
#: (Sonnet, Haiku and Opus are masked only as tiers of Claude: "Sonnet 18" and "Opus 27" stay.)
AMBIGUOUS = ("Claude", "Gemini", "Bard", "Llama", "LLaMA", "Mistral", "Phi", "Grok", "Copilot", "Bing", "Spark",
             "Florence", "ERNIE")
#: Makers named after "developed by": the vendors, the unambiguous families, and Meta.
_MAKERS = VENDORS + FAMILIES + ("Meta",)

#: What follows a family name as part of the model's name.
_VERSION = r"(?:[\s_-]?v?\d+(?:[.\-_]\d+)*[a-z]?)"
_TIER = (r"(?:Pro|Ultra|Flash|Nano|Mini|Turbo|Plus|Max|Instruct|Chat|Opus|Sonnet|Haiku|Large|Small|Medium|VL|Vision"
         r"|OneVision|Omni|o|Thinking|Preview|Lite|Air|Next|Base|\d+(?:\.\d+)?[BMK])")
_SUFFIX = rf"(?:{_VERSION}|[\s_-]{_TIER}\b)*"


def _alternation(names: Iterable[str]) -> str:
    return "|".join(re.escape(n).replace(r"\ ", r"\s+") for n in sorted(set(names), key=len, reverse=True))


_NAME = rf"(?:{_alternation(FAMILIES + AMBIGUOUS)}){_SUFFIX}"
_MAKER = r"(?:developed|created|trained|built|made|designed|provided|released|produced|owned|powered)"
# "by OpenAI", "by Google DeepMind", "by the Qwen Team": capitalised words only (case-sensitive inside).
_BY = (r"\s*,?\s*" + _MAKER + r"\s+by\s+(?:the\s+)?"
       r"(?-i:[A-Z0-9][\w&-]*(?:\.[\w&-]+)*(?:\s+[A-Z][\w&-]*(?:\.[\w&-]+)*){0,3})")
_AI = (r"(?:an?\s+)?(?:large\s+)?(?:AI|artificial\s+intelligence|language|vision[\s-]language|multimodal|"
       r"LLM|MLLM|VLM)(?:\s+(?:language|vision[\s-]language|multimodal))?\s+(?:model|assistant|system|chatbot)")

_SELF_DESCRIPTIONS = [
    # "As an AI model (developed by OpenAI)", "as a large language model trained by Google"
    re.compile(rf"\bas\s+{_AI}(?:{_BY})?", re.I),
    # "I am an AI assistant made by Anthropic"
    re.compile(rf"\b(?:I\s+am|I'm|I’m)\s+{_AI}(?:{_BY})?", re.I),
    # "I am Claude", "I'm Gemini 3.1 Pro", "My name is Qwen"
    re.compile(rf"\b(?:I\s+am|I'm|I’m|my\s+name\s+is)\s+{_NAME}(?![\w])", re.I),
    # "As Claude, I …" (not "as Claude Monet did")
    re.compile(rf"\bas\s+{_NAME}(?=\s*,)", re.I),
    # "… developed by OpenAI", "a model made by Meta"
    re.compile(rf"\b{_MAKER}\s+by\s+(?:the\s+)?(?:{_alternation(_MAKERS)})(?![\w-])", re.I),
]
_VENDOR_RE = re.compile(rf"(?<![\w-])(?:{_alternation(VENDORS)})(?![\w-])", re.I)
_FAMILY_RE = re.compile(rf"(?<![\w-])(?:{_alternation(FAMILIES)}){_SUFFIX}(?![\w])", re.I)
# Case-sensitive: "Claude Opus 4.6", "Gemini 3.1 Pro", "Llama-3.2", "Phi-4" — not "Claude Monet", "a llama".
_AMBIGUOUS_RE = re.compile(rf"(?<![\w-])(?:{_alternation(AMBIGUOUS)})(?:{_VERSION}|[\s_-]{_TIER}\b)+(?![\w])")


@dataclass(frozen=True)
class Masked:
    """A text with its self-identifying strings replaced, and how many were."""

    text: str
    count: int


def model_name_patterns(model: str) -> list[str]:
    """Regular expressions for a run's model name in the spellings a reply may use.

    ``openai:gpt-5.5`` → ``gpt[\\s_-]*5\\.5`` (gpt-5.5, GPT 5.5, GPT5.5);
    ``hf:/models/Qwen3-VL-8B`` and ``openai:Qwen/Qwen3-VL-8B`` → their last
    path part, and the organisation before the slash.
    """
    name = model.split(":", 1)[1] if ":" in model else model
    parts = [p for p in re.split(r"[\\/]", name) if p.strip()]
    # A hub id ("Qwen/Qwen3-VL-8B") names its organisation too; a folder path's parents are no names.
    hub_id = len(parts) == 2 and not name.startswith(("/", ".", "~"))
    candidates = parts[-1:] + (parts[:1] if hub_id else [])
    patterns = []
    for candidate in candidates:
        tokens = [t for t in re.split(r"[\s_-]+", candidate.strip()) if t]
        if not tokens or len("".join(tokens)) < 3:
            continue  # a one- or two-letter name would mask ordinary words
        patterns.append(r"[\s_-]*".join(re.escape(t) for t in tokens))
    return patterns


def mask_identity(text: str, *, models: Iterable[str] = (), extra: Iterable[str] = ()) -> Masked:
    """``text`` with self-descriptions, the given models' names, ``extra`` strings, vendors and families masked."""
    count = 0

    def sub(pattern: re.Pattern[str], mark: str, value: str) -> str:
        nonlocal count
        value, n = pattern.subn(mark, value)
        count += n
        return value

    for pattern in _SELF_DESCRIPTIONS:
        text = sub(pattern, SELF_MARK, text)
    names = [p for m in models for p in model_name_patterns(m)] + [re.escape(e) for e in extra if e.strip()]
    if names:
        own = re.compile(rf"(?<![\w]){'|'.join(sorted(set(names), key=len, reverse=True))}(?![\w])", re.I)
        text = sub(own, MODEL_MARK, text)
    text = sub(_VENDOR_RE, VENDOR_MARK, text)
    text = sub(_FAMILY_RE, MODEL_MARK, text)
    text = sub(_AMBIGUOUS_RE, MODEL_MARK, text)
    return Masked(text, count)
