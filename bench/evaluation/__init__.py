"""The public evaluation corpus (``bench/corpus/``) and its runner: ``make eval``, ``make eval-ci``.

``corpus`` reads the manifest and derives pages; ``scoring`` defines word and character F1;
``gates`` decides what fails CI; ``runner`` drives the embedded pipeline and Tesseract;
``report`` writes the dated report. See docs/evaluation.md.
"""
