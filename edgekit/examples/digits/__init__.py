"""The bundled example: a small CNN for scikit-learn's handwritten digits (8x8 scans, 10 classes)."""
