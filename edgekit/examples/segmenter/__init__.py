"""The segmenter example: a small encoder-decoder labelling every pixel of synthetic scenes (background + 3 shapes)."""
