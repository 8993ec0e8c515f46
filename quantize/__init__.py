"""Stage `quantize`: `StaticModel` -> `QuantizedModel` (PaddleSlim PTQ, INT8)."""

from .ptq import count_quantized_ops, quantize_int8

__all__ = ["quantize_int8", "count_quantized_ops"]
