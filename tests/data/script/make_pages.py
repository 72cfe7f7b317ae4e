"""Writes japanese_text.pdf and korean_text.pdf beside this file: one A4 page each of our own
text (written for this project, no other source), set in 11-pt Droid Sans Fallback, the CJK font
PyMuPDF ships (Apache-2.0). Re-run with `.venv/bin/python tests/data/script/make_pages.py`; the
tests read the committed PDFs, whose text layer is the ground truth when they are rasterised."""

from __future__ import annotations

from pathlib import Path

import pymupdf

HERE = Path(__file__).parent

JA = """文字認識の評価用ページ

この文書は、光学文字認識の精度を確かめるために書かれた日本語の文章です。紙の書類をスキャンした画像から文字を読み取るとき、ひらがな、カタカナ、漢字がまじった文章を正しく読めるかどうかが大切です。

私たちのシステムは、アップロードされた書類をページごとに分け、文字のある行を見つけてから、一行ずつ認識します。認識した結果は、テキストとしてだけでなく、位置の情報といっしょに保存されます。

東京都千代田区の会社で、二〇二六年十二月四日に会議が開かれました。参加者は十五人で、新しい検索サービスの計画について話し合いました。予算は三百万円で、来年の春までに完成させる予定です。

図書館では、古い新聞や雑誌をデジタル化する作業が進んでいます。読み取った文章は、だれでも検索できるように公開されます。誤りが少なければ少ないほど、利用者は目的の記事を早く見つけることができます。

最後に、このページには句読点や括弧（かっこ）、数字の１２３と英字のＡＢＣもふくまれています。"""
KO = """문자 인식 평가용 페이지

이 문서는 광학 문자 인식의 정확도를 확인하기 위해 작성된 한국어 문장입니다. 종이 서류를 스캔한 이미지에서 글자를 읽을 때, 한글과 숫자가 섞인 문장을 바르게 읽을 수 있는지가 중요합니다.

우리 시스템은 올린 서류를 쪽마다 나누고, 글자가 있는 줄을 찾은 다음 한 줄씩 인식합니다. 인식한 결과는 글자뿐 아니라 위치 정보와 함께 저장됩니다.

서울특별시의 한 회사에서 2026년 12월 4일에 회의가 열렸습니다. 참석자는 열다섯 명이었고, 새로운 검색 서비스 계획에 대해 이야기했습니다. 예산은 삼백만 원이며, 내년 봄까지 완성할 예정입니다.

도서관에서는 오래된 신문과 잡지를 디지털로 바꾸는 작업이 진행되고 있습니다. 읽어 낸 글은 누구나 검색할 수 있도록 공개됩니다."""


def make(text: str, out: Path, font: str) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    # Embedded (then subset), so any PDF reader draws the same glyphs, not its own CJK fallback.
    page.insert_font(fontname="cjk", fontbuffer=pymupdf.Font(font).buffer)
    left = page.insert_textbox(pymupdf.Rect(60, 60, 535, 800), text, fontname="cjk", fontsize=11, lineheight=1.6)
    if left < 0:
        raise ValueError(f"{out.name}: the text does not fit the page")
    doc.subset_fonts()
    doc.save(out, garbage=4, deflate=True)


if __name__ == "__main__":
    make(JA, HERE / "japanese_text.pdf", "japan")
    make(KO, HERE / "korean_text.pdf", "korea")
