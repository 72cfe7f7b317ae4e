"""Pure rules over page content: reading order, Markdown/JSON formats, label corrections, accuracy.

No Django, no I/O: plain values in, plain values out (checked by import-linter).
"""
