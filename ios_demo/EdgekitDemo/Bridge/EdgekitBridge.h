// EdgekitBridge: native/'s app core (edgekit_c.h) for Swift and Objective-C, a thin layer
// over the C API. Strings are UTF-8 JSON from the core; a failed call returns nil and an
// NSError in EKErrorDomain whose code is the ek_status and whose localizedDescription is
// the core's one line (e.g. "refused (checksum mismatch): ..."). Pixels are borrowed for
// one call. Calls on one bridge are serialised by the core; use one bridge per queue.
#import <CoreGraphics/CoreGraphics.h>
#import <CoreVideo/CoreVideo.h>
#import <Foundation/Foundation.h>

NS_ASSUME_NONNULL_BEGIN

extern NSErrorDomain const EKErrorDomain;

/// edgekit_c.h's ek_status (the NSError code).
typedef NS_ENUM(NSInteger, EKStatus) {
  EKStatusOK = 0,
  EKStatusInternal = 1,
  EKStatusArgument = 2,
  EKStatusModel = 3,
  EKStatusVersion = 4,
  EKStatusInput = 5,
  EKStatusRun = 6,
  EKStatusOutput = 7,
  EKStatusAssets = 8,
  EKStatusUnavailable = 9,
  EKStatusSelftest = 10,
};

/// edgekit_c.h's ek_pixel_format.
typedef NS_ENUM(NSInteger, EKPixelFormat) {
  EKPixelFormatGray = 0,
  EKPixelFormatBGR = 1,
  EKPixelFormatRGB = 2,
  EKPixelFormatBGRA = 3,
  EKPixelFormatRGBA = 4,
};

/// Milliseconds of the last run/OCR (ek_timings).
@interface EKTimings : NSObject
@property(nonatomic, readonly) double preprocessMs;
@property(nonatomic, readonly) double inferenceMs;
@property(nonatomic, readonly) double postprocessMs;
@property(nonatomic, readonly) double otherMs;
@property(nonatomic, readonly) double totalMs;
@end

/// A self-test's verdict and its report (JSON); a failed check is ok == NO, not an error.
@interface EKSelftestReport : NSObject
@property(nonatomic, readonly) BOOL ok;
@property(nonatomic, readonly, copy) NSString *json;
@end

@interface EdgekitBridge : NSObject

/// {"api", "edgekit", "runtime", "abi", "compiler", "decoder"}.
+ (NSString *)versionJSON;

/// Opens and verifies an asset set (every sha256, the opt/runtime version lock); nil + EKStatusAssets or
/// EKStatusVersion when it is refused. optionsJSON: nil or {"threads": 2, "power_mode": "high", "top_k": 3, ...}.
- (nullable instancetype)initWithFolder:(NSString *)folder
                                options:(nullable NSString *)optionsJSON
                                  error:(NSError **)error NS_DESIGNATED_INITIALIZER;
- (instancetype)init NS_UNAVAILABLE;

- (nullable NSString *)describe:(NSError **)error;

/// One model on a camera frame (kCVPixelFormatType_32BGRA, any bytes-per-row).
- (nullable NSString *)runModel:(NSString *)model pixelBuffer:(CVPixelBufferRef)pixelBuffer error:(NSError **)error;
/// The OCR system; nil model names pick the set's only det/rec/cls model, cls @"" runs without one.
- (nullable NSString *)ocrPixelBuffer:(CVPixelBufferRef)pixelBuffer
                                  det:(nullable NSString *)det
                                  rec:(nullable NSString *)rec
                                  cls:(nullable NSString *)cls
                                error:(NSError **)error;

- (nullable EKTimings *)lastTimings:(NSError **)error;

/// Golden vectors (and golden images when the core can decode them) of one model, nil = all.
- (nullable EKSelftestReport *)selftestModel:(nullable NSString *)model error:(NSError **)error;
/// One golden image (index into describe's "golden_images") decoded by ImageIO: its decoded bytes are
/// handed over as they are (no colour conversion), gray, RGB, RGBA or BGRA.
- (nullable EKSelftestReport *)selftestImageOfModel:(NSString *)model
                                              index:(int32_t)index
                                              image:(CGImageRef)image
                                              error:(NSError **)error;

/// Releases the models; later calls fail with EKStatusArgument. Also done on dealloc.
- (void)close;

@end

NS_ASSUME_NONNULL_END
