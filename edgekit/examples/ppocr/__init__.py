"""PP-OCRv4 mobile (det, rec) and the mobile v2.0 direction classifier, from the rapidocr_onnxruntime wheel.

    python -m edgekit.examples.ppocr.models              # where the three ONNX files are
    python -m edgekit.examples.ppocr.make_data OUT       # rendered calibration/evaluation sets + truth
    edgekit build --config edgekit/examples/ppocr/rec.toml --model "$(python -m edgekit.examples.ppocr.models rec)" \
        --eval OUT/rec_eval.npz --calib OUT/rec_calib.npz --quant int8
"""
