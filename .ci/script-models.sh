#!/usr/bin/env bash
# Tesseract's models for the scripts the PP-OCR wheels lack (workers/engines/cpu/other_scripts.py):
# Cyrillic, Arabic, Hebrew, Devanagari and Vietnamese script models and the Korean language model,
# and the language models of 22 Latin-script languages written with letters beyond English's (they
# read again the lines of such a page that hold words the language does not use), from Debian (no
# wheel ships them; tesserocr's wheel carries the library). Without them such pages are flagged
# script:unsupported / language:unsupported instead of read, those lines stay as the PP-OCR model
# read them, and
# tests/test_other_scripts.py skips. On Debian/Ubuntu as root they are installed through apt when
# missing; elsewhere this says what to install. The worker image installs the same packages.
set -euo pipefail

packages=(tesseract-ocr-script-cyrl tesseract-ocr-script-arab tesseract-ocr-script-hebr
  tesseract-ocr-script-deva tesseract-ocr-script-viet tesseract-ocr-kor)
files=(Cyrillic Arabic Hebrew Devanagari Vietnamese kor)
# The same list as compose/Dockerfile's (ISO 639-2/T codes, as Tesseract names its models).
for code in fra deu spa ita por nld pol ces slk tur ron hun swe dan nor fin hrv slv lit lav est cat; do
  packages+=("tesseract-ocr-$code")
  files+=("$code")
done
missing=()
for i in "${!files[@]}"; do
  ls /usr/share/tesseract-ocr/*/tessdata/"${files[$i]}".traineddata >/dev/null 2>&1 || missing+=("${packages[$i]}")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "script-models: installing ${missing[*]} (apt)" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}") \
    >/tmp/ocr-script-models-apt.log 2>&1 \
    || { echo "script-models: apt-get install failed (see /tmp/ocr-script-models-apt.log); those pages stay flagged" >&2; exit 0; }
else
  echo "script-models: ${missing[*]} missing and not root on an apt system; pages in those scripts stay flagged" >&2
fi
