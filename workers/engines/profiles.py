"""VLM model profiles as data: what the ``vllm`` recognizer sends, and how vLLM serves each model.

One place for both halves so the client and the server agree on the model name, the context
length and the token ceiling. The k8s manifests render their ``vllm serve`` arguments from here:

    python -m workers.engines.profiles serve-args glm-ocr --gpu-gb 80
    python -m workers.engines.profiles serve-args glm-ocr --card l40s-48gb --model /models/GLM-OCR --json
    python -m workers.engines.profiles k8s > k8s/vllm/profiles.yaml

A profile's ``mode`` follows the recogniser the catalogue (``ocrsite.catalogue.VLM_PROFILES``)
says serves it: ``"region"`` for ``vllm`` (one request per layout region crop, per-label prompts)
or ``"page"`` for ``vlm-page`` (one-stage models: the whole page in one request, the answer
carries grounding markers that become labelled regions). Adding a model is a dict here plus its
line in the catalogue, where settings find the profile names they accept.

Sizing (what the numbers below assume; measured figures belong in the bench note):
- 80 GB (A100/H100): weights of a 1–3 B OCR VLM take 2–7 GB; the rest is KV cache. Region
  crops are short (≈ 300–1,500 image tokens + ≤ 2k output), so 256 sequences fit with room;
  ``max_num_batched_tokens`` 16k keeps prefill chunks large enough to saturate the GPU.
- 48 GB (L40S/A6000): same models, roughly half the KV cache. Halve ``max_num_seqs`` and
  ``max_num_batched_tokens`` (the ``gpu48`` override), and keep the worker's
  ``VLLM_MAX_IN_FLIGHT`` at or just above ``max_num_seqs`` so requests queue in vLLM
  (visible as ``vllm:num_requests_waiting``, which KEDA scales on) rather than in the worker.
- 7–8 B generalist VLMs (qwen-vl): weights ≈ 16 GB in bf16; use the 80 GB card or halve again.
Prefix caching is off: every request carries a different image, so cached prefixes never hit and
the cache only costs memory and hashing time. Chunked prefill is on so long page prompts do not
stall the decode of everything else.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from typing import Any

from ocrsite import catalogue

# Task types a region can be sent as; layout labels map onto these (see TASK_OF_LABEL). A region
# profile has a prompt for each task its model was trained on; a region whose task has no prompt
# in the profile, or whose layout task is skip/abandon (LayoutBox.task), is not sent.
TASKS = ("text", "table", "formula", "chart")

# Our layout labels (workers.engines.base.LABELS) → the prompt used for them. Labels not listed
# here are not sent to the VLM (figures without a caption have no text to read).
TASK_OF_LABEL: dict[str, str] = {
    "text": "text",
    "title": "text",
    "figure_caption": "text",
    "table_caption": "text",
    "header": "text",
    "footer": "text",
    "reference": "text",
    "table": "table",
    "equation": "formula",
    "figure": "chart",
}

_COMMON_SERVE: dict[str, Any] = {
    "enable-chunked-prefill": True,
    "enable-prefix-caching": False,  # rendered as --no-enable-prefix-caching
    "gpu-memory-utilization": 0.90,
    "limit-mm-per-prompt": {"image": 1},
    "mm-processor-cache-gb": 0,  # every image is new: the processor cache never hits
}

PROFILES: dict[str, dict[str, Any]] = {
    "glm-ocr": {
        "model": "zai-org/GLM-OCR",
        # GLM-OCR is trained on these exact task prompts and no other: its SDK's
        # label_task_mapping skips charts and images, so figures are not sent to it.
        "prompts": {
            "text": "Text Recognition:",
            "table": "Table Recognition:",
            "formula": "Formula Recognition:",
        },
        "image_format": "png",
        "max_image_side": 1536,
        "max_tokens": 4096,
        "sampling": {},
        "serve": {
            "max-model-len": 16384,
            "max-num-seqs": 256,
            "max-num-batched-tokens": 16384,
            # GLM-OCR ships a multi-token-prediction head: one speculative token is a free win.
            "speculative-config": {"method": "mtp", "num_speculative_tokens": 1},
        },
        "gpu48": {"max-num-seqs": 128, "max-num-batched-tokens": 8192},
    },
    "qwen-vl": {
        "model": "Qwen/Qwen3-VL-8B-Instruct",
        # A generalist chat model: say exactly what to output, or it answers in prose.
        "prompts": {
            "text": "Transcribe all text in this image exactly as written. Output only the text.",
            "table": "Convert this table to an HTML <table>. Output only the HTML, no explanation.",
            "formula": "Write this formula in LaTeX. Output only the LaTeX, without $ delimiters.",
            "chart": "Describe this chart or figure in two or three sentences.",
        },
        "image_format": "jpeg",
        "max_image_side": 1280,
        "max_tokens": 4096,
        "sampling": {"repetition_penalty": 1.05},
        "serve": {
            "max-model-len": 16384,
            "max-num-seqs": 128,
            "max-num-batched-tokens": 16384,
        },
        "gpu48": {"max-num-seqs": 48, "max-num-batched-tokens": 8192, "max-model-len": 8192},
    },
    "paddleocr-vl": {
        "model": "PaddlePaddle/PaddleOCR-VL",
        # PaddleOCR-VL's four task prompts, as its pipeline sends them.
        "prompts": {
            "text": "OCR:",
            "table": "Table Recognition:",
            "formula": "Formula Recognition:",
            "chart": "Chart Recognition:",
        },
        "image_format": "png",
        "max_image_side": 1536,
        "max_tokens": 4096,
        "sampling": {},
        "serve": {
            "max-model-len": 16384,
            "max-num-seqs": 256,
            "max-num-batched-tokens": 16384,
            "trust-remote-code": True,
        },
        "gpu48": {"max-num-seqs": 128, "max-num-batched-tokens": 8192},
    },
    "deepseek-ocr": {
        "model": "deepseek-ai/DeepSeek-OCR",
        # One-stage: the prompt starts with the image placeholder and asks for grounded Markdown.
        "page_prompt": "<image>\n<|grounding|>Convert the document to markdown.",
        "image_format": "png",
        "max_image_side": 1280,
        # No max_tokens: the ceiling is the context minus this prompt budget (token_ceiling).
        # vLLM's DeepseekOCRProcessor (crop mode, base 1024, tiles 640, 2-6 tiles) makes at most
        # 273 global-view + 660 tile image tokens; the rest covers the text prompt and template.
        "prompt_budget": 1024,
        # The model's vLLM recipe: keep <|ref|>/<|det|> markers, and its n-gram logits processor
        # that stops repetition loops (whitelisting the table-cell tokens it must repeat).
        "sampling": {
            "skip_special_tokens": False,
            "vllm_xargs": {"ngram_size": 30, "window_size": 90, "whitelist_token_ids": [128821, 128822]},
        },
        "grounding": {"coord_scale": 999},
        "serve": {
            "max-model-len": 8192,
            "max-num-seqs": 64,
            "max-num-batched-tokens": 16384,
            "logits-processors": "vllm.model_executor.models.deepseek_ocr:NGramPerReqLogitsProcessor",
        },
        "gpu48": {"max-num-seqs": 32, "max-num-batched-tokens": 8192},
    },
}

# Labels one-stage models write in their grounding markers → ours.
GROUNDING_LABELS: dict[str, str] = {
    "title": "title",
    "sub_title": "title",
    "text": "text",
    "table": "table",
    "table_caption": "table_caption",
    "table_footnote": "table_caption",
    "image": "figure",
    "figure": "figure",
    "image_caption": "figure_caption",
    "figure_caption": "figure_caption",
    "equation": "equation",
    "formula": "equation",
    "header": "header",
    "footer": "footer",
    "page_number": "footer",
    "reference": "reference",
}


def get(name: str) -> dict[str, Any]:
    """A copy of one profile with its ``mode``; an unknown name is a configuration error naming
    the choices."""
    if name not in PROFILES:
        raise KeyError(f"unknown VLM profile {name!r}; choose one of {', '.join(sorted(PROFILES))}")
    profile = copy.deepcopy(PROFILES[name])
    if "mode" not in profile:
        profile["mode"] = "page" if catalogue.VLM_PROFILES[name] == "vlm-page" else "region"
    return profile


def prompt_budget(profile: dict[str, Any]) -> int:
    """Tokens a request's prompt may take: the profile's own figure, else an upper bound for the
    region VLMs here (GLM-OCR, Qwen-VL, PaddleOCR-VL: one token per 28×28 pixels after the 2×2
    merge of 14-pixel patches, for a crop of ``max_image_side`` squared) plus the text prompt."""
    if "prompt_budget" in profile:
        return int(profile["prompt_budget"])
    side = -(-int(profile["max_image_side"]) // 28)
    return side * side + 256


def token_ceiling(name: str) -> int:
    """The most completion tokens a request of this profile may ask for. vLLM rejects (HTTP 400,
    a permanent region failure here) any request whose prompt plus ``max_tokens`` exceed
    ``max-model-len``, so the ceiling is the smallest served context (80 GB or 48 GB card) minus
    the prompt budget, or the profile's ``max_tokens`` when that is lower."""
    profile = get(name)
    context = min(int(profile["serve"]["max-model-len"]), int(profile.get("gpu48", {}).get("max-model-len", 1 << 30)))
    ceiling = context - prompt_budget(profile)
    return min(int(profile.get("max_tokens", ceiling)), ceiling)


def serve_options(name: str, gpu_gb: int = 80) -> dict[str, Any]:
    profile = get(name)
    # The served name is the profile's model id even when argv[0] is a local weights path (the
    # shared model volume), so workers need no VLLM_MODEL.
    options = {"served-model-name": profile["model"], **_COMMON_SERVE, **profile["serve"]}
    if gpu_gb < 80:
        options.update(profile.get("gpu48", {}))
    return options


def serve_args(name: str, gpu_gb: int = 80, model: str | None = None) -> list[str]:
    """``vllm serve`` argv for a profile: the model (or ``model``, e.g. a local weights path),
    then ``--flag value`` pairs."""
    args = [model or get(name)["model"]]
    for key, value in serve_options(name, gpu_gb).items():
        if value is True:
            args.append(f"--{key}")
        elif value is False:
            args.append(f"--no-{key}")
        elif isinstance(value, dict | list):
            args += [f"--{key}", json.dumps(value, separators=(",", ":"))]
        else:
            args += [f"--{key}", str(value)]
    return args


# GPU cards the Kubernetes overlays serve on → memory (GB) that picks the sizing above.
CARDS: dict[str, int] = {
    "a100-80gb": 80,  # AKS Standard_NC24ads_A100_v4, GKE nvidia-a100-80gb
    "h100-80gb": 80,
    "l40s-48gb": 48,  # AWS g6e
}


K8S_FILE = "k8s/vllm/profiles.yaml"


def render_k8s() -> str:
    """``k8s/vllm/profiles.yaml``: each profile's served model and ``vllm serve`` argv for an
    80 GB and a 48 GB card, for the vLLM Deployment's ``args``. JSON lists are valid YAML, so
    no YAML library is needed; ``tests/test_vlm_output.py`` fails if the file drifts from here."""
    lines = [
        "# Generated by `python -m workers.engines.profiles k8s > k8s/vllm/profiles.yaml`; edit",
        "# workers/engines/profiles.py instead (a test fails when this file and the profiles differ).",
        "# Per profile: the vllm serve argv (model first) for 80 GB (A100/H100) and 48 GB (L40S) cards.",
        "# Sizing notes are in the profiles module's docstring.",
    ]
    for name in PROFILES:
        profile = get(name)
        lines += [
            f"{name}:",
            f"  mode: {profile['mode']}",
            f"  model: {json.dumps(profile['model'])}",
            f"  gpu80: {json.dumps(serve_args(name, 80))}",
            f"  gpu48: {json.dumps(serve_args(name, 48))}",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.engines.profiles")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve-args", help="print the vllm serve arguments of a profile, one per line")
    p.add_argument("profile", choices=sorted(PROFILES))
    p.add_argument("--gpu-gb", type=int, default=80)
    p.add_argument("--card", choices=sorted(CARDS), help="size for this card (overrides --gpu-gb)")
    p.add_argument("--model", help="argv[0] instead of the model id, e.g. a weights path on a volume")
    p.add_argument("--json", action="store_true", help="a JSON list (for k8s args:)")
    sub.add_parser("list")
    sub.add_parser("k8s", help=f"print {K8S_FILE}")
    ns = parser.parse_args(argv)
    if ns.cmd == "k8s":
        sys.stdout.write(render_k8s())
        return 0
    if ns.cmd == "list":
        for name in PROFILES:
            profile = get(name)
            print(f"{name}\t{profile['mode']}\t{profile['model']}")
        return 0
    args = serve_args(ns.profile, CARDS[ns.card] if ns.card else ns.gpu_gb, model=ns.model)
    print(json.dumps(args) if ns.json else "\n".join(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
