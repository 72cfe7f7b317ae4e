#!/usr/bin/env bash
# What `make eval` needs beyond the venv: Tesseract and its language data for the corpus's scripts
# (the reference column; a language whose data is missing shows "n/a" in the report). On
# Debian/Ubuntu as root they are installed through apt when missing; elsewhere this says what to install.
set -euo pipefail

langs=(eng osd heb hin mar ara chi-sim chi-tra jpn jpn-vert kor rus ukr bul fra deu ita spa por nld eus pol ces tur vie)
missing=()
command -v tesseract >/dev/null || missing+=(tesseract-ocr)
for lang in "${langs[@]}"; do
  file="${lang//-/_}.traineddata"
  ls /usr/share/tesseract-ocr/*/tessdata/"$file" >/dev/null 2>&1 || missing+=("tesseract-ocr-$lang")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "eval-tools: installing ${missing[*]} (apt)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") \
    >/tmp/ocr-eval-tools-apt.log 2>&1 \
    || { echo "eval-tools: apt-get install failed (see /tmp/ocr-eval-tools-apt.log); Tesseract's column will be partial" >&2; exit 0; }
else
  echo "eval-tools: ${missing[*]} missing and not root on an apt system; Tesseract's column will be partial" >&2
fi
