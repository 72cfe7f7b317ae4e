"""Output hygiene and grounding parsing (pure functions), and profiles rendered into vLLM args."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.documents import ROOT
from workers.engines import profiles, vlm_output
from workers.engines.base import LABELS


def test_tail_loop_is_cut_to_one_copy():
    text = "Totals for 2024. " + "Net income 12 | " * 60
    cut, flagged = vlm_output.cut_loop(text, truncated=False)
    assert flagged
    assert cut.startswith("Totals for 2024. Net income 12")
    assert cut.count("Net income 12") == 1


def test_loop_truncated_mid_unit_is_cut():
    text = "Intro. " + "\\frac{a}{b} + " * 40 + "\\fra"
    cut, flagged = vlm_output.cut_loop(text, truncated=True)
    assert flagged and cut.count("\\frac{a}{b}") == 1 and cut.startswith("Intro.")


@pytest.mark.parametrize(
    "text",
    [
        "Chapter 1 .................................. 5",  # dot leaders: short single-char run mid-line
        "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |",
        "A normal paragraph that ends normally, with no repetition at all in it whatsoever.",
        "ha ha ha",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert vlm_output.cut_loop(text, truncated=True) == (text, False)


def test_clean_flags_truncation_without_a_loop():
    text, flags = vlm_output.clean("A long answer that was cut by max_tokens", task="text", finish_reason="length")
    assert flags == ["truncated"] and text.startswith("A long answer")


def test_loop_check_is_cheap_on_a_long_normal_answer():
    text = " ".join(f"word{i}" for i in range(1500))  # ~10k chars, no loop
    started = time.process_time()
    for _ in range(20):
        vlm_output.clean(text, task="text", finish_reason="stop")
    assert (time.process_time() - started) / 20 < 0.005


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("```markdown\n# Title\nBody\n```", "# Title\nBody"),
        ("Here is the transcribed text:\nHello world", "Hello world"),
        (
            "Sure! Here's the table:\n```html\n<table><tr><td>1</td></tr></table>\n```\nLet me know if you need more.",
            "<table><tr><td>1</td></tr></table>",
        ),
        ("Plain answer", "Plain answer"),
    ],
)
def test_chat_artefacts_are_stripped(raw, expected):
    assert vlm_output.strip_chat_artefacts(raw) == expected


def test_formula_delimiters_are_removed():
    assert vlm_output.clean("$$ E = mc^2 $$", task="formula", finish_reason="stop")[0] == "E = mc^2"
    assert vlm_output.clean("\\[ a^2 \\]", task="formula", finish_reason="stop")[0] == "a^2"


@pytest.mark.parametrize(
    "table, valid",
    [
        ("<table><tr><td>1</td><td>2</td></tr></table>", True),
        ("<table><tr><td>1</td><td>2</td></tr>", False),  # cut before </table>
        ("<table><tr><td>1</tr></td></table>", False),  # crossed tags
        ("| a | b |\n| --- | --- |\n| 1 | 2 |", True),
        ("| a | b |\n| --- | --- |\n| 1 | 2 | 3 |", False),
        ("| a | b |\n| 1 | 2 |", False),  # no separator row
        ("just words", False),
    ],
)
def test_tables_are_validated(table, valid):
    assert vlm_output.table_is_valid(table) is valid
    flags = vlm_output.clean(table, task="table", finish_reason="stop")[1]
    assert ("table-invalid" in flags) is (not valid)


def test_grounding_parses_labels_boxes_and_text():
    raw = (
        "<|ref|>title<|/ref|><|det|>[[0, 0, 999, 99]]<|/det|>\n# Heading\n\n"
        "<|ref|>image<|/ref|><|det|>[[10, 100, 500, 500], [510, 100, 999, 500]]<|/det|>\n"
        "<|ref|>text<|/ref|><|det|>[[x, y]]<|/det|>\nunparseable box\n"
        "<|ref|>text<|/ref|><|det|>[[0, 600, 999, 1200]]<|/det|>\nBody<|end▁of▁sentence|>"
    )
    blocks = vlm_output.parse_grounding(raw, width=1000, height=2000, coord_scale=999)
    assert [b.label for b in blocks] == ["title", "image", "image", "text"]
    assert blocks[0].bbox == (0.0, 0.0, 1000.0, pytest.approx(198.2, abs=0.1))
    assert blocks[0].text == "# Heading"
    assert blocks[1].bbox[0] == pytest.approx(10.0, abs=0.1) and blocks[2].text == ""
    assert blocks[3].bbox[3] == 2000.0  # clamped to the page
    assert blocks[3].text.startswith("Body")


def test_profiles_map_every_label_and_have_all_prompts():
    assert set(profiles.TASK_OF_LABEL) == set(LABELS)
    assert set(profiles.GROUNDING_LABELS.values()) <= set(LABELS)
    for name in profiles.PROFILES:
        profile = profiles.get(name)
        if profile["mode"] == "region":
            assert {"text", "table", "formula"} <= set(profile["prompts"]) <= set(profiles.TASKS), name
        else:
            assert profile["page_prompt"].startswith("<image>")
            assert profile["sampling"]["skip_special_tokens"] is False


def test_no_profile_asks_for_more_tokens_than_its_context_allows():
    """vLLM answers 400 (a permanent region failure) when prompt + max_tokens exceed max-model-len,
    on either card size. deepseek-ocr once asked for 8192 with an 8192 context."""
    for name, profile in profiles.PROFILES.items():
        ceiling = profiles.token_ceiling(name)
        for gpu_gb in (80, 48):
            context = profiles.serve_options(name, gpu_gb)["max-model-len"]
            assert 0 < ceiling <= context - profiles.prompt_budget(profile), (name, gpu_gb)
    # DeepSeek-OCR's largest prompt in vLLM: 273 global-view + 660 tile image tokens, plus text.
    assert profiles.prompt_budget(profiles.get("deepseek-ocr")) > 273 + 660
    assert profiles.token_ceiling("deepseek-ocr") == 8192 - 1024


def test_serve_args_render_for_each_card_size():
    args = profiles.serve_args("glm-ocr", gpu_gb=80)
    assert args[0] == "zai-org/GLM-OCR"
    assert args[args.index("--max-num-seqs") + 1] == "256"
    assert "--no-enable-prefix-caching" in args and "--enable-chunked-prefill" in args
    assert json.loads(args[args.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 1}
    small = profiles.serve_args("glm-ocr", gpu_gb=48)
    assert small[small.index("--max-num-seqs") + 1] == "128"
    for name in profiles.PROFILES:
        rendered = profiles.serve_args(name)
        assert "--max-model-len" in rendered and "--max-num-batched-tokens" in rendered


def test_serve_args_cli(capsys):
    assert profiles.main(["serve-args", "deepseek-ocr", "--json"]) == 0
    args = json.loads(capsys.readouterr().out)
    assert args[0] == "deepseek-ai/DeepSeek-OCR" and "--logits-processors" in args


def test_k8s_profiles_file_matches_the_profiles():
    """k8s/vllm/profiles.yaml is rendered from profiles.py; the two must not drift."""
    path = ROOT / profiles.K8S_FILE
    assert path.read_text() == profiles.render_k8s(), (
        "run: python -m workers.engines.profiles k8s > k8s/vllm/profiles.yaml"
    )
    import yaml

    data = yaml.safe_load(path.read_text())
    assert data["glm-ocr"]["gpu80"] == profiles.serve_args("glm-ocr", 80)
