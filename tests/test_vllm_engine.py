"""The ``vllm`` recognizer at its protocol boundary, against a real HTTP server on 127.0.0.1.

vLLM itself cannot run in the default suite (no GPU, no weights); ``tests.support.openai_server`` speaks
the same OpenAI chat-completions protocol over real sockets, records every request body, counts
requests in flight and notices disconnects, so every byte the recognizer sends and every
failure it must survive is real. (``make test-vllm`` runs the same recognizer against a real
vLLM on CPU.)
"""

from __future__ import annotations

import base64
import io
import threading
import time

import numpy as np
import pytest
from PIL import Image

from tests.support.openai_server import OpenAIServer, Reply, echo_prompt, prompt_of
from workers.engines import profiles
from workers.engines.base import EngineError, LayoutBox
from workers.engines.vllm import VllmConfig, VllmRecognizer

PAGE = np.full((600, 400, 3), 255, np.uint8)
PAGE[100:140, 50:350] = (10, 20, 30)  # something to see in the first crop


def recognizer(server: OpenAIServer, **overrides) -> VllmRecognizer:
    fields = {
        "base_url": server.url,
        "timeout_s": 5.0,
        "retries": 2,
        "backoff_s": 0.01,
        "backoff_max_s": 0.05,
        "cancel_poll_s": 0.05,
    }
    fields.update(overrides)
    return VllmRecognizer(VllmConfig(**fields))


REGIONS = [
    LayoutBox("text", (50, 100, 350, 140)),
    LayoutBox("table", (20, 200, 380, 400)),
    LayoutBox("equation", (100, 420, 300, 470)),
    LayoutBox("figure", (20, 480, 380, 590)),
]


def test_requests_carry_model_image_prompt_and_sampling():
    with OpenAIServer() as server:
        rec = recognizer(server, profile="glm-ocr", max_tokens=1234)
        result = rec.recognize(PAGE, REGIONS)
    bodies = sorted(server.stats.requests, key=prompt_of)
    assert len(bodies) == 3  # not the figure: GLM-OCR has no prompt for it
    glm = profiles.get("glm-ocr")
    sent_prompts = {prompt_of(b) for b in bodies}
    assert sent_prompts == {glm["prompts"][t] for t in ("text", "table", "formula")}
    for body in bodies:
        assert body["model"] == "zai-org/GLM-OCR"
        assert body["temperature"] == 0.0
        assert body["max_tokens"] == 1234
        image_part = body["messages"][0]["content"][0]
        assert image_part["type"] == "image_url"
        url = image_part["image_url"]["url"]
        assert url.startswith("data:image/png;base64,")
        crop = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        assert crop.format == "PNG"
    # The text region's crop is the box plus padding, and it carries the dark band we drew.
    text_body = next(b for b in bodies if prompt_of(b) == glm["prompts"]["text"])
    crop = np.asarray(
        Image.open(
            io.BytesIO(base64.b64decode(text_body["messages"][0]["content"][0]["image_url"]["url"].split(",", 1)[1]))
        ).convert("RGB")
    )
    assert crop.shape[:2] == (40 + 8, 300 + 8)
    assert crop[4:44, 4:304].mean() < 40 and crop[:3].mean() > 250
    # Each answer went back to its own region.
    assert [t.text for t in result.texts[:3]] == [
        f"answer to: {glm['prompts'][t]}" for t in ("text", "table", "formula")
    ]
    assert result.texts[3].text == "" and "not-sent" in result.texts[3].flags
    assert rec.name == "vllm:glm-ocr"


def test_skip_and_abandon_boxes_never_reach_the_vlm():
    """PP-DocLayoutV3 images (skip) and headers/page numbers (abandon) are figure/header/footer
    regions here, but the layout model's task says not to read them; a chart goes only to a
    model with a chart prompt (PaddleOCR-VL), never to GLM-OCR with a text prompt."""
    boxes = [
        LayoutBox("text", (50, 100, 350, 140), task="text"),
        LayoutBox("figure", (20, 200, 380, 400), task="skip"),
        LayoutBox("header", (20, 10, 380, 40), task="abandon"),
        LayoutBox("footer", (180, 560, 220, 590), task="abandon"),
        LayoutBox("figure", (20, 420, 380, 550), task="chart"),
    ]
    with OpenAIServer(echo_prompt) as server:
        glm = recognizer(server, profile="glm-ocr").recognize(PAGE, boxes)
        glm_prompts = [prompt_of(b) for b in server.stats.requests]
        server.stats.requests.clear()
        paddle_vl = recognizer(server, profile="paddleocr-vl").recognize(PAGE, boxes)
        vl_prompts = sorted(prompt_of(b) for b in server.stats.requests)
    assert glm_prompts == ["Text Recognition:"]
    assert [bool(t.text) for t in glm.texts] == [True, False, False, False, False]
    assert all("not-sent" in t.flags for t in glm.texts[1:])
    assert vl_prompts == ["Chart Recognition:", "OCR:"]
    assert [bool(t.text) for t in paddle_vl.texts] == [True, False, False, False, True]


def test_deepseek_request_never_asks_for_more_tokens_than_the_context_allows():
    """An 8192 ceiling with an 8192 context made vLLM refuse every page (400); a configured
    ceiling above what the context allows is clamped too."""
    reply = "<|ref|>text<|/ref|><|det|>[[0, 0, 999, 999]]<|/det|>\nhello"
    context = profiles.serve_options("deepseek-ocr", 48)["max-model-len"]
    with OpenAIServer(lambda body, n: Reply(text=reply)) as server:
        recognizer(server, profile="deepseek-ocr").recognize(PAGE, [])
        recognizer(server, profile="deepseek-ocr", max_tokens=50_000).recognize(PAGE, [])
    for body in server.stats.requests:
        assert body["max_tokens"] + profiles.prompt_budget(profiles.get("deepseek-ocr")) <= context


def test_profile_sampling_rides_in_the_body():
    """qwen-vl adds vLLM's repetition_penalty; the page profile adds skip_special_tokens and
    the n-gram processor's vllm_xargs: these must reach the server as top-level fields."""
    with OpenAIServer() as server:
        recognizer(server, profile="qwen-vl").recognize(PAGE, REGIONS[:1])
        page = recognizer(server, profile="deepseek-ocr")
        server.behaviour = lambda body, n: Reply(text="<|ref|>text<|/ref|><|det|>[[0, 0, 999, 999]]<|/det|>\nhello")
        page.recognize(PAGE, [])
    qwen, deepseek = server.stats.requests
    assert qwen["model"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert qwen["repetition_penalty"] == 1.05
    assert qwen["messages"][0]["content"][0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert deepseek["skip_special_tokens"] is False
    assert deepseek["vllm_xargs"]["ngram_size"] == 30
    assert prompt_of(deepseek).startswith("<image>")


def test_one_stage_page_grounding_becomes_regions_in_page_pixels():
    answer = (
        "<|ref|>title<|/ref|><|det|>[[100, 50, 899, 100]]<|/det|>\n# Annual report\n\n"
        "<|ref|>text<|/ref|><|det|>[[100, 120, 899, 400]]<|/det|>\nRevenue grew.\n\n"
        "<|ref|>table<|/ref|><|det|>[[100, 420, 899, 800]]<|/det|>\n<table><tr><td>1</td></tr></table>\n"
    )
    with OpenAIServer(lambda body, n: Reply(text=answer)) as server:
        result = recognizer(server, profile="deepseek-ocr").recognize(PAGE, [])
    (body,) = server.stats.requests
    page_image = Image.open(
        io.BytesIO(base64.b64decode(body["messages"][0]["content"][0]["image_url"]["url"].split(",", 1)[1]))
    )
    assert page_image.size == (400, 600)  # the whole page went, not a crop
    labels = [box.label for box, _ in result.extra]
    assert labels == ["title", "text", "table"]
    title_box = result.extra[0][0].bbox
    # 0..999 model space → 400×600 page pixels.
    assert title_box == pytest.approx((100 / 999 * 400, 50 / 999 * 600, 899 / 999 * 400, 100 / 999 * 600), abs=0.1)
    assert [t.text for _, t in result.extra] == [
        "# Annual report",
        "Revenue grew.",
        "<table><tr><td>1</td></tr></table>",
    ]
    assert result.texts == []


def test_429_and_503_are_retried_then_succeed():
    def flaky(body, n):
        return {1: Reply(status=429), 2: Reply(status=503)}.get(n, Reply(text="fine"))

    with OpenAIServer(flaky) as server:
        result = recognizer(server, retries=3).recognize(PAGE, REGIONS[:1])
    assert [t.text for t in result.texts] == ["fine"]
    assert result.texts[0].error is None
    assert len(server.stats.requests) == 3


def test_hung_server_times_out_and_region_fails_with_stable_code_after_retries():
    """Tables hang, text answers: the table region fails alone with vllm:timeout after
    1 + retries attempts; the page still returns."""

    def tables_hang(body, n):
        return Reply(hang=True) if prompt_of(body) == "Table Recognition:" else Reply(text="ok")

    with OpenAIServer(tables_hang) as server:
        rec = recognizer(server, timeout_s=0.3, retries=2)
        started = time.monotonic()
        result = rec.recognize(PAGE, REGIONS[:2])
        elapsed = time.monotonic() - started
    text, table = result.texts
    assert text.text == "ok" and text.error is None
    assert table.error is not None and table.error[0] == "vllm:timeout"
    assert "after 3 attempts" in table.error[1]
    hung = [b for b in server.stats.requests if prompt_of(b) == "Table Recognition:"]
    assert len(hung) == 3
    # Three 0.3 s timeouts at least; no upper bound is asserted: the server hangs for an hour, so
    # returning at all shows the timeouts fired, and a loaded machine must not fail the test.
    assert elapsed >= 0.9
    # Each timed-out attempt closed its connection: the server saw three disconnects.
    assert server.wait_for(lambda s: s.disconnects == 3, timeout=3)


def test_slow_trickle_is_bounded_by_the_total_deadline():
    """A server that sends one byte at a time never trips a read timeout; the per-attempt total
    deadline still ends it."""
    with OpenAIServer(lambda body, n: Reply(text="x" * 50, dribble_s=5.0)) as server:
        rec = recognizer(server, timeout_s=0.4, retries=0)
        with pytest.raises(EngineError) as info:
            rec.recognize(PAGE, REGIONS[:1])
        # The server saw the client hang up before the body was out: the deadline ended the
        # attempt, not the end of the trickle (evidence from the server, not a wall-clock guess).
        assert server.wait_for(lambda s: s.disconnects == 1, timeout=10)
    # Every region failed transiently: the page is retryable, not failed.
    assert info.value.code == "vllm:timeout" and not info.value.permanent


def test_bad_request_is_not_retried():
    with OpenAIServer(lambda body, n: Reply(status=400)) as server:
        result = recognizer(server, retries=3).recognize(PAGE, REGIONS[:1])
    assert result.texts[0].error[0] == "vllm:bad-request"
    assert len(server.stats.requests) == 1


def test_cancel_aborts_in_flight_requests_and_server_sees_disconnect():
    with OpenAIServer(lambda body, n: Reply(hang=True)) as server:
        rec = recognizer(server, timeout_s=30)
        flag = threading.Event()
        outcome: dict = {}

        def run():
            try:
                rec.recognize(PAGE, REGIONS, cancelled=flag.is_set)
            except EngineError as exc:
                outcome["error"] = exc

        worker = threading.Thread(target=run)
        worker.start()
        assert server.wait_for(lambda s: s.in_flight == 3, timeout=5)  # the figure is not sent to GLM-OCR
        flag.set()
        worker.join(timeout=5)
        assert not worker.is_alive()
        assert outcome["error"].code == "job:cancelled" and outcome["error"].permanent
        # The server's handlers saw all four connections close: vLLM would abort the sequences.
        assert server.wait_for(lambda s: s.disconnects == 3 and s.in_flight == 0, timeout=5)
        # The request threads count themselves out as they unwind, just after the cancel returns
        # (a clean clone's run on 2026-12-06 read 3 here once): all three must, within seconds.
        deadline = time.monotonic() + 5
        while rec.in_flight and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rec.in_flight == 0


def test_in_flight_never_exceeds_the_bound():
    with OpenAIServer(lambda body, n: Reply(text="ok", delay_s=0.02)) as server:
        rec = recognizer(server, max_in_flight=3)
        boxes = [LayoutBox("text", (0, i * 10, 100, i * 10 + 9)) for i in range(12)]
        threads = [threading.Thread(target=rec.recognize, args=(PAGE, boxes)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
    assert len(server.stats.requests) == 36
    # Three threads share one bound: the server never saw more than three at once, and saw three.
    assert server.stats.peak_in_flight == 3
    assert rec.peak_in_flight == 3


def test_looping_answer_is_cut_and_flagged():
    loop = "Revenue by quarter: " + "the same row again | " * 200

    def answers(body, n):
        if prompt_of(body) == "Text Recognition:":
            return Reply(text=loop, finish_reason="length")
        return Reply(text="Here is the table:\n```markdown\n| a | b |\n|---|---|\n| 1 |\n```")

    with OpenAIServer(answers) as server:
        text, table = recognizer(server).recognize(PAGE, REGIONS[:2]).texts
    assert "loop-cut" in text.flags
    assert text.text.startswith("Revenue by quarter: the same row again")
    assert text.text.count("the same row again") == 1
    # Chat wrapping stripped; the table has a short row, so it is flagged, not silently kept.
    assert table.text.startswith("| a | b |") and "```" not in table.text and "Here is" not in table.text
    assert "chat-artefact" in table.flags and "table-invalid" in table.flags


def test_server_down_is_waited_out_then_fails_with_overloaded_without_spending_retries():
    """Connection refused (a vLLM restarting, rescheduled or scaled to zero) is overload: retried
    without counting ``retries`` until the overload deadline, then the page fails with
    ``vllm:overloaded`` (permanent: waiting more is the deadline's job, not the page attempts')."""
    with OpenAIServer(echo_prompt) as server:
        url = server.url
    rec = VllmRecognizer(
        VllmConfig(base_url=url, timeout_s=1, retries=0, backoff_s=0.01, backoff_max_s=0.05, overload_deadline_s=0.5)
    )
    started = time.monotonic()
    with pytest.raises(EngineError) as info:
        rec.recognize(PAGE, REGIONS[:2])
    assert info.value.code == "vllm:overloaded" and info.value.permanent
    assert "cannot reach" in info.value.message
    assert time.monotonic() - started >= 0.5


def test_429_for_a_while_spends_no_retry():
    """retries=0, yet a server answering 429 (then 503) for its first requests still gives every
    region its text: overload is waited out, not counted (before: the region failed at once)."""

    def busy_then_fine(body, n):
        if n <= 9:
            return Reply(status=429 if n % 2 else 503)
        return Reply(text="fine")

    with OpenAIServer(busy_then_fine) as server:
        result = recognizer(server, retries=0, overload_deadline_s=30).recognize(PAGE, REGIONS[:3])
    assert [t.text for t in result.texts] == ["fine"] * 3
    assert all(t.error is None for t in result.texts)
    assert len(server.stats.requests) == 12  # nine refusals, none counted, then three answers


def test_overload_past_the_deadline_fails_the_page_with_overloaded():
    with OpenAIServer(lambda body, n: Reply(status=429)) as server:
        rec = recognizer(server, retries=5, overload_deadline_s=0.4)
        with pytest.raises(EngineError) as info:
            rec.recognize(PAGE, REGIONS[:2])
    assert info.value.code == "vllm:overloaded" and info.value.permanent
    assert "HTTP 429" in info.value.message


def test_stopping_ends_the_overload_wait_at_once_and_hands_the_page_back():
    """The worker's shutdown flag wakes every region waiting out a 429: the page raises
    ``worker:draining`` (transient) within a poll, not after the deadline."""
    stop = threading.Event()
    with OpenAIServer(lambda body, n: Reply(status=429)) as server:
        rec = recognizer(
            server, retries=0, backoff_s=5, backoff_max_s=10, overload_deadline_s=600, stopping=stop.is_set
        )
        outcome: dict = {}

        def run():
            try:
                rec.recognize(PAGE, REGIONS[:3])
            except EngineError as exc:
                outcome["error"] = exc
                outcome["at"] = time.monotonic()

        worker = threading.Thread(target=run)
        worker.start()
        assert server.wait_for(lambda s: len(s.requests) >= 3, timeout=5)
        stopped = time.monotonic()
        stop.set()
        worker.join(timeout=10)
    assert not worker.is_alive()
    assert outcome["error"].code == "worker:draining" and not outcome["error"].permanent
    assert outcome["at"] - stopped < 2.0


def test_shared_cap_bounds_requests_from_every_worker_together(broker_url):
    """Two recognizers (two workers' processes, each with its own bound of 8) share one cap of 3
    for the endpoint in Redis: the server never sees more than 3 at once, and sees 3."""
    with OpenAIServer(lambda body, n: Reply(text="ok", delay_s=0.1)) as server:
        recs = [
            recognizer(server, max_in_flight=8, global_max_in_flight=3, slots_url=broker_url, overload_deadline_s=60)
            for _ in range(2)
        ]
        boxes = [LayoutBox("text", (0, i * 10, 100, i * 10 + 9)) for i in range(12)]
        threads = [threading.Thread(target=r.recognize, args=(PAGE, boxes)) for r in recs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for r in recs:
            r.close()
    assert len(server.stats.requests) == 24
    assert server.stats.peak_in_flight == 3
    assert max(r.peak_in_flight for r in recs) <= 3


def test_missing_base_url_fails_at_build_naming_the_setting():
    with pytest.raises(EngineError) as info:
        VllmRecognizer(VllmConfig(base_url=""))
    assert info.value.permanent and "VLLM_BASE_URL" in info.value.message


def test_table_answer_gives_the_same_cell_grid_as_the_cpu_path():
    """A VLM's HTML table becomes the JSON grid every path produces (no cell boxes: the model
    gives none); the text kept is the model's HTML."""
    html = (
        "<table><tr><th rowspan='2'>Model</th><th colspan='2'>TEDS</th></tr>"
        "<tr><th>simple</th><th>complex</th></tr><tr><td>OTSL</td><td>0.965</td><td>0.934</td></tr></table>"
    )

    def answers(body, n):
        return Reply(text=html if prompt_of(body) == profiles.get("glm-ocr")["prompts"]["table"] else "words")

    with OpenAIServer(answers) as server:
        _text, table = recognizer(server, profile="glm-ocr").recognize(PAGE, REGIONS[:2]).texts
    grid = table.table
    assert (grid["rows"], grid["cols"], grid["header_rows"]) == (3, 3, 2)
    cells = {(c["row"], c["col"]): c for c in grid["cells"]}
    assert cells[(0, 0)]["rowspan"] == 2 and cells[(0, 1)]["colspan"] == 2
    assert [cells[(2, c)]["text"] for c in range(3)] == ["OTSL", "0.965", "0.934"]
    assert all(c["bbox"] is None for c in grid["cells"])


def test_gpu_time_is_each_request_s_share_of_the_server():
    """Cost per page: a request alone on the server costs its whole time; requests in flight
    together share it (the page's GPU seconds are the sum of its requests' shares)."""
    with OpenAIServer(lambda body, n: Reply(text="ok", delay_s=0.1)) as server:
        rec = recognizer(server, max_in_flight=4)
        alone = rec.recognize(PAGE, REGIONS[:1]).texts[0]
        together = rec.recognize(PAGE, [LayoutBox("text", (0, i * 10, 100, i * 10 + 9)) for i in range(8)]).texts
    assert alone.gpu_ms == alone.latency_ms >= 100
    assert all(0 < t.gpu_ms <= t.latency_ms for t in together)
    assert sum(t.gpu_ms for t in together) < 0.6 * sum(t.latency_ms for t in together)
