"""Synthetic document pages with known blocks, for layout detectors (CDLA's ten classes)."""
