// EdgekitBridge over edgekit_c.h: NSString <-> UTF-8, CVPixelBuffer / CGImage bytes ->
// ek_image for one call, ek_status -> NSError with ek_last_error()'s line. No logic of the
// core lives here (the JNI bridge in android_demo/ is the same layer, and is host-tested).
#import "EdgekitBridge.h"

#include <mutex>

#include "edgekit_c.h"

NSErrorDomain const EKErrorDomain = @"com.edgekit.core";

@interface EKTimings ()
- (instancetype)initWithTimings:(const ek_timings &)t;
@end

@interface EKSelftestReport ()
- (instancetype)initWithOk:(BOOL)ok json:(NSString *)json;
@end

@implementation EKTimings
- (instancetype)initWithTimings:(const ek_timings &)t {
  if ((self = [super init])) {
    _preprocessMs = t.preprocess_ms;
    _inferenceMs = t.inference_ms;
    _postprocessMs = t.postprocess_ms;
    _otherMs = t.other_ms;
    _totalMs = t.total_ms;
  }
  return self;
}
@end

@implementation EKSelftestReport
- (instancetype)initWithOk:(BOOL)ok json:(NSString *)json {
  if ((self = [super init])) {
    _ok = ok;
    _json = [json copy];
  }
  return self;
}
@end

namespace {

// Read at once: ek_last_error() lives until the next ek_* call on this thread.
NSError *error_of(ek_status status) {
  const char *line = ek_last_error();
  NSString *message = (line && *line) ? [NSString stringWithUTF8String:line]
                                      : [NSString stringWithFormat:@"%s error", ek_status_name(status)];
  return [NSError errorWithDomain:EKErrorDomain
                             code:status
                         userInfo:@{NSLocalizedDescriptionKey : message ?: @"(message not UTF-8)"}];
}

NSError *bridge_error(EKStatus status, NSString *message) {
  return [NSError errorWithDomain:EKErrorDomain code:status userInfo:@{NSLocalizedDescriptionKey : message}];
}

// Takes a library-owned JSON string.
NSString *take(char *json) {
  NSString *out = json ? [NSString stringWithUTF8String:json] : nil;
  ek_free(json);
  return out;
}

// A locked 32BGRA camera buffer as an ek_image; unlocked when this goes out of scope.
class LockedFrame {
 public:
  explicit LockedFrame(CVPixelBufferRef buffer) : buffer_(buffer) {
    if (CVPixelBufferGetPixelFormatType(buffer) != kCVPixelFormatType_32BGRA || CVPixelBufferIsPlanar(buffer)) return;
    if (CVPixelBufferLockBaseAddress(buffer, kCVPixelBufferLock_ReadOnly) != kCVReturnSuccess) return;
    locked_ = true;
    image_ = ek_image{static_cast<const uint8_t *>(CVPixelBufferGetBaseAddress(buffer)),
                      static_cast<int32_t>(CVPixelBufferGetWidth(buffer)),
                      static_cast<int32_t>(CVPixelBufferGetHeight(buffer)),
                      static_cast<int32_t>(CVPixelBufferGetBytesPerRow(buffer)), EK_PIXEL_BGRA};
  }
  ~LockedFrame() {
    if (locked_) CVPixelBufferUnlockBaseAddress(buffer_, kCVPixelBufferLock_ReadOnly);
  }
  LockedFrame(const LockedFrame &) = delete;
  LockedFrame &operator=(const LockedFrame &) = delete;

  bool ok() const { return locked_ && image_.data != nullptr; }
  const ek_image *image() const { return &image_; }

 private:
  CVPixelBufferRef buffer_;
  bool locked_ = false;
  ek_image image_{};
};

// The pixel format of a decoded 8-bit CGImage's own bytes, or -1.
int format_of(CGImageRef image) {
  if (CGImageGetBitsPerComponent(image) != 8) return -1;
  const size_t channels = CGImageGetBitsPerPixel(image) / 8;
  const CGImageAlphaInfo alpha = CGImageGetAlphaInfo(image);
  const CGBitmapInfo order = CGImageGetBitmapInfo(image) & kCGBitmapByteOrderMask;
  const bool little = order == kCGBitmapByteOrder32Little;
  if (channels == 1 && alpha == kCGImageAlphaNone) return EK_PIXEL_GRAY;
  if (channels == 3 && alpha == kCGImageAlphaNone) return EK_PIXEL_RGB;
  if (channels != 4) return -1;
  const bool alpha_last = alpha == kCGImageAlphaLast || alpha == kCGImageAlphaNoneSkipLast ||
                          alpha == kCGImageAlphaPremultipliedLast;
  const bool alpha_first = alpha == kCGImageAlphaFirst || alpha == kCGImageAlphaNoneSkipFirst ||
                           alpha == kCGImageAlphaPremultipliedFirst;
  if (alpha_last && !little) return EK_PIXEL_RGBA;   // bytes R G B A
  if (alpha_first && little) return EK_PIXEL_BGRA;   // bytes B G R A
  return -1;
}

}  // namespace

@implementation EdgekitBridge {
  ek_assets *_assets;
}

+ (NSString *)versionJSON {
  return [NSString stringWithUTF8String:ek_version()];
}

- (instancetype)initWithFolder:(NSString *)folder options:(NSString *)optionsJSON error:(NSError **)error {
  if ((self = [super init])) {
    const ek_status status = ek_open(folder.UTF8String, optionsJSON.UTF8String, &_assets);
    if (status != EK_OK) {
      if (error) *error = error_of(status);
      return nil;
    }
  }
  return self;
}

- (void)dealloc {
  ek_close(_assets);
}

- (void)close {
  ek_close(_assets);
  _assets = nullptr;
}

- (NSString *)describe:(NSError **)error {
  char *json = nullptr;
  const ek_status status = ek_describe(_assets, &json);
  if (status != EK_OK) {
    if (error) *error = error_of(status);
    return nil;
  }
  return take(json);
}

- (NSString *)runModel:(NSString *)model pixelBuffer:(CVPixelBufferRef)pixelBuffer error:(NSError **)error {
  const LockedFrame frame(pixelBuffer);
  if (!frame.ok()) {
    if (error) *error = bridge_error(EKStatusInput, @"the camera frame is not a readable kCVPixelFormatType_32BGRA buffer");
    return nil;
  }
  char *json = nullptr;
  const ek_status status = ek_run(_assets, model.UTF8String, frame.image(), &json);
  if (status != EK_OK) {
    if (error) *error = error_of(status);
    return nil;
  }
  return take(json);
}

- (NSString *)ocrPixelBuffer:(CVPixelBufferRef)pixelBuffer
                         det:(NSString *)det
                         rec:(NSString *)rec
                         cls:(NSString *)cls
                       error:(NSError **)error {
  const LockedFrame frame(pixelBuffer);
  if (!frame.ok()) {
    if (error) *error = bridge_error(EKStatusInput, @"the camera frame is not a readable kCVPixelFormatType_32BGRA buffer");
    return nil;
  }
  char *json = nullptr;
  const ek_status status = ek_ocr(_assets, det.UTF8String, rec.UTF8String, cls.UTF8String, frame.image(), &json);
  if (status != EK_OK) {
    if (error) *error = error_of(status);
    return nil;
  }
  return take(json);
}

- (EKTimings *)lastTimings:(NSError **)error {
  ek_timings t{};
  const ek_status status = ek_last_timings(_assets, &t);
  if (status != EK_OK) {
    if (error) *error = error_of(status);
    return nil;
  }
  return [[EKTimings alloc] initWithTimings:t];
}

// EK_E_SELFTEST still returns its report.
static EKSelftestReport *report_of(ek_status status, char *json, NSError **error) {
  if (status != EK_OK && status != EK_E_SELFTEST) {
    ek_free(json);
    if (error) *error = error_of(status);
    return nil;
  }
  return [[EKSelftestReport alloc] initWithOk:status == EK_OK json:take(json)];
}

- (EKSelftestReport *)selftestModel:(NSString *)model error:(NSError **)error {
  char *json = nullptr;
  const ek_status status = ek_selftest(_assets, model.UTF8String, &json);
  return report_of(status, json, error);
}

- (EKSelftestReport *)selftestImageOfModel:(NSString *)model
                                     index:(int32_t)index
                                     image:(CGImageRef)image
                                     error:(NSError **)error {
  const int format = format_of(image);
  if (format < 0) {
    if (error) {
      *error = bridge_error(EKStatusInput, [NSString stringWithFormat:@"decoded image layout not supported "
                                                                      @"(%zu bits per pixel, alpha info %u)",
                                                                      CGImageGetBitsPerPixel(image),
                                                                      (unsigned)CGImageGetAlphaInfo(image)]);
    }
    return nil;
  }
  CFDataRef bytes = CGDataProviderCopyData(CGImageGetDataProvider(image));
  if (bytes == nullptr) {
    if (error) *error = bridge_error(EKStatusInput, @"the decoded image's bytes are not readable");
    return nil;
  }
  const ek_image pixels{CFDataGetBytePtr(bytes), static_cast<int32_t>(CGImageGetWidth(image)),
                        static_cast<int32_t>(CGImageGetHeight(image)), static_cast<int32_t>(CGImageGetBytesPerRow(image)),
                        format};
  char *json = nullptr;
  const ek_status status = ek_selftest_image(_assets, model.UTF8String, index, &pixels, &json);
  CFRelease(bytes);
  return report_of(status, json, error);
}

@end
