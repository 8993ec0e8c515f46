/*
 * edgekit_c.h: the app core's C API, for platform bridges (JNI, Objective-C++) and
 * C/C++ programs (the Linux camera demo). Plain C types, opaque handles, UTF-8
 * JSON strings for results, a status code from every call and no exception ever
 * crossing this boundary.
 *
 *   ek_assets* assets = NULL;
 *   if (ek_open("/data/app/edgekit", NULL, &assets) != EK_OK) {
 *     show_error(ek_last_error());                   // "refused (checksum mismatch): ..."
 *     return;
 *   }
 *   ek_image frame = {pixels, width, height, row_bytes, EK_PIXEL_RGBA};
 *   char* json = NULL;
 *   if (ek_run(assets, "digits", &frame, &json) == EK_OK) {
 *     show(json);                                     // {"model":..., "result":{"class":3,...}, "timings_ms":{...}}
 *     ek_free(json);
 *   }
 *   ek_close(assets);
 *
 * Ownership
 *  - Strings the caller receives through a `char** json` are allocated by the library
 *    and must be released with ek_free(); on any status but EK_OK (and EK_E_SELFTEST,
 *    which still returns its report) *json is set to NULL.
 *  - ek_version(), ek_status_name() and ek_last_error() return library-owned strings:
 *    ek_version()'s and ek_status_name()'s live for the process; ek_last_error()'s
 *    until the next ek_* call on the same thread. Copy them to keep them.
 *  - ek_image.data is borrowed for the duration of the call only; the library never
 *    keeps a pointer to caller pixels.
 *  - An ek_assets handle owns its models (engines included) until ek_close().
 *  - ek_image_decode() fills an ek_image whose pixels the library owns; release them
 *    with ek_image_free().
 *
 * Threading
 *  - Every function may be called from any thread. Calls on one handle are
 *    serialised by a lock inside the handle (Paddle-Lite predictors are not
 *    re-entrant); open one handle per thread to run models in parallel.
 *  - ek_close() must not race with other calls on the same handle: stop using it first.
 *  - The last error is thread-local.
 *
 * Paths are UTF-8; the loader reads plain files (Android: copy the asset folder out
 * of the APK first, e.g. to getFilesDir(), then open that folder).
 */
#ifndef EDGEKIT_C_H
#define EDGEKIT_C_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define EK_API
#elif defined(__GNUC__) || defined(__clang__)
#define EK_API __attribute__((visibility("default")))
#else
#define EK_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define EK_API_VERSION 1

/* 1..7 are also edgekit-lite-run's exit codes for the same causes. */
typedef enum ek_status {
  EK_OK = 0,
  EK_E_INTERNAL = 1,    /* a bug or out of memory */
  EK_E_ARGUMENT = 2,    /* NULL handle/pointer, unknown model name, bad options JSON */
  EK_E_MODEL = 3,       /* foreign or truncated .nb, or Paddle-Lite could not load it */
  EK_E_VERSION = 4,     /* a model.nb's opt version differs from the linked runtime's ("version mismatch") */
  EK_E_INPUT = 5,       /* the image does not fit (size, stride, format), or a spec file is invalid */
  EK_E_RUN = 6,         /* Paddle-Lite failed while running */
  EK_E_OUTPUT = 7,      /* writing failed */
  EK_E_ASSETS = 8,      /* asset set or bundle refused: "missing file", "checksum mismatch", "schema" */
  EK_E_UNAVAILABLE = 9, /* this build lacks the part: no Paddle-Lite runtime, no image decoder */
  EK_E_SELFTEST = 10,   /* the self-test ran and a check failed; its report says which */
  EK_E_SIGNATURE = 16   /* opened with a public key: the set is unsigned, signed by another key, or changed
                           after signing ("refused (signature): ..."); 16 is edgekit's SignatureError exit code */
} ek_status;

/* Channel order of 8-bit pixels: Android Bitmap/ImageAnalysis RGBA_8888 -> EK_PIXEL_RGBA,
 * iOS kCVPixelFormatType_32BGRA -> EK_PIXEL_BGRA, OpenCV / V4L2 decoders -> EK_PIXEL_BGR. */
typedef enum ek_pixel_format {
  EK_PIXEL_GRAY = 0,
  EK_PIXEL_BGR = 1,
  EK_PIXEL_RGB = 2,
  EK_PIXEL_BGRA = 3,
  EK_PIXEL_RGBA = 4
} ek_pixel_format;

typedef struct ek_image {
  const uint8_t* data; /* first pixel of the first row */
  int32_t width;
  int32_t height;
  int32_t stride;      /* bytes from one row to the next; 0: width * channels */
  int32_t format;      /* an ek_pixel_format */
} ek_image;

/* Milliseconds of the last ek_run / ek_ocr on a handle (OCR: summed over its models). */
typedef struct ek_timings {
  double preprocess_ms;
  double inference_ms;
  double postprocess_ms;
  double other_ms;     /* OCR crops and rotations */
  double total_ms;     /* wall time of the call */
} ek_timings;

typedef struct ek_assets ek_assets;

/* {"api": 1, "edgekit": "0.1.0", "runtime": "v2.13-rc" or null, "abi", "compiler", "decoder": "stb_image" or null} */
EK_API const char* ek_version(void);
/* The message of the last failed call on this thread, one line "<what>; <fix>"; "" after a success. */
EK_API const char* ek_last_error(void);
/* "ok", "internal", "argument", "model", "version", "input", "run", "output", "assets", "unavailable", "selftest",
 * "signature" */
EK_API const char* ek_status_name(ek_status status);

/*
 * Opens an asset set (a folder with assets.json from `edgekit package`) or one bundle
 * (a folder with manifest.json from `edgekit build`), verifies every listed file's
 * size and sha256 and every model.nb's opt version against the linked runtime, then
 * loads the models. options_json may be NULL or an object with any of:
 *   "threads": 1, "power_mode": "no_bind"|"high"|"low"|"full"|"rand_high"|"rand_low",
 *   "top_k": 1 (classification: adds the k best as "top"), "cls_thresh": 0.9,
 *   "models": ["name", ...] (load only these; [] verifies without loading any)
 * Refusals: EK_E_ASSETS / EK_E_VERSION with ek_last_error() = "refused (<reason>): ...".
 * Checksums detect corruption, not tampering: an app that must refuse edited sets uses ek_open_signed.
 * Without a runtime (EK_E_UNAVAILABLE from ek_run) the files are still verified.
 */
EK_API ek_status ek_open(const char* path, const char* options_json, ek_assets** out);

/*
 * Signed asset sets (docs/security.md). ek_open_signed is ek_open for an app built with a
 * public key: before any file is hashed or any index field read, assets.json must be
 * signed by public_key (assets.json.sig, written by `edgekit package --sign KEY.pem`), else
 * EK_E_SIGNATURE; afterwards the checks of ek_open. A bundle folder (manifest.json) has no
 * signature and is refused too. public_key: the 32 raw bytes of the Ed25519 public key
 * (RFC 8032; what ek_public_key_from_pem extracts); NULL is ek_open. EK_E_UNAVAILABLE
 * when this build has no libsodium (the ARM cross builds): keys are refused, never ignored.
 * ek_describe then reports "signed_by": the key id (first 16 hex digits of its sha256).
 */
EK_API ek_status ek_open_signed(const char* path, const char* options_json, const uint8_t* public_key,
                                ek_assets** out);
/* The 32 raw bytes of the Ed25519 key in `pem` (text as `openssl pkey -pubout` writes it,
 * NUL-terminated) into out[32]; EK_E_ARGUMENT for a private key or anything else. */
EK_API ek_status ek_public_key_from_pem(const char* pem, uint8_t* out);
EK_API void ek_close(ek_assets* assets); /* NULL is fine */

/* The verified set: {"kind": "assets"|"bundle", "root", "opt_version", "runtime_version", "signed_by", "files",
 * "bytes", "verify_ms", "models": [{"name", "task", "target", "precision", "opt_version", "dir",
 * "inputs", "outputs", "labels", "golden", "golden_images": [paths], "loaded"}]} */
EK_API ek_status ek_describe(ek_assets* assets, char** json);

/* The models in index order, without parsing JSON: names and tasks ("classification", "ocr_det",
 * "ocr_rec", "ocr_cls", "detection", "segmentation"; "" without task.json) are owned by the handle and live until ek_close();
 * NULL for an index out of range. */
EK_API int32_t ek_model_count(ek_assets* assets);
EK_API const char* ek_model_name(ek_assets* assets, int32_t index);
EK_API const char* ek_model_task(ek_assets* assets, int32_t index);

/* One model on one image: {"model", "task", "result", "timings_ms": {"preprocess", "inference",
 * "postprocess", "total"}}. "result" is what `edgekit run BUNDLE IMAGE` prints:
 * classification {"class", "label", "score"}; ocr_det [{"box": [x0,y0,x1,y1] in image pixels,
 * "score"}]; ocr_rec {"text", "confidence"}; ocr_cls {"label", "score"}; detection [{"box": [x0,y0,x1,y1]
 * in image pixels, "class", "label", "score"}] best first; segmentation {"size": [h, w], "classes": {label:
 * percent}, "rle": [[class, run], ...]} (the class of every image pixel, row-major runs). */
EK_API ek_status ek_run(ek_assets* assets, const char* model, const ek_image* image, char** json);

/* The OCR system (detect -> crop -> direction -> recognise), as `edgekit ocr`:
 * {"lines": [{"box", "det_score", "angle", "angle_score", "text", "confidence"}], "timings_ms":
 * {"preprocess", "inference", "postprocess", "crop", "total", "det": {...}, "cls": {...}, "rec": {...}}}.
 * A NULL model name picks the set's only model of that task; cls "" runs without a classifier. */
EK_API ek_status ek_ocr(ek_assets* assets, const char* det, const char* rec, const char* cls, const ek_image* image,
                        char** json);

/* The stage times of the last successful ek_run / ek_ocr on this handle. */
EK_API ek_status ek_last_timings(ek_assets* assets, ek_timings* out);

/*
 * Replays golden/ of one model (NULL: every model) on the linked runtime: golden vectors,
 * and golden images when this build can decode them. EK_OK when every gated check passes,
 * EK_E_SELFTEST (report still returned) when one fails: {"ok", "runtime", "models": [...]}.
 */
EK_API ek_status ek_selftest(ek_assets* assets, const char* model, char** json);
/* One golden image (index into "golden_images" of ek_describe) decoded by the caller. */
EK_API ek_status ek_selftest_image(ek_assets* assets, const char* model, int32_t index, const ek_image* image,
                                   char** json);

/* Decodes PNG/JPEG/BMP bytes as edgekit's Python path does (gray, RGB or RGBA; 16-bit refused).
 * EK_E_UNAVAILABLE in builds without stb_image. Release with ek_image_free(). */
EK_API ek_status ek_image_decode(const uint8_t* bytes, size_t size, ek_image* out);
EK_API void ek_image_free(ek_image* image);

EK_API void ek_free(char* text); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif /* EDGEKIT_C_H */
